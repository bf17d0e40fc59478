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

**Integrity.** Every draw dataset (``/samples``, ``/trace``) carries HDF5's
Fletcher-32 checksum per chunk (``fletcher32=True``): HDF5 checks it on every read, and a
chunk whose bytes changed on disk fails to read instead of returning wrong values.
[`SampleStore.verify`][tfp_sgmcmc.driver.store.SampleStore.verify] reads every checked
row once and names the damaged row ranges (whole HDF5 chunks) in a
``StoreDamagedError``; any other read that meets a damaged chunk raises the same error.
A zero-length or non-HDF5 file is refused before it is opened for writing (h5py would
replace a zero-length file with an empty store). Stores written before the checksums
were added are read with a warning: their damage cannot be detected.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import h5py
import numpy as np

from tfp_sgmcmc.driver.errors import StoreDamagedError

__all__ = ["SampleStore", "SAMPLES_FILE"]

SAMPLES_FILE = "samples.h5"
# HDF5 chunk sizes: at most this many bytes of draws per chunk (fewer draws than
# asked for when one draw is large), and HDF5's own limit on one chunk.
_CHUNK_BYTES = 8 << 20
_MAX_CHUNK_BYTES = 4 << 30


_DRAW_GROUPS = ("samples", "trace")
# Space reserved before an append: twice the chunk's bytes (a rewritten partial HDF5
# chunk moves, and checksums and indexes grow) plus room for HDF5's metadata.
_RESERVE_FACTOR = 2
_RESERVE_EXTRA = 64 << 10
# Damaged ranges named in full in an error message; more are counted.
_MAX_NAMED_RANGES = 6


def _space_left(directory: str) -> int | None:
    """Bytes free to the user on ``directory``'s file system (``None``: unknown)."""
    try:
        st = os.statvfs(directory)
    except (OSError, AttributeError):  # no statvfs (Windows), or it failed
        return None
    return st.f_bavail * st.f_frsize if st.f_blocks else None


@contextlib.contextmanager
def _h5_os_errors() -> Iterator[None]:
    """HDF5 reports some failed writes (at close and flush) as ``RuntimeError``; they are
    I/O errors, raised as ``OSError`` with the system ``errno`` HDF5 names in its message."""
    try:
        yield
    except RuntimeError as e:
        found = re.search(r"errno = (\d+)", str(e))
        code = int(found.group(1)) if found else errno.EIO
        raise OSError(code, os.strerror(code)) from e  # HDF5's own words: the cause


def _h5_array(x: Any) -> np.ndarray:
    return np.asarray(x)


def _damaged_ranges(ds: h5py.Dataset, stop: int) -> list[tuple[int, int]]:
    """Row ranges ``[start, stop)`` of ``ds[:stop]`` that fail to read (whole HDF5 chunks).

    Reads blocks of whole chunks of about ``_CHUNK_BYTES``; only a block that fails is
    read again chunk by chunk, so a sound dataset costs one pass of large reads.
    """
    if stop <= 0:
        return []
    rows = int(ds.chunks[0]) if ds.chunks else stop
    row_bytes = int(np.prod(ds.shape[1:], dtype=np.int64)) * ds.dtype.itemsize
    block = max(1, _CHUNK_BYTES // max(1, rows * row_bytes)) * rows
    bad: list[tuple[int, int]] = []
    for start in range(0, stop, block):
        end = min(start + block, stop)
        try:
            ds[start:end]
            continue
        except OSError:
            pass
        for a in range(start, end, rows):
            b = min(a + rows, end)
            try:
                ds[a:b]
            except OSError:
                if bad and bad[-1][1] == a:
                    bad[-1] = (bad[-1][0], b)  # adjacent chunks: one range
                else:
                    bad.append((a, b))
    return bad


def _damage_message(path: str, damaged: list[tuple[str, int, int]], num_draws: int) -> str:
    named = [f"{name} rows {a}-{b - 1}" for name, a, b in damaged[:_MAX_NAMED_RANGES]]
    more = len(damaged) - len(named)
    listed = "; ".join(named) + (f"; and {more} more range(s)" if more else "")
    return (
        f"{path}: stored draws fail their checksums (damaged on disk): {listed} (of "
        f"{num_draws} recorded draws; the other rows read intact). The file is left as it "
        "is: copy out the intact rows (with h5py), restore it from a copy, or start the "
        "run again (overwrite=True)."
    )


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
            with _h5_os_errors(), h5py.File(self.path, "w") as f:
                for name, specs in groups.items():
                    g = f.create_group(name)
                    for key, (shape, dtype) in specs.items():
                        g.create_dataset(
                            str(key),
                            shape=(0, *shape),
                            maxshape=(None, *shape),
                            dtype=np.dtype(dtype),
                            chunks=chunks[name, key],
                            # A checksum per chunk: flipped bytes fail to read, never
                            # read as other numbers (4 bytes per chunk).
                            fletcher32=True,
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

        The disk space the append needs is reserved first
        ([`reserve`][tfp_sgmcmc.driver.store.SampleStore.reserve]), so a full disk, a
        quota or a file size limit is met before HDF5 writes anything.

        Returns:
          The number of draws in the file afterwards.

        Raises:
          OSError: the space cannot be reserved (the file is as the last append left
            it), or a write failed.
        """
        arrays = [*parts, *trace.values()]
        arrays += [x for leaves in (reductions or {}).values() for x in leaves]
        data = sum(int(np.asarray(a).nbytes) for a in arrays if a is not None)
        self.reserve(_RESERVE_FACTOR * data + _RESERVE_EXTRA)
        with _h5_os_errors(), h5py.File(self.path, "r+") as f:
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

    def reserve(self, nbytes: int) -> None:
        """Allocates ``nbytes`` of disk past the end of the file, before HDF5 writes.

        HDF5 that meets a full disk (or a quota, or a file size limit) in the middle of
        an append leaves its file with a recorded end beyond the written one, and the
        file then no longer opens: every draw in it is lost. ``posix_fallocate`` claims
        the blocks first, so the failure comes here, with the file untouched; HDF5
        writes into the reserved blocks and cuts the file to its own end when it closes
        it. Where the file system cannot allocate ahead (no ``posix_fallocate``, or it is
        not supported), the free space is compared instead.

        Raises:
          OSError: not enough space (``ENOSPC``, ``EDQUOT``, ``EFBIG``); the file keeps
            its size and content.
        """
        what = f"reserving {nbytes:,} bytes for the next chunk"
        fallocate = getattr(os, "posix_fallocate", None)
        if fallocate is not None:
            size = os.path.getsize(self.path)
            fd = os.open(self.path, os.O_RDWR)
            try:
                fallocate(fd, size, nbytes)
                return
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # gives back a partial allocation
                if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    raise OSError(e.errno, f"{e.strerror} ({what})", self.path) from None
            finally:
                os.close(fd)
        free = _space_left(os.path.dirname(os.path.abspath(self.path)))
        if free is not None and free < nbytes:
            raise OSError(
                errno.ENOSPC, f"No space left on device ({what}; {free:,} free)", self.path
            )

    @staticmethod
    def _append(ds: h5py.Dataset, values: np.ndarray) -> int:
        n0 = ds.shape[0]
        n1 = n0 + values.shape[0]
        ds.resize(n1, axis=0)
        ds[n0:n1] = values
        return n1

    def truncate(self, num_draws: int) -> None:
        """Cuts every draw-indexed dataset to ``num_draws`` rows.

        The file is [`check`][tfp_sgmcmc.driver.store.SampleStore.check]ed first: a
        zero-length or damaged file is never opened for writing.

        Raises:
          StoreDamagedError: see ``check``.
        """
        self.check(num_draws)
        with _h5_os_errors(), h5py.File(self.path, "r+") as f:
            for group in _DRAW_GROUPS:
                for ds in f[group].values():
                    if ds.shape[0] > num_draws:
                        ds.resize(num_draws, axis=0)
            f.flush()

    # -- integrity ------------------------------------------------------------ #
    def check(
        self, num_draws: int, part_specs: Sequence[tuple[Sequence[int], str]] | None = None
    ) -> None:
        """Checks the file's structure without reading the draws (cheap).

        Args:
          num_draws: draws the checkpoint records as written.
          part_specs: ``(per-draw shape, dtype name)`` of every state part, if known.

        Raises:
          StoreDamagedError: the file is zero-length, not HDF5, cannot be opened, lacks
            a group or a state part, holds a dataset shorter than ``num_draws`` rows, or
            one whose shape or dtype differs from ``part_specs``.
        """
        size = os.path.getsize(self.path)
        if size == 0:
            hint = (
                "no draws are recorded, so deleting it and resuming loses nothing"
                if num_draws == 0
                else "restore it from a copy, or start the run again (overwrite=True)"
            )
            raise StoreDamagedError(
                f"{self.path} is empty (0 bytes) but the run records {num_draws} draws: it "
                f"was truncated. It is left as it is; {hint}.",
                self.path,
            )
        if not h5py.is_hdf5(self.path):
            raise StoreDamagedError(
                f"{self.path} ({size:,} bytes) is not an HDF5 file (its header is damaged or "
                "it was replaced); it is left as it is.",
                self.path,
            )
        try:
            with h5py.File(self.path, "r") as f:
                missing = [g for g in _DRAW_GROUPS if g not in f]
                if missing:
                    raise StoreDamagedError(
                        f"{self.path} has no /{missing[0]} group: not a sample store, or a "
                        "damaged one.",
                        self.path,
                    )
                for group in _DRAW_GROUPS:
                    for key, ds in f[group].items():
                        if ds.shape[0] < num_draws:
                            raise StoreDamagedError(
                                f"{self.path}: dataset /{group}/{key} holds {ds.shape[0]} "
                                f"draws but the checkpoint records {num_draws} written.",
                                self.path,
                            )
                for i, (shape, dtype) in enumerate(part_specs or ()):
                    ds = f["samples"].get(str(i))
                    if ds is None or (list(ds.shape[1:]), ds.dtype.name) != (list(shape), dtype):
                        found = "missing" if ds is None else f"{list(ds.shape[1:])}/{ds.dtype}"
                        raise StoreDamagedError(
                            f"{self.path}: state part {i} is {found}, but the run's is "
                            f"{list(shape)}/{dtype}.",
                            self.path,
                        )
        except OSError as e:  # damaged HDF5 metadata
            raise StoreDamagedError(
                f"{self.path} cannot be read as HDF5 ({e}); it is left as it is.", self.path
            ) from e

    def verify(
        self, num_draws: int, part_specs: Sequence[tuple[Sequence[int], str]] | None = None
    ) -> bool:
        """Reads the first ``num_draws`` rows of every draw dataset once, checking them.

        Args:
          num_draws: draws the checkpoint records as written.
          part_specs: as in [`check`][tfp_sgmcmc.driver.store.SampleStore.check].

        Returns:
          Whether every dataset carries checksums (``False``: a store written before
          they were added; its rows were read, but damage in them cannot be detected).

        Raises:
          StoreDamagedError: a structural problem (``check``), or rows that fail their
            checksums (named as ``dataset rows a-b``; also in ``.damaged``).
        """
        self.check(num_draws, part_specs)
        damaged: list[tuple[str, int, int]] = []
        checked = True
        try:
            with h5py.File(self.path, "r") as f:
                for group in _DRAW_GROUPS:
                    for key, ds in f[group].items():
                        checked = checked and bool(ds.fletcher32)
                        for a, b in _damaged_ranges(ds, num_draws):
                            damaged.append((f"/{group}/{key}", a, b))
        except OSError as e:
            raise StoreDamagedError(f"{self.path} cannot be read ({e}).", self.path) from e
        if damaged:
            raise StoreDamagedError(
                _damage_message(self.path, damaged, num_draws), self.path, damaged
            )
        return checked

    def _read(self, ds: h5py.Dataset, stop: int | None, step: int) -> np.ndarray:
        """``ds[:stop:step]``; a chunk that fails its checksum is named (``verify``)."""
        try:
            return ds[:stop:step]
        except OSError:
            n = ds.shape[0] if stop is None else min(stop, ds.shape[0])
            bad = [(ds.name, a, b) for a, b in _damaged_ranges(ds, n)]
            if not bad:
                raise
            raise StoreDamagedError(_damage_message(self.path, bad, n), self.path, bad) from None

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
            return [self._read(g[str(i)], stop, step) for i in range(len(g))]

    def read_trace(self, stop: int | None = None, step: int = 1) -> dict[str, np.ndarray]:
        with h5py.File(self.path, "r") as f:
            return {k: self._read(ds, stop, step) for k, ds in f["trace"].items()}

    def read_reductions(self) -> dict[str, list[np.ndarray]]:
        with h5py.File(self.path, "r") as f:
            g = f["reductions"]
            return {name: [sub[str(j)][()] for j in range(len(sub))] for name, sub in g.items()}
