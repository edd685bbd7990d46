"""How test.py evaluated, kept in its ``results.npz`` so that report.py never pools other evaluations.

A score means little without what it scored: which policy file (and so which
training iteration), how many adaptation steps of which step size, which
actions after them, which tasks. test.py writes that record beside the
returns, as one JSON string (read without unpickling); report.py groups runs
by its :data:`SETTINGS` and compares the recorded policy hash with the run's
file today, to flag results older than the policy they stand for.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

__all__ = ["RECORD_KEY", "SETTINGS", "file_sha256", "read_record", "record_array"]

#: The entry of results.npz that holds the record.
RECORD_KEY = "evaluation"

#: What must agree between two runs' evaluations for their scores to be pooled (the evaluation seed, which
#: defaults to each run's training seed + 1, and the policy itself differ from run to run by design).
SETTINGS = ("protocol", "num-steps", "fast-lr", "fast-batch-size", "eval-actions", "split", "all-tasks",
            "episodes-per-trial", "evaluation-episodes", "meta-batch-size", "num-batches", "eval-trajectories",
            "num-exp-traj-eval")


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def record_array(*, policy: Mapping[str, Any], settings: Mapping[str, Any], seed: int, config: str,
                 tasks: int) -> np.ndarray:
    """The record as a 0-d string array for ``np.savez``.

    :param policy: ``file`` (resolved path), ``sha256``, ``iteration`` and ``num-batches`` of its run
        (``None`` when unknown).
    :param settings: a value for each of :data:`SETTINGS` (``None`` where one does not apply).
    """
    missing = set(SETTINGS) - set(settings)
    if missing:
        raise ValueError(f"the evaluation record lacks {', '.join(sorted(missing))}")
    record = {"policy": dict(policy), "settings": {key: settings[key] for key in SETTINGS}, "seed": seed,
              "config": config, "tasks": tasks}
    return np.array(json.dumps(record))


def read_record(data: Mapping[str, np.ndarray]) -> dict | None:
    """The record of an opened results.npz; ``None`` for one written before test.py kept it.

    :raises ValueError: the entry is there but is not a record.
    """
    if RECORD_KEY not in data:
        return None
    try:
        record = json.loads(str(data[RECORD_KEY]))
    except json.JSONDecodeError as exc:
        raise ValueError(f"its {RECORD_KEY!r} entry is not JSON ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("settings"), dict) \
            or not isinstance(record.get("policy"), dict):
        raise ValueError(f"its {RECORD_KEY!r} entry lacks the policy and the settings")
    return record
