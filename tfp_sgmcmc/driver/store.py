"""Append-only HDF5 storage of samples and traced diagnostics (via ``h5py``).

Layout of ``samples.h5`` in a run directory::

    /samples/<i>     [draws, *batch, *event_i]   state part i (one per part)
    /trace/<name>    [draws, ...]                traced diagnostics per draw
    /reductions/<name>/<j>  finalized reducer outputs (rewritten after every chunk)

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

**Identity and structure.** A checksum per HDF5 chunk says that bytes are as written,
not that they are this run's draws at this position: a chunk moved to other rows, or
copied in from another run, passes it. So every chunk of draws the driver appends also
gets a SHA-256 digest per dataset ([`chunk_digests`][tfp_sgmcmc.driver.store.chunk_digests])
over the run's ID, the chunk's index in the plan, its row range, the dataset's name,
dtype and shape and its bytes; the checkpoint keeps them and
[`SampleStore.verify_digests`][tfp_sgmcmc.driver.store.SampleStore.verify_digests]
recomputes them from the rows read. Every read also checks the file's structure against
the run's layout ([`store_layout`][tfp_sgmcmc.driver.store.store_layout]: which datasets,
their per-draw shapes, byte-exact dtypes, chunking, maximum shapes and checksum filter),
and any failure of HDF5 on damaged metadata is a ``StoreDamagedError``, never a raw
h5py error. The finalized reducer outputs in ``/reductions`` have one digest too
([`reductions_digest`][tfp_sgmcmc.driver.store.reductions_digest]), bound to the run's ID
and to the number of chunks of draws they cover, kept by the checkpoint and compared on
every read of them.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import h5py
import numpy as np

from tfp_sgmcmc.driver.errors import RunDirectoryError, RunMismatchError, StoreDamagedError

__all__ = [
    "SampleStore",
    "SAMPLES_FILE",
    "DatasetLayout",
    "store_layout",
    "dataset_names",
    "chunk_digests",
    "reductions_digest",
    "space_left",
]

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


def space_left(directory: str) -> int | None:
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


class DatasetLayout(NamedTuple):
    """What one draw dataset of a run's store must be: the per-draw ``shape``, the dtype
    as NumPy's byte-exact string (``"<f4"``: the byte order is part of it) and the HDF5
    chunk length ``chunk_rows`` along the draw axis."""

    shape: tuple[int, ...]
    dtype: str
    chunk_rows: int


def _chunk_rows(shape: Sequence[int], dtype: str, chunk_draws: int) -> int:
    """HDF5 chunk length along the draw axis: at most ``chunk_draws`` draws and about
    ``_CHUNK_BYTES`` (at least one draw)."""
    size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return max(1, min(int(chunk_draws), _CHUNK_BYTES // max(1, size)))


def dataset_names(num_parts: int, trace_names: Sequence[str]) -> list[str]:
    """The draw datasets of a store in digest order: ``samples/0..``, then ``trace/<name>``
    by name."""
    return [f"samples/{i}" for i in range(num_parts)] + [f"trace/{k}" for k in sorted(trace_names)]


def store_layout(
    part_specs: Sequence[tuple[Sequence[int], str]],
    trace_specs: Mapping[str, tuple[Sequence[int], str]],
    chunk_draws: int,
) -> dict[str, DatasetLayout]:
    """The draw datasets a store made by ``create`` with these arguments holds (name ->
    [`DatasetLayout`][tfp_sgmcmc.driver.store.DatasetLayout]), in digest order."""
    specs = {f"samples/{i}": spec for i, spec in enumerate(part_specs)}
    specs.update({f"trace/{k}": trace_specs[k] for k in sorted(trace_specs)})
    return {
        name: DatasetLayout(
            tuple(int(d) for d in shape),
            np.dtype(dtype).str,
            _chunk_rows(shape, dtype, chunk_draws),
        )
        for name, (shape, dtype) in specs.items()
    }


def _digest(run_id: str, index: int, start: int, name: str, values: np.ndarray) -> bytes:
    """SHA-256 of one dataset's rows of one chunk, bound to the run and the position."""
    a = np.ascontiguousarray(values)
    h = hashlib.sha256()
    head = f"tfp-sgmcmc chunk\0{run_id}\0{index}\0{start}\0{start + a.shape[0]}\0{name}\0"
    h.update(head.encode())
    h.update(f"{a.dtype.str}\0{list(a.shape)}\0".encode())
    h.update(memoryview(a).cast("B") if a.nbytes else b"")
    return h.digest()


def chunk_digests(
    run_id: str, index: int, start: int, arrays: Mapping[str, np.ndarray]
) -> np.ndarray:
    """The digests of one appended chunk of draws: ``uint8 [datasets, 32]``.

    Each is ``SHA-256("tfp-sgmcmc chunk", run_id, index, start, stop, name, dtype, shape,
    bytes)`` of one dataset's rows ``[start, stop)``, with ``index`` the chunk's place in
    the run's plan. Rows moved to another position, or copied from another run, change
    the digest even where their bytes and HDF5 checksums are intact.

    Args:
      run_id: the run's ID (``config["run_id"]``).
      index: the chunk's index in the plan.
      start: the first row the chunk writes.
      arrays: dataset name -> the chunk's rows, in
        [`dataset_names`][tfp_sgmcmc.driver.store.dataset_names] order.
    """
    out = [np.frombuffer(_digest(run_id, index, start, k, v), np.uint8) for k, v in arrays.items()]
    return np.stack(out) if out else np.zeros((0, 32), np.uint8)


def reductions_digest(
    run_id: str, chunks_done: int, reductions: Mapping[str, Sequence[np.ndarray]]
) -> np.ndarray:
    """The digest of the finalized reducer outputs in ``/reductions``: ``uint8 [32]``.

    ``SHA-256("tfp-sgmcmc reductions", run_id, chunks_done, then for every reducer by name
    and every leaf j: name, j, dtype, shape, bytes)``, with ``chunks_done`` the number of
    chunks of draws they summarize. The checkpoint keeps it, so reductions written by a
    chunk after the checkpoint, or edited, are told apart from the checkpoint's own.

    Args:
      run_id: the run's ID (``config["run_id"]``).
      chunks_done: chunks of draws the reductions cover.
      reductions: reducer name -> its finalized leaves (as ``append`` writes them).
    """
    h = hashlib.sha256(f"tfp-sgmcmc reductions\0{run_id}\0{int(chunks_done)}\0".encode())
    for name in sorted(reductions):
        for j, leaf in enumerate(reductions[name]):
            a = np.ascontiguousarray(_h5_array(leaf))
            h.update(f"{name}\0{j}\0{a.dtype.str}\0{list(a.shape)}\0".encode())
            h.update(memoryview(a).cast("B") if a.nbytes else b"")
    return np.frombuffer(h.digest(), np.uint8).copy()


@contextlib.contextmanager
def _reading(path: str, doing: str) -> Iterator[None]:
    """Any failure of HDF5 or h5py while reading a store is a ``StoreDamagedError``.

    A damaged file's metadata can make h5py raise nearly anything (``OSError``,
    ``KeyError``, ``ValueError``, ``TypeError``, ``IndexError``, ``RuntimeError``,
    ``SystemError``, ...), so every exception but our own is caught here: the caller gets
    one named error saying which file could not be read, never a raw traceback.
    """
    try:
        yield
    except RunDirectoryError:  # ours: already named
        raise
    except Exception as e:
        reason = " ".join(str(e).split())[:300] or type(e).__name__
        raise StoreDamagedError(
            f"{path} cannot be read as a sample store while {doing} ({type(e).__name__}: "
            f"{reason}): its HDF5 metadata is damaged. It is left as it is; restore it from "
            "a copy or start the run again (overwrite=True).",
            path,
        ) from e


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
                if any(int(d) < 1 for d in shape):
                    what = "state part" if name == "samples" else "traced value"
                    raise ValueError(
                        f"one draw of {what} {key!r} has shape {list(shape)}, with a dimension "
                        "of size 0: every dimension of the state (chains included) must be "
                        ">= 1."
                    )
                # HDF5 chunks must stay under 4 GB; a few MB reads and writes well.
                chunks[name, key] = (_chunk_rows(shape, dtype, chunk_draws), *shape)
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
                    # Strings as fixed-length ASCII (JSON escapes the rest): their size is
                    # in the attribute's own header, checked before a read (a damaged
                    # variable-length string's length sent HDF5 reading for minutes).
                    f.attrs[k] = np.bytes_(v.encode("ascii")) if isinstance(v, str) else v
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
        free = space_left(os.path.dirname(os.path.abspath(self.path)))
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
        self,
        num_draws: int,
        part_specs: Sequence[tuple[Sequence[int], str]] | None = None,
        layout: Mapping[str, DatasetLayout] | None = None,
        max_draws: int | None = None,
        exact: bool = True,
    ) -> None:
        """Checks the file's structure without reading the draws (cheap).

        Args:
          num_draws: draws the checkpoint records as written.
          part_specs: ``(per-draw shape, dtype name)`` of every state part, if known.
          layout: every draw dataset the store must hold, and nothing else
            ([`store_layout`][tfp_sgmcmc.driver.store.store_layout]), if known.
          max_draws: the most rows a dataset may hold (the checkpointed draws plus one
            chunk appended after it: a kill between the append and the checkpoint).
          exact: with ``layout``, also check each dataset's HDF5 chunking and maximum
            shape (a store of the current format; older ones may differ).

        Raises:
          StoreDamagedError: the file is zero-length, not HDF5, cannot be opened, lacks
            a group, a state part or a traced value, holds one it should not, holds a
            dataset shorter than ``num_draws`` rows, or one whose shape, dtype (byte
            order included) or chunking differs from the run's.
          RunMismatchError: a dataset holds more than ``max_draws`` rows: the checkpoint
            is older than the store (put back from a copy, or its count edited).
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
        with _reading(self.path, "checking its structure"):
            if not h5py.is_hdf5(self.path):
                raise StoreDamagedError(
                    f"{self.path} ({size:,} bytes) is not an HDF5 file (its header is damaged "
                    "or it was replaced); it is left as it is.",
                    self.path,
                )
            with h5py.File(self.path, "r") as f:
                self._check_open(f, num_draws, part_specs, layout, max_draws, exact)

    def _check_open(
        self,
        f: h5py.File,
        num_draws: int,
        part_specs: Sequence[tuple[Sequence[int], str]] | None,
        layout: Mapping[str, DatasetLayout] | None,
        max_draws: int | None,
        exact: bool,
    ) -> None:
        def refuse(what: str) -> StoreDamagedError:
            return StoreDamagedError(
                f"{self.path}: {what}. The file's HDF5 metadata was damaged or edited; it is "
                "left as it is: restore it from a copy or start the run again "
                "(overwrite=True).",
                self.path,
            )

        for group in (*_DRAW_GROUPS, "reductions"):
            if group not in f or not isinstance(f[group], h5py.Group):
                raise StoreDamagedError(
                    f"{self.path} has no /{group} group: not a sample store, or a damaged one.",
                    self.path,
                )
        found = {f"{g}/{k}" for g in _DRAW_GROUPS for k in f[g]}
        for name in sorted(found):
            ds = f[name]
            if not isinstance(ds, h5py.Dataset) or ds.ndim < 1:
                raise refuse(f"/{name} is not a dataset of draws")
            if ds.shape[0] < num_draws:
                raise StoreDamagedError(
                    f"{self.path}: dataset /{name} holds {ds.shape[0]} draws but the "
                    f"checkpoint records {num_draws} written.",
                    self.path,
                )
            if max_draws is not None and ds.shape[0] > max_draws:
                raise RunMismatchError(
                    f"{self.path}: dataset /{name} holds {ds.shape[0]} rows, but the "
                    f"checkpoint records {num_draws} draws (and a run is never more than "
                    f"one chunk ahead of its checkpoint: {max_draws} rows at most). The "
                    "checkpoint is older than the store: put back from a copy, or its count "
                    "was edited. Nothing was written; restore the run's own checkpoint, or "
                    "start the run again (overwrite=True).",
                    os.path.dirname(self.path),
                )
        for i, (shape, dtype) in enumerate(part_specs or ()):
            ds = f["samples"].get(str(i))
            if ds is None or (list(ds.shape[1:]), ds.dtype.name) != (list(shape), dtype):
                got = "missing" if ds is None else f"{list(ds.shape[1:])}/{ds.dtype}"
                raise StoreDamagedError(
                    f"{self.path}: state part {i} is {got}, but the run's is "
                    f"{list(shape)}/{dtype}.",
                    self.path,
                )
        if layout is None:
            return
        missing = [name for name in layout if name not in found]
        if missing:
            raise refuse(
                f"dataset /{missing[0]} is missing (the run records "
                f"{', '.join('/' + n for n in layout)})"
            )
        extra = sorted(found - set(layout))
        if extra:
            raise refuse(f"dataset /{extra[0]} is not one of the run's")
        for name, want in layout.items():
            ds = f[name]
            got = DatasetLayout(
                tuple(ds.shape[1:]), ds.dtype.str, int(ds.chunks[0]) if ds.chunks else 0
            )
            if not exact:  # an older store: its chunking may differ
                got, want = got._replace(chunk_rows=0), want._replace(chunk_rows=0)
            if got != want:
                raise refuse(
                    f"dataset /{name} is {list(got.shape)} {got.dtype} in chunks of "
                    f"{got.chunk_rows} rows, but the run's is {list(want.shape)} {want.dtype} "
                    f"in chunks of {want.chunk_rows}"
                )
            if exact and (
                ds.chunks != (want.chunk_rows, *want.shape) or ds.maxshape != (None, *want.shape)
            ):
                raise refuse(
                    f"dataset /{name} has chunks {ds.chunks} and maximum shape "
                    f"{ds.maxshape}, not the run's"
                )

    def verify(
        self,
        num_draws: int,
        part_specs: Sequence[tuple[Sequence[int], str]] | None = None,
        layout: Mapping[str, DatasetLayout] | None = None,
        max_draws: int | None = None,
        exact: bool = True,
    ) -> bool:
        """Reads the first ``num_draws`` rows of every draw dataset once, checking them.

        Args:
          num_draws: draws the checkpoint records as written.
          part_specs, layout, max_draws, exact: as in
            [`check`][tfp_sgmcmc.driver.store.SampleStore.check].

        Returns:
          Whether every dataset carries checksums (``False``: a store written before
          they were added; its rows were read, but damage in them cannot be detected).

        Raises:
          StoreDamagedError: a structural problem (``check``), or rows that fail their
            checksums (named as ``dataset rows a-b``; also in ``.damaged``).
        """
        self.check(num_draws, part_specs, layout, max_draws, exact)
        damaged: list[tuple[str, int, int]] = []
        checked = True
        with _reading(self.path, "reading its draws"), h5py.File(self.path, "r") as f:
            for group in _DRAW_GROUPS:
                for key, ds in f[group].items():
                    checked = checked and bool(ds.fletcher32)
                    for a, b in _damaged_ranges(ds, num_draws):
                        damaged.append((f"/{group}/{key}", a, b))
        if damaged:
            raise StoreDamagedError(
                _damage_message(self.path, damaged, num_draws), self.path, damaged
            )
        return checked

    def verify_digests(
        self,
        run_id: str,
        chunks: Sequence[tuple[int, int, int]],
        expected: np.ndarray,
        names: Sequence[str],
    ) -> None:
        """Recomputes every chunk's digests from the rows read and compares them with the
        checkpoint's ([`chunk_digests`][tfp_sgmcmc.driver.store.chunk_digests]).

        Args:
          run_id: the run's ID.
          chunks: ``(plan index, start, stop)`` of every chunk the checkpoint records.
          expected: the checkpoint's digests, ``uint8 [len(chunks), len(names), 32]``.
          names: the draw datasets, in digest order.

        Raises:
          StoreDamagedError: rows whose digest differs (named as ``dataset rows a-b`` and
            in ``.damaged``): chunks moved to other rows, copied in from another run or
            rewritten, with intact HDF5 checksums.
        """
        bad: list[tuple[str, int, int]] = []
        with _reading(self.path, "checking its chunk digests"), h5py.File(self.path, "r") as f:
            for j, (index, a, b) in enumerate(chunks):
                for d, name in enumerate(names):
                    got = _digest(run_id, index, a, name, f[name][a:b])
                    if got != expected[j, d].tobytes():
                        if bad and bad[-1][0] == f"/{name}" and bad[-1][2] == a:
                            bad[-1] = (bad[-1][0], bad[-1][1], b)
                        else:
                            bad.append((f"/{name}", a, b))
        if not bad:
            return
        bad.sort()
        named = [f"{n} rows {a}-{b - 1}" for n, a, b in bad[:_MAX_NAMED_RANGES]]
        more = len(bad) - len(named)
        listed = "; ".join(named) + (f"; and {more} more range(s)" if more else "")
        raise StoreDamagedError(
            f"{self.path}: rows that are not this run's draws at their position: {listed}. "
            "Their HDF5 checksums are intact but they do not match the digests the "
            "checkpoint recorded for run "
            f"{run_id} (chunks moved to other rows, copied in from another run, or "
            "rewritten). The file is left as it is: restore it from a copy or start the "
            "run again (overwrite=True).",
            self.path,
            bad,
        )

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

    def attrs(self, names: Sequence[str] = ("config", "run_id")) -> dict[str, Any]:
        """The file's string attributes ``names`` that it holds, as ``str``.

        Each is checked before it is read: a scalar fixed-length string no larger than the
        file (as ``create`` writes them), so damaged metadata cannot make HDF5 read or
        allocate more than the file holds.

        Raises:
          StoreDamagedError: an attribute of another kind or size.
        """
        out: dict[str, Any] = {}
        size = os.path.getsize(self.path)
        with _reading(self.path, "reading its attributes"), h5py.File(self.path, "r") as f:
            for name in names:
                if name not in f.attrs:
                    continue
                aid = h5py.h5a.open(f.id, name.encode())
                if aid.shape != () or aid.dtype.kind != "S" or aid.get_storage_size() > size:
                    raise StoreDamagedError(
                        f"{self.path}: attribute {name!r} is {aid.dtype} {aid.shape} of "
                        f"{aid.get_storage_size():,} bytes, not a string the driver wrote: "
                        "its HDF5 metadata is damaged or edited. It is left as it is; "
                        "restore it from a copy or start the run again (overwrite=True).",
                        self.path,
                    )
                value = f.attrs[name]
                out[name] = value.decode("ascii") if isinstance(value, bytes) else str(value)
        return out

    def num_draws(self) -> int:
        with _reading(self.path, "counting its draws"), h5py.File(self.path, "r") as f:
            lengths = {ds.shape[0] for g in ("samples", "trace") for ds in f[g].values()}
        return min(lengths) if lengths else 0

    def read_samples(self, stop: int | None = None, step: int = 1) -> list[np.ndarray]:
        with _reading(self.path, "reading its draws"), h5py.File(self.path, "r") as f:
            g = f["samples"]
            return [self._read(g[str(i)], stop, step) for i in range(len(g))]

    def read_trace(self, stop: int | None = None, step: int = 1) -> dict[str, np.ndarray]:
        with _reading(self.path, "reading its trace"), h5py.File(self.path, "r") as f:
            return {k: self._read(ds, stop, step) for k, ds in f["trace"].items()}

    def read_reductions(self) -> dict[str, list[np.ndarray]]:
        with _reading(self.path, "reading its reductions"), h5py.File(self.path, "r") as f:
            g = f["reductions"]
            return {name: [sub[str(j)][()] for j in range(len(sub))] for name, sub in g.items()}
