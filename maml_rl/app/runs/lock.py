"""One writer per run folder: an exclusive lock on the folder itself, which the OS releases when its process ends.

``train.py`` holds :class:`RunLock` from before it reads the folder until it exits, so that two runs never write
one folder (which would log every iteration twice). The lock is ``flock`` on the folder's own directory, not on a
file in it: there is nothing to delete that would let a second writer in, and a killed run leaves no stale lock.
A folder moved away while its run goes on keeps its lock, and a new folder made in its place is another one, free
to lock: so the run checks (:meth:`RunLock.check`) before it writes that its path still names the folder it locked,
and stops rather than write into someone else's.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from maml_rl.app.config_files import ConfigError
from maml_rl.app.runs import held_folders

__all__ = ["LOCK_FILE", "RunFolderBusy", "RunFolderLost", "RunLock", "writer_of"]

#: The file earlier versions locked; old folders may still hold it. It is no file of the run.
LOCK_FILE = ".lock"
# A reader's probe (writer_of) holds a shared lock for microseconds: a writer tries a few times before refusing.
_ATTEMPTS, _PAUSE = 5, 0.05


class RunFolderBusy(ConfigError):
    """Another process is writing the run folder."""


class RunFolderLost(ConfigError):
    """The run's folder was moved, renamed or deleted while the run went on."""


class RunLock:
    """The exclusive lock of a run folder; ``acquire()`` once the folder exists, released on exit."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`RunFolderBusy` at once naming the process that holds it.

        Nothing in the folder changes: a refused run leaves every file as it was.
        """
        fd = _open_folder(self.folder)
        for attempt in range(_ATTEMPTS):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES) or attempt == _ATTEMPTS - 1:
                    holder = _holder(fd)
                    os.close(fd)
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                        raise
                    raise RunFolderBusy(
                        f"{self.folder} is being written by another train.py{_process(holder)}: one run writes a "
                        "folder at a time. Wait for it to end (or stop it), or choose another --output-folder"
                    ) from None
                time.sleep(_PAUSE)
        self._fd = fd
        held_folders.hold(self.folder, fd)

    def check(self) -> None:
        """Raise :class:`RunFolderLost` unless the folder's path still names the folder this lock holds.

        Called before the run writes: a folder renamed or deleted mid-run (and perhaps another made, and locked,
        in its place) must not receive this run's files.
        """
        if self._fd is None:
            return
        locked = os.fstat(self._fd)
        try:
            current = os.stat(self.folder)
        except OSError:
            current = None
        if current is not None and (current.st_dev, current.st_ino) == (locked.st_dev, locked.st_ino):
            return
        now = _current_path(self._fd)
        where = ("it was deleted, with the files this run had written" if now is None else
                 f"its files are now in {now}; continue the run there with --resume --output-folder {now}")
        raise RunFolderLost(
            f"{self.folder} is no longer the folder this run was writing: it was moved, renamed or deleted while "
            f"the run went on, so the run stopped without writing more ({where})")

    def release(self) -> None:
        if self._fd is not None:
            held_folders.release(self.folder)
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
        fd = _open_folder(Path(folder))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _holder(fd) or 0
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _open_folder(folder: Path) -> int:
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _holder(fd: int) -> int | None:
    """The pid holding a ``flock`` on ``fd``'s file, as Linux lists it in ``/proc/locks`` (None elsewhere)."""
    stat = os.fstat(fd)
    # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2148420 0 EOF": the device as major:minor in hex, the inode in decimal.
    identity = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        with open("/proc/locks") as locks:
            for line in locks:
                fields = line.split()
                if fields[1:4] == ["FLOCK", "ADVISORY", "WRITE"] and fields[5] == identity and fields[4].isdigit():
                    return int(fields[4])
    except OSError:
        pass
    return None


def _current_path(fd: int) -> str | None:
    """Where the folder open as ``fd`` is now (None when it was deleted, or when the OS cannot tell)."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return None if path.endswith(" (deleted)") or not os.path.isdir(path) else path


def _process(pid: int | None) -> str:
    return f" (process {pid})" if pid else ""
