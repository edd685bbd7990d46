"""One writer per run folder: an exclusive lock that the OS releases when its process ends.

``train.py`` holds :class:`RunLock` from before it reads the folder until it exits, so that two runs
never write one folder (which would log every iteration twice). The lock is ``flock`` on a file
``.lock`` in the folder: a killed run leaves no stale lock, and the file stays (removing it would let
a third process lock a new file while the second still holds the old one).
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from maml_rl.app.config_files import ConfigError

__all__ = ["LOCK_FILE", "RunFolderBusy", "RunLock", "writer_of"]

LOCK_FILE = ".lock"
# A reader's probe (writer_of) holds a shared lock for microseconds: a writer tries a few times before refusing.
_ATTEMPTS, _PAUSE = 5, 0.05


class RunFolderBusy(ConfigError):
    """Another process is writing the run folder."""


class RunLock:
    """The exclusive lock of a run folder; ``acquire()`` once the folder exists, released on exit."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`RunFolderBusy` at once naming the process that holds it."""
        fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        for attempt in range(_ATTEMPTS):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES) or attempt == _ATTEMPTS - 1:
                    holder = _recorded_pid(fd)
                    os.close(fd)
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                        raise
                    raise RunFolderBusy(
                        f"{self.folder} is being written by another train.py{_process(holder)}: one run writes a "
                        "folder at a time. Wait for it to end (or stop it), or choose another --output-folder"
                    ) from None
                time.sleep(_PAUSE)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor releases the lock
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def writer_of(folder: str | Path) -> int | None:
    """The pid of the process writing ``folder`` (0 when it cannot be told), or None when none is.

    Only looks: a shared lock taken and dropped at once, never held.
    """
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _recorded_pid(fd) or 0
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _recorded_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text.isdigit() else None
    except (OSError, UnicodeDecodeError):
        return None


def _process(pid: int | None) -> str:
    return f" (process {pid})" if pid else ""
