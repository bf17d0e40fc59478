"""One writer per run directory: an exclusive ``flock`` on ``run.lock`` inside it.

[`sample`][tfp_sgmcmc.driver.sample] holds the lock from before it reads or writes
anything in the run directory until it returns or raises, so two writers (two
``tfp-sgmcmc sample --resume`` of one run, say) can never append to one
``samples.h5``: the second gets a
[`RunLockedError`][tfp_sgmcmc.driver.RunLockedError] naming the holder's PID.

Why ``flock`` and not a file that exists while a run is active: the kernel drops a
``flock`` when its holder exits for any reason (``SIGKILL``, a crash, a power cut of
the process), so a lock file left behind by a dead writer holds nothing and the next
writer takes it over silently, with no stale-lock cleanup and no PID guessing. The
file's content (the holder's PID and host) is for the error message only.

The lock is released by unlinking the file while it is still held, then closing it.
A writer that opened the file just before the unlink may then lock the unlinked file;
it checks, once locked, that the path still names the file it holds, and starts
again if not, so two writers never both hold "the" lock.

Reading a run (``open_run``, ``tfp-sgmcmc diagnose``) takes no lock. Where ``fcntl``
does not exist (Windows) no lock is taken. On NFS, Linux maps ``flock`` to a POSIX
lock of the server (NFSv4, or NFSv3 with ``lockd``); a file system that cannot lock
(``ENOLCK``) runs unguarded, with a ``RuntimeWarning`` that says so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import warnings
from types import TracebackType

from tfp_sgmcmc.driver.errors import RunLockedError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "RunLock", "lock_holder"]

LOCK_FILE = "run.lock"


def _read_holder(path: str) -> tuple[int | None, str]:
    """``(pid, host)`` written in a lock file (``(None, "")`` if absent or unreadable)."""
    try:
        with open(path) as f:
            words = f.read().split()
    except OSError:
        return None, ""
    pid = int(words[0]) if words and words[0].isdigit() else None
    return pid, (words[1] if len(words) > 1 else "")


class RunLock:
    """The exclusive lock of one run directory (a context manager).

    Args:
      run_dir: the run directory (it must exist).

    ```python
    import tempfile
    from tfp_sgmcmc.driver.lock import RunLock

    run_dir = tempfile.mkdtemp()
    with RunLock(run_dir):
        ...  # the only writer of run_dir
    ```
    """

    def __init__(self, run_dir: str) -> None:
        self.run_dir = os.fspath(run_dir)
        self.path = os.path.join(self.run_dir, LOCK_FILE)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> RunLock:
        """Takes the lock and writes this process's PID and host in ``run.lock``.

        Raises:
          RunLockedError: another writer holds it (its PID in the message).
          OSError: the lock file cannot be created (permissions, read-only file system).
        """
        if self._fd is not None or fcntl is None:
            return self
        for _ in range(100):  # more than one retry needs a release at each attempt
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    # A file system without locks (NFSv3 without lockd, some FUSE):
                    # refusing would forbid every run there, so it runs unguarded, said.
                    warnings.warn(
                        f"{self.run_dir}: the file system cannot lock {LOCK_FILE} "
                        f"({e.strerror}): nothing keeps a second writer out of this run.",
                        RuntimeWarning,
                        stacklevel=3,
                    )
                    with contextlib.suppress(OSError):
                        if os.path.getsize(self.path) == 0:  # ours, just created
                            os.unlink(self.path)
                    return self
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                pid, host = _read_holder(self.path)
                who = "another process" if pid is None else f"process {pid}"
                if host and host != socket.gethostname():
                    who += f" on host {host}"
                raise RunLockedError(
                    f"{self.run_dir} is being written by {who} (it holds {LOCK_FILE}); two "
                    "writers would append the same draws twice. Wait for it to finish or "
                    "stop it, then resume.",
                    run_dir=self.run_dir,
                    pid=pid,
                ) from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # locked a file its holder had just unlinked: try the new one
        else:  # pragma: no cover - a lock released and retaken 100 times in a row
            raise RunLockedError(f"{self.run_dir}: could not take {LOCK_FILE}.", self.run_dir)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        except OSError:
            # A full disk may refuse the PID: the lock holds without it.
            pass
        self._fd = fd
        return self

    def release(self) -> None:
        """Releases the lock (removing ``run.lock``); a no-op if not held."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            # Unlinked while still held (module docstring), and only if it is ours.
            if os.path.samestat(os.fstat(fd), os.stat(self.path)):
                os.unlink(self.path)
        except OSError:
            pass  # a read-only remount after we started: the lock still goes with close
        finally:
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def lock_holder(run_dir: str) -> int | None:
    """The PID of the writer holding ``run_dir``'s lock, or ``None`` if nobody holds it.

    For messages only (a reader that fails while a writer appends says so); it never
    takes the lock, so it cannot keep a writer out.
    """
    path = os.path.join(os.fspath(run_dir), LOCK_FILE)
    if fcntl is None or not os.path.exists(path):
        return None
    pid, _ = _read_holder(path)
    if pid is None:
        return None
    if pid == os.getpid():
        return pid
    try:
        os.kill(pid, 0)  # signal 0: only whether the process exists
    except ProcessLookupError:
        return None  # a lock file left by a dead writer: nobody holds it
    except OSError:
        pass  # exists, owned by another user
    return pid
