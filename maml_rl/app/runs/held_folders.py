"""The run folders this process holds locked, and writes into them that follow the folder, not its path.

:class:`~maml_rl.app.runs.lock.RunLock` keeps a descriptor of the folder it locks. A run checks before it writes that
the path still names that folder; a write through the path could still land in another folder made in its place
in the moment between the check and the write (a rename, then ``mkdir``: the checkpoint went into the new folder).
Writes into a held folder therefore go through its descriptor (``dir_fd``): they reach the locked folder wherever
it now is, and the next check stops the run.
"""

from __future__ import annotations

import os
from pathlib import Path

_HELD: dict[str, int] = {}


def hold(folder: str | Path, fd: int) -> None:
    """Writes into ``folder`` (by this path) go through ``fd`` until :func:`release`."""
    _HELD[os.path.abspath(folder)] = fd


def release(folder: str | Path) -> None:
    _HELD.pop(os.path.abspath(folder), None)


def folder_fd(path: str | Path) -> int | None:
    """The descriptor of the held folder that ``path`` is directly in, or None."""
    return _HELD.get(os.path.abspath(Path(path).parent))


def open_in_folder(path: str | Path, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags)``, through the held folder's descriptor when ``path`` is in one."""
    fd = folder_fd(path)
    if fd is None:
        return os.open(path, flags | os.O_CLOEXEC, mode)
    return os.open(Path(path).name, flags | os.O_CLOEXEC, mode, dir_fd=fd)


def replace_in_folder(source: str | Path, target: str | Path) -> None:
    """``os.replace(source, target)`` for two files of one folder, through its descriptor when it is held."""
    fd = folder_fd(target)
    if fd is None:
        os.replace(source, target)
    else:
        os.replace(Path(source).name, Path(target).name, src_dir_fd=fd, dst_dir_fd=fd)


def unlink_in_folder(path: str | Path) -> None:
    fd = folder_fd(path)
    if fd is None:
        os.unlink(path)
    else:
        os.unlink(Path(path).name, dir_fd=fd)


def size_in_folder(path: str | Path) -> int:
    """The file's size, 0 when it does not exist."""
    fd = folder_fd(path)
    try:
        return (os.stat(path) if fd is None else os.stat(Path(path).name, dir_fd=fd)).st_size
    except FileNotFoundError:
        return 0
