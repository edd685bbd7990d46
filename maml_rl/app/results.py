"""How test.py evaluated, kept in its ``results.npz`` so that report.py never pools other evaluations.

A score means little without what it scored: which policy file (and so which
training iteration), how many adaptation steps of which step size, which
actions after them, which tasks. test.py writes that record beside the
returns, as one JSON string (read without unpickling); report.py groups runs
by its settings (:data:`COMMON_SETTINGS` and the learner's own) and compares the recorded policy hash with the run's
file today, to flag results older than the policy they stand for.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

__all__ = ["COMMON_SETTINGS", "RECORD_KEY", "TASK_PREFIX", "file_sha256", "read_record", "record_array", "settings_differ",
           "task_arrays"]

#: The entry of results.npz that holds the record.
RECORD_KEY = "evaluation"

#: The prefix of the entries that hold the tasks' numeric fields, one array each (:func:`task_arrays`).
TASK_PREFIX = "task_"

#: What must agree between two runs' evaluations for their scores to be pooled (the evaluation seed, which
#: defaults to each run's training seed + 1, and the policy itself differ from run to run by design): the
#: settings every evaluation records, besides the learner's own (its ``evaluation_protocol``'s ``settings``,
#: which name the ``protocol``). A setting one record lacks reads as ``None`` (earlier records list every
#: algorithm's keys, ``None`` where one does not apply).
COMMON_SETTINGS = ("protocol", "fast-batch-size", "eval-actions", "split", "all-tasks", "meta-batch-size",
                   "num-batches")


def settings_differ(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The settings in which two records' ``settings`` differ, in the order first seen."""
    return [key for key in dict.fromkeys([*a, *b]) if a.get(key) != b.get(key)]


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
    :param settings: a value for each of :data:`COMMON_SETTINGS` and the learner's own settings.
    """
    missing = set(COMMON_SETTINGS) - set(settings)
    if missing:
        raise ValueError(f"the evaluation record lacks {', '.join(sorted(missing))}")
    record = {"policy": dict(policy), "settings": dict(settings), "seed": seed,
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


def task_arrays(tasks: list[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """``task_KEY`` ``[N, *shape]`` for each field that every task has as a number or a numeric array of one
    shape: the tasks again, for tools that read results.npz without unpickling (the task dicts themselves are
    an object array). Fields that are not (names, Meta-World's pickled states) are left out."""
    if not tasks or not all(isinstance(task, Mapping) for task in tasks):
        return {}
    arrays = {}
    for key in tasks[0]:
        if not isinstance(key, str) or not all(key in task for task in tasks):
            continue
        try:
            values = [np.asarray(task[key]) for task in tasks]
        except Exception:  # noqa: BLE001 - a field numpy cannot take is not a numeric field
            continue
        if all(v.dtype.kind in "biuf" and v.shape == values[0].shape for v in values):
            arrays[TASK_PREFIX + key] = np.stack(values)
    return arrays
