"""The errors of the long-run driver (a run directory that cannot be used as asked).

They live in their own module so that the lock, the sample store and the sampler can
all raise them without importing one another. Every one is a
[`RunDirectoryError`][tfp_sgmcmc.driver.RunDirectoryError], which the ``tfp-sgmcmc``
command prints as one line with exit status 2.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "RunDirectoryError",
    "RunExistsError",
    "RunLockedError",
    "StoreDamagedError",
    "RunMismatchError",
    "RunStorageError",
]


class RunDirectoryError(RuntimeError):
    """The run directory is missing, corrupted, or does not match the request."""


class RunExistsError(RunDirectoryError, FileExistsError):
    """A run already exists where a new one was asked for (pass ``overwrite=True``)."""


class RunLockedError(RunDirectoryError):
    """Another writer holds the run directory's lock (``run.lock``).

    Attributes:
      run_dir: the run directory.
      pid: the process ID the holder wrote in the lock file (``None`` if unreadable).
    """

    def __init__(self, message: str, run_dir: str = "", pid: int | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir
        self.pid = pid


class StoreDamagedError(RunDirectoryError):
    """Stored draws fail their checksums, or the sample store is not a readable store
    (zero-length, not HDF5, datasets missing or short).

    Attributes:
      path: the damaged file.
      damaged: ``(dataset, start, stop)`` row ranges (``stop`` excluded) that fail
        their checksums; empty when the file as a whole is unreadable.
    """

    def __init__(
        self, message: str, path: str = "", damaged: Sequence[tuple[str, int, int]] = ()
    ) -> None:
        super().__init__(message)
        self.path = path
        self.damaged = list(damaged)


class RunMismatchError(RunDirectoryError):
    """The run directory's files do not belong together, though each is intact.

    Every run has an ID, made when it is created and recorded in ``config.json``, in
    ``checkpoint.npz`` and in the attributes of ``samples.h5``; the checkpoint also
    holds a digest of every chunk of draws, bound to the run ID, the chunk's index and
    its row range. This error is raised when those records disagree: a checkpoint or
    sample store copied in from another run, a checkpoint whose count of draws was
    edited, or a store that holds more chunks than the checkpoint records (an older
    checkpoint put back). Chunks of draws that were moved or copied in from another run
    raise [`StoreDamagedError`][tfp_sgmcmc.driver.StoreDamagedError] instead, with the
    row ranges.

    Attributes:
      run_dir: the run directory.
    """

    def __init__(self, message: str, run_dir: str = "") -> None:
        super().__init__(message)
        self.run_dir = run_dir


class RunStorageError(RunDirectoryError, OSError):
    """A read or write of the run directory failed (disk full, permissions, read-only
    file system, an I/O error); the message says how many draws are safe on disk.

    It is an ``OSError`` too, with the failed call's ``errno``, ``strerror`` and
    ``filename``, so ``except OSError`` still catches it.

    Attributes:
      num_safe: draws the last checkpoint covers (what ``resume=True`` keeps).
    """

    def __new__(cls, message: str, num_safe: int = 0) -> RunStorageError:
        # OSError reads two arguments as (errno, strerror): it gets the message only.
        return OSError.__new__(cls, message)

    def __init__(self, message: str, num_safe: int = 0) -> None:
        super().__init__(message)
        self.num_safe = num_safe

    def __str__(self) -> str:
        # The message, not OSError's "[Errno n] strerror: filename" of the attributes.
        return str(self.args[0])
