"""Append-only HDF5 storage of samples and traced diagnostics (via ``h5py``).

Layout of ``samples.h5`` in a run directory::

    /samples/<i>     [draws, *batch, *event_i]   state part i (one per part)
    /trace/<name>    [draws, ...]                traced diagnostics per draw
    /reductions/...  finalized reducer outputs (rewritten after every chunk)

Every dataset is chunked and resizable along the draw axis. The file is
opened, appended to, flushed and **closed** once per chunk, so between chunks
(where all the sampling time is spent) it is a closed, consistent HDF5 file:
a process killed while sampling leaves a readable file. The default
(earliest) HDF5 file format is used on purpose: the ``libver="latest"``/SWMR
format sets a "file open for writing" flag that a killed writer leaves behind,
and the file then cannot be reopened without ``h5clear``.

The checkpoint (``checkpoint.py``) is the authority on how many draws are
valid: rows written after the last checkpoint (a kill between the HDF5 flush
and the checkpoint) are cut by
[`SampleStore.truncate`][tfp_sgmcmc.driver.store.SampleStore.truncate] on resume.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import h5py
import numpy as np

__all__ = ["SampleStore", "SAMPLES_FILE"]

SAMPLES_FILE = "samples.h5"
# HDF5 chunk sizes: at most this many bytes of draws per chunk (fewer draws than
# asked for when one draw is large), and HDF5's own limit on one chunk.
_CHUNK_BYTES = 8 << 20
_MAX_CHUNK_BYTES = 4 << 30


def _h5_array(x: Any) -> np.ndarray:
    return np.asarray(x)


class SampleStore:
    """The ``samples.h5`` file of one run.

    Args:
      path: file path.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    # -- writing -------------------------------------------------------------- #
    def create(
        self,
        part_specs: Sequence[tuple[tuple[int, ...], str]],
        trace_specs: Mapping[str, tuple[tuple[int, ...], str]],
        chunk_draws: int,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        """Creates empty resizable datasets (shape ``[0, *per_draw_shape]``).

        Args:
          part_specs: ``(per-draw shape, dtype name)`` of every state part.
          trace_specs: name -> ``(per-draw shape, dtype name)`` of traced values.
          chunk_draws: HDF5 chunk length along the draw axis.
          attrs: file attributes (strings / numbers).
        """
        groups = {"samples": dict(enumerate(part_specs)), "trace": dict(trace_specs)}
        chunks = {}
        for name, specs in groups.items():
            for key, (shape, dtype) in specs.items():
                size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                if size >= _MAX_CHUNK_BYTES:
                    what = "state part" if name == "samples" else "traced value"
                    raise ValueError(
                        f"one draw of {what} {key!r} (shape {list(shape)}, {dtype}) takes "
                        f"{size:,} bytes: the sample store holds draws of under 4 GB."
                    )
                # HDF5 chunks must stay under 4 GB; a few MB reads and writes well.
                draws = max(1, min(int(chunk_draws), _CHUNK_BYTES // max(1, size)))
                chunks[name, key] = (draws, *shape)
        try:
            with h5py.File(self.path, "w") as f:
                for name, specs in groups.items():
                    g = f.create_group(name)
                    for key, (shape, dtype) in specs.items():
                        g.create_dataset(
                            str(key),
                            shape=(0, *shape),
                            maxshape=(None, *shape),
                            dtype=np.dtype(dtype),
                            chunks=chunks[name, key],
                        )
                f.create_group("reductions")
                for k, v in (attrs or {}).items():
                    f.attrs[k] = v
                f.flush()
        except BaseException:
            # No half-made store is left behind to be taken for a run.
            if os.path.exists(self.path):
                os.remove(self.path)
            raise

    def append(
        self,
        parts: Sequence[np.ndarray],
        trace: Mapping[str, np.ndarray],
        reductions: Mapping[str, Sequence[np.ndarray]] | None = None,
    ) -> int:
        """Appends one chunk of draws, rewrites the reductions, flushes, closes.

        Returns:
          The number of draws in the file afterwards.
        """
        with h5py.File(self.path, "r+") as f:
            n = None
            for i, p in enumerate(parts):
                n = self._append(f["samples"][str(i)], p)
            for k, v in trace.items():
                self._append(f["trace"][k], v)
            if reductions:
                g = f["reductions"]
                for name, leaves in reductions.items():
                    if name in g:
                        del g[name]
                    sub = g.create_group(name)
                    for j, leaf in enumerate(leaves):
                        sub.create_dataset(str(j), data=_h5_array(leaf))
            f.flush()
        return int(n or 0)

    @staticmethod
    def _append(ds: h5py.Dataset, values: np.ndarray) -> int:
        n0 = ds.shape[0]
        n1 = n0 + values.shape[0]
        ds.resize(n1, axis=0)
        ds[n0:n1] = values
        return n1

    def truncate(self, num_draws: int) -> None:
        """Cuts every draw-indexed dataset to ``num_draws`` rows.

        Raises:
          ValueError: a dataset holds fewer than ``num_draws`` rows (samples the
            checkpoint counts as written are missing).
        """
        with h5py.File(self.path, "r+") as f:
            for group in ("samples", "trace"):
                for key, ds in f[group].items():
                    if ds.shape[0] < num_draws:
                        raise ValueError(
                            f"{self.path}: dataset /{group}/{key} holds {ds.shape[0]} draws but "
                            f"the checkpoint records {num_draws} written"
                        )
                    if ds.shape[0] > num_draws:
                        ds.resize(num_draws, axis=0)
            f.flush()

    # -- reading -------------------------------------------------------------- #
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def num_draws(self) -> int:
        with h5py.File(self.path, "r") as f:
            lengths = {ds.shape[0] for g in ("samples", "trace") for ds in f[g].values()}
        return min(lengths) if lengths else 0

    def read_samples(self, stop: int | None = None, step: int = 1) -> list[np.ndarray]:
        with h5py.File(self.path, "r") as f:
            g = f["samples"]
            return [g[str(i)][:stop:step] for i in range(len(g))]

    def read_trace(self, stop: int | None = None, step: int = 1) -> dict[str, np.ndarray]:
        with h5py.File(self.path, "r") as f:
            return {k: ds[:stop:step] for k, ds in f["trace"].items()}

    def read_reductions(self) -> dict[str, list[np.ndarray]]:
        with h5py.File(self.path, "r") as f:
            g = f["reductions"]
            return {name: [sub[str(j)][()] for j in range(len(sub))] for name, sub in g.items()}
