"""The files of a training run, written atomically, and its output folder."""

from __future__ import annotations

import errno
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch

from maml_rl.app.config_files import ConfigError
from maml_rl.samplers.workers.processes import deferred_signals
from maml_rl.app.runs.checksum import DigestWriter, seal
from maml_rl.app.runs.held_folders import open_in_folder, replace_in_folder, size_in_folder, unlink_in_folder

__all__ = [
    "CHECKPOINT_FILE",
    "CONFIG_FILE",
    "METRICS_FILE",
    "POLICY_FILE",
    "RunWriteError",
    "TENSORBOARD_DIR",
    "atomic_save",
    "atomic_write",
    "atomic_write_json",
    "check_writable",
    "prepare_output_folder",
]

#: The files train.py writes in its output folder.
CONFIG_FILE = "config.json"
POLICY_FILE = "policy.th"
CHECKPOINT_FILE = "checkpoint.pt"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


class RunWriteError(Exception):
    """A run's file could not be written (a full disk, say); the previous version of it is intact."""


def atomic_write(path: Path, write) -> None:
    """Write ``path`` through a temporary file in the same folder and ``os.replace``.

    A reader (or a run killed at any moment) sees the old file or the new one,
    never a partial one. SIGINT, SIGTERM and SIGHUP are held back until the
    write is over, then handled: a stop never lands inside ``torch.save``'s
    writer (whose own clean-up would replace the interrupt with a RuntimeError).

    :raises RunWriteError: the disk (or quota) is full; nothing was changed.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    with deferred_signals() as received:
        try:
            # Into a run's locked folder through its descriptor (held_folders): wherever that folder now is.
            with os.fdopen(open_in_folder(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL), "w+b") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            replace_in_folder(tmp, path)
        except BaseException as exc:
            written = size_in_folder(tmp)
            try:
                unlink_in_folder(tmp)
            except FileNotFoundError:
                pass
            if _disk_full(exc, path.parent):
                raise _no_space(path, written) from exc
            raise
    for signum, handler in received:  # the write is done: now the stop, if one came
        handler(signum, None)


def _disk_full(exc: BaseException, folder: Path) -> bool:
    """Whether ``exc`` (or what it replaced: torch's writer reports a failed write as a RuntimeError) is a
    full disk or quota."""
    seen = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, RuntimeError):
        try:
            return shutil.disk_usage(folder).free < (1 << 20)
        except OSError:
            return False
    return False


def _no_space(path: Path, written: int) -> RunWriteError:
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = 0
    needed = max(written, path.stat().st_size if path.exists() else 0)
    kept = f"the previous {path.name} is intact" if path.exists() else f"no {path.name} was written"
    return RunWriteError(
        f"no space left on the device of {path.parent} to write {path.name} ({_mib(free)} free; it needs "
        f"about {_mib(needed)}): {kept}. Free some space")


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def check_writable(path: str | Path, what: str, *, folder: bool) -> None:
    """Raise :class:`ConfigError` unless ``path`` can be written, before any work is done.

    Nothing is created: the nearest existing ancestor must be a folder this
    process may write into (``os.access``, which also sees read-only mounts).

    :param what: the option that named the path, for the message.
    :param folder: ``path`` is a folder to write files into (else a file to write).
    """
    path = Path(path)
    if path.exists():
        if folder and not path.is_dir():
            raise ConfigError(f"{what} {path} is a file, not a folder: choose another path")
        if not folder and path.is_dir():
            raise ConfigError(f"{what} {path} is a folder: give a file name, e.g. {path / 'results.npz'}")
    existing = path if folder and path.is_dir() else path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{what} {path}: {existing} is a file, so the folder cannot be created; choose another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {path}: cannot write into {existing} (permission denied or read-only); "
                          "choose a writable location")


def prepare_output_folder(folder: str | Path, *, fresh: bool) -> Path:
    """Create the run's folder and remove what a killed run may have left behind.

    :param fresh: the run starts from scratch: an old checkpoint is removed, so
        that a run stopped before its first checkpoint is not resumed from it.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG_FILE, POLICY_FILE, CHECKPOINT_FILE, METRICS_FILE):
        for temporary in folder.glob(f".{name}.*.tmp"):
            temporary.unlink(missing_ok=True)
    if fresh:
        (folder / CHECKPOINT_FILE).unlink(missing_ok=True)
    return folder


def atomic_save(obj: Any, path: str | Path, *, checksum: bool = False) -> str:
    """``torch.save(obj, path)``, atomically.

    :param checksum: record the archive's SHA-256 in it (:mod:`~maml_rl.app.runs.checksum`), for
        :func:`~maml_rl.app.runs.checkpoints.safe_load` to verify; what ``torch.load`` reads is unchanged.
    :return: the SHA-256 (hex) of what ``torch.save`` wrote: without ``checksum``, the file's.
    """
    digests = []

    def write(f):
        writer = DigestWriter(f)
        torch.save(obj, writer)
        if checksum:
            seal(f, writer)
        digests.append(writer.sha256.hexdigest())

    atomic_write(Path(path), write)
    return digests[-1]


def atomic_write_json(obj: Any, path: str | Path) -> None:
    """Write ``obj`` as indented JSON to ``path``, atomically."""
    text = json.dumps(obj, indent=2) + "\n"
    atomic_write(Path(path), lambda f: f.write(text.encode()))
