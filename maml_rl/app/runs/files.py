"""The files of a training run, written atomically, and its output folder."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import torch

from maml_rl.config.loading import ConfigError

__all__ = [
    "CHECKPOINT_FILE",
    "CONFIG_FILE",
    "METRICS_FILE",
    "POLICY_FILE",
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


def atomic_write(path: Path, write) -> None:
    """Write ``path`` through a temporary file in the same folder and ``os.replace``.

    A reader (or a run killed at any moment) sees the old file or the new one,
    never a partial one.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


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


def atomic_save(obj: Any, path: str | Path) -> None:
    """``torch.save(obj, path)``, atomically."""
    atomic_write(Path(path), lambda f: torch.save(obj, f))


def atomic_write_json(obj: Any, path: str | Path) -> None:
    """Write ``obj`` as indented JSON to ``path``, atomically."""
    text = json.dumps(obj, indent=2) + "\n"
    atomic_write(Path(path), lambda f: f.write(text.encode()))
