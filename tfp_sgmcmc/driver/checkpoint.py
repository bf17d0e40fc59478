"""Atomic checkpoints of a sampling run (``checkpoint.npz`` in the run directory).

A checkpoint holds everything needed to continue the chain exactly where it
stopped:

* ``config``: the run configuration (JSON), checked on resume;
* ``chunk_index``: the next chunk to run (its seed is a function of the run
  seed and this index only, so a resumed run draws the same numbers);
* ``num_written``: draws in ``samples.h5`` that are valid;
* ``next_seed``: the seed of chunk ``chunk_index`` (stored for inspection and
  checked against the recomputed one on resume);
* the chain state, the kernel results and the reducer states as flat lists of
  arrays (``tf.nest.flatten``; a mask records ``None`` leaves), repacked on
  resume into the structure of a freshly bootstrapped template;
* ``chunk_digests``: ``uint8 [chunks, datasets, 32]``, a SHA-256 digest of every
  dataset's rows of every chunk of draws written, bound to the run's ID (in ``config``),
  the chunk's index and its row range (``store.chunk_digests``); the reader recomputes
  them from ``samples.h5``, so the checkpoint and the draws it vouches for are bound to
  one another (absent in a run made before run IDs);
* ``reductions_digest``: ``uint8 [32]``, the digest of the finalized reducer outputs
  in ``samples.h5``'s ``/reductions`` as of this checkpoint (``store.reductions_digest``;
  absent in a run made before it was added).

It is written to a temporary file in the same directory, fsync'ed and moved
into place with [`os.replace`][tfp_sgmcmc.driver.checkpoint.os.replace] (atomic on POSIX), so a
kill at any moment
leaves either the previous or the new checkpoint, never a partial one.

It also holds ``sha256``, a SHA-256 digest of every other entry (name, dtype, shape
and bytes), checked by every read: open, resume and ``tfp-sgmcmc diagnose``. (The zip
container's CRC-32 covers each member's bytes too; the digest also covers which
members there are.) A checkpoint written before the digest was added is read with a
warning, and the next checkpoint of a resumed run adds one.

The entries' digest does not see the zip container's own fields (a member's time stamp,
a header's copy of a size), which a reader ignores, so a changed byte there would read as
an intact checkpoint. Every byte is covered by a second digest: the archive's comment,
the last bytes of the file, is ``sha256:`` and the hex SHA-256 of every byte before those
64 hex digits (``format`` 2, an entry the entries' digest covers, says the file has it).
So a changed byte anywhere in the file is refused by name, wherever it falls.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import warnings
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Checkpoint", "CHECKPOINT_FILE", "write_checkpoint", "read_checkpoint", "flatten_leaves"]

CHECKPOINT_FILE = "checkpoint.npz"
_GROUPS = ("state", "kernel_results", "reducer_states")
_DIGEST = "sha256"
#: The entry that gives the file's format: 2 has the whole-file digest in its comment.
_FORMAT = "format"
_FILE_DIGEST_FORMAT = 2
#: The archive's comment: this prefix, then the whole-file digest (64 hex digits).
_COMMENT_PREFIX = b"sha256:"
_HEX_DIGITS = 64


def _file_digest(body: bytes) -> bytes:
    """The hex SHA-256 of ``body``, the file's bytes before the digest's 64 digits."""
    return hashlib.sha256(body).hexdigest().encode()


def _with_file_digest(npz: bytes) -> bytes:
    """``npz`` (an archive without a comment) with the comment ``sha256:<digest>`` of every
    byte before the digest's digits. The comment is the end of a zip file, after the
    end-of-central-directory record that gives its length, so the digest covers that
    record, the central directory and every member."""
    buf = io.BytesIO(npz)
    with zipfile.ZipFile(buf, "a") as z:
        z.comment = _COMMENT_PREFIX + b"0" * _HEX_DIGITS
    body = buf.getvalue()[:-_HEX_DIGITS]
    return body + _file_digest(body)


def _has_file_digest(raw: bytes) -> bool:
    """Whether ``raw`` ends as a file with the whole-file digest does."""
    tail = raw[-(len(_COMMENT_PREFIX) + _HEX_DIGITS):]
    return tail.startswith(_COMMENT_PREFIX) and all(
        c in b"0123456789abcdef" for c in tail[len(_COMMENT_PREFIX):])


def _file_digest_problem(raw: bytes) -> str:
    """Why ``raw`` fails its whole-file digest, or ``""`` (``raw`` has one)."""
    if _file_digest(raw[:-_HEX_DIGITS]) != raw[-_HEX_DIGITS:]:
        return "its bytes fail their whole-file SHA-256 checksum"
    return ""


class _ChecksumError(ValueError):
    """The checkpoint's digest does not match its arrays."""


def _digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of every entry but the digest itself: name, dtype, shape, bytes (sorted)."""
    h = hashlib.sha256()
    for key in sorted(k for k in arrays if k != _DIGEST):
        a = np.ascontiguousarray(arrays[key])
        h.update(f"{key}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(memoryview(a).cast("B") if a.nbytes else b"")
    return h.hexdigest()


@dataclass
class Checkpoint:
    """Contents of ``checkpoint.npz`` (leaves are NumPy arrays or ``None``)."""

    config: dict[str, Any]
    chunk_index: int
    num_written: int
    next_seed: np.ndarray
    state: list[Any]
    kernel_results: list[Any]
    reducer_states: list[Any]
    #: ``uint8 [chunks, datasets, 32]`` digests of the chunks of draws written
    #: (``None``: a run made before run IDs).
    chunk_digests: np.ndarray | None = None
    #: ``uint8 [32]`` digest of ``/reductions`` as of this checkpoint (``None``: a run
    #: made before it was added).
    reductions_digest: np.ndarray | None = None


def flatten_leaves(leaves: list[Any]) -> list[Any]:
    """Leaves as NumPy arrays (``None`` kept).

    Raises:
      ValueError: a leaf is not a numeric array (it could not be restored bitwise).
    """
    out = [None if x is None else np.asarray(x) for x in leaves]
    for x in out:
        if x is not None and x.dtype == object:
            raise ValueError(f"cannot checkpoint a non-numeric leaf ({type(x.item()).__name__}).")
    return out


def remove_quietly(path: str) -> None:
    """Removes ``path`` if it exists; a failure to remove it is ignored (it is a
    leftover, and the error being handled matters more)."""
    try:
        os.remove(path)
    except OSError:
        pass


def write_checkpoint(run_dir: str, ckpt: Checkpoint) -> None:
    """Writes ``ckpt`` atomically (temp file + fsync + ``os.replace``).

    Raises:
      OSError: the write failed (the previous checkpoint is intact and no temporary
        file is left).
    """
    arrays: dict[str, np.ndarray] = {
        "config": np.asarray(json.dumps(ckpt.config, sort_keys=True)),
        "chunk_index": np.asarray(ckpt.chunk_index, np.int64),
        "num_written": np.asarray(ckpt.num_written, np.int64),
        "next_seed": np.asarray(ckpt.next_seed, np.int32),
    }
    for group in _GROUPS:
        leaves = getattr(ckpt, group)
        arrays[f"{group}/none_mask"] = np.asarray([x is None for x in leaves], bool)
        for i, x in enumerate(leaves):
            if x is not None:
                arrays[f"{group}/{i}"] = np.asarray(x)
    if ckpt.chunk_digests is not None:
        arrays["chunk_digests"] = np.asarray(ckpt.chunk_digests, np.uint8)
    if ckpt.reductions_digest is not None:
        arrays["reductions_digest"] = np.asarray(ckpt.reductions_digest, np.uint8)
    arrays[_FORMAT] = np.asarray(_FILE_DIGEST_FORMAT, np.int64)
    arrays[_DIGEST] = np.asarray(_digest(arrays))
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    raw = _with_file_digest(npz.getvalue())
    path = os.path.join(run_dir, CHECKPOINT_FILE)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        # A failed write (a full disk, say) leaves the previous checkpoint in place and
        # no partial temporary file next to it.
        remove_quietly(tmp)
    # fsync the directory so the rename itself survives a crash of the machine.
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_checkpoint(run_dir: str) -> Checkpoint:
    """Reads ``checkpoint.npz``.

    Raises:
      FileNotFoundError: there is no checkpoint.
      ValueError: the file is unreadable, incomplete or fails its checksum.
    """
    path = os.path.join(run_dir, CHECKPOINT_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
        # The whole-file digest first, before the container is parsed: a changed byte
        # anywhere (also in the zip's own fields, which the entries' digest does not see
        # and a zip reader may choke on) is refused by name.
        signed = _has_file_digest(raw)
        problem = _file_digest_problem(raw) if signed else ""
        if problem:
            raise _ChecksumError(
                f"{problem} (damaged on disk), so the chain state it holds cannot be "
                "trusted; restore it from a copy or start the run again (overwrite=True)"
            )
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        if _FORMAT in data and int(data[_FORMAT]) >= _FILE_DIGEST_FORMAT:
            if not signed:
                raise _ChecksumError(
                    "its whole-file SHA-256 checksum is missing from the end of the file "
                    "(damaged on disk); restore it from a copy or start the run again "
                    "(overwrite=True)"
                )
            if _DIGEST not in data:
                raise _ChecksumError(
                    f"its entry {_DIGEST!r} is missing (damaged on disk); restore it from a "
                    "copy or start the run again (overwrite=True)"
                )
        if _DIGEST not in data:
            # Accepted, not refused: refusing would strand every run written before the
            # digest; the next checkpoint written adds one.
            warnings.warn(
                f"{path} has no checksum (written by an earlier tfp-sgmcmc): it is read "
                "without an integrity check.",
                UserWarning,
                stacklevel=3,
            )
        elif str(data[_DIGEST]) != _digest(data):
            raise _ChecksumError(
                "it fails its SHA-256 checksum (damaged on disk), so the chain state it "
                "holds cannot be trusted; restore it from a copy or start the run again "
                "(overwrite=True)"
            )
        groups = {}
        for group in _GROUPS:
            mask = data[f"{group}/none_mask"]
            groups[group] = [None if m else data[f"{group}/{i}"] for i, m in enumerate(mask)]
        return Checkpoint(
            config=json.loads(str(data["config"])),
            chunk_index=int(data["chunk_index"]),
            num_written=int(data["num_written"]),
            next_seed=data["next_seed"],
            **groups,
            chunk_digests=data.get("chunk_digests"),
            reductions_digest=data.get("reductions_digest"),
        )
    except _ChecksumError as e:
        raise ValueError(f"{path}: {e}") from None
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile,
            NotImplementedError, struct.error, OverflowError) as e:
        # NotImplementedError and struct.error: what zipfile raises on some damaged
        # headers of a file without the whole-file digest (an older checkpoint).
        raise ValueError(f"{path} is unreadable or incomplete ({type(e).__name__}: {e})") from e
