"""The per-iteration log of a run (``metrics.jsonl``, TensorBoard). What a row holds of the iteration's batch
is the meta-learner's :meth:`~maml_rl.metalearners.base.MetaLearner.batch_stats` (:mod:`maml_rl.data.stats`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from maml_rl.app.config_files import ConfigError
from maml_rl.app.runs.files import METRICS_FILE, TENSORBOARD_DIR, atomic_write
from maml_rl.app.runs.held_folders import open_in_folder

__all__ = ["MetricsLogger", "keep_rows_before", "logged_rows"]


def logged_rows(folder: str | Path) -> list[dict]:
    """The complete rows of a run's ``metrics.jsonl``, in order (none without the file).

    A line cut short when the run was killed, or one that is not a JSON
    object, is skipped: it is not a logged iteration. A file that is not
    text at all is damaged, not cut short: refused, so that nothing rewrites it.

    :raises ConfigError: the file is not UTF-8 text.
    """
    path = Path(folder) / METRICS_FILE
    if not path.exists():
        return []
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): damaged, not a file train.py wrote or "
            "cut short. Restore it from a copy, or move it away to go on without its logged rows") from None
    rows = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            rows.append(record)
    return rows


def keep_rows_before(folder: str | Path, start_iteration: int) -> list[dict]:
    """Rewrite a run's ``metrics.jsonl`` (if any) with one row per iteration before ``start_iteration``, in order,
    and return them: a resumed run's past.

    Dropped: rows of iterations the run will do again, a partial or garbage line, and all but the last row of an
    iteration logged more than once (by a run that wrote the folder beside another), which would shift every
    later point of a training curve.
    """
    path = Path(folder) / METRICS_FILE
    if not path.exists():
        return []
    kept: dict[int, dict] = {}
    for row in logged_rows(folder):
        iteration = row.get("iteration")
        if isinstance(iteration, int) and not isinstance(iteration, bool) and 0 <= iteration < start_iteration:
            kept[iteration] = row
    rows = [kept[iteration] for iteration in sorted(kept)]
    text = "".join(json.dumps(row) + "\n" for row in rows)
    atomic_write(path, lambda f: f.write(text.encode()))
    return rows


def _json_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return value.item() if value.numel() == 1 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


_TB_GROUPS = ("return", "loss", "kl", "time")


class MetricsLogger:
    """Per-iteration metrics to ``metrics.jsonl`` and, if available, TensorBoard.

    On a resumed run, lines of iterations at or after ``start_iteration`` (an
    iteration done again after the restart), any partial last line and a
    duplicated row are dropped first (:func:`keep_rows_before`), so the file
    ends up with one line per iteration.

    Each row opens the file by its path: a file replaced while the run goes
    on (a ``git checkout`` or a copy over the run folder) gets the later rows,
    where a handle kept open wrote them into the unlinked old file, lost.

    :param folder: the run's output folder.
    :param start_iteration: first iteration this process will log.
    :param tensorboard: also write TensorBoard events (``folder/tensorboard``)
        when ``torch.utils.tensorboard`` and tensorboard can be imported.
    """

    def __init__(self, folder: str | Path, start_iteration: int = 0, tensorboard: bool = True) -> None:
        self.path = Path(folder) / METRICS_FILE
        #: The records kept from before ``start_iteration`` (a resumed run's past), in order.
        self.history: list[dict] = []
        self._truncate(start_iteration)
        self.path.touch()
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                pass
            else:
                # Events at or after start_iteration (from before a restart) are discarded.
                self.writer = SummaryWriter(str(Path(folder) / TENSORBOARD_DIR), purge_step=start_iteration)

    def _truncate(self, start_iteration: int) -> None:
        self.history = keep_rows_before(self.path.parent, start_iteration)

    def log(self, metrics: Mapping[str, Any]) -> dict:
        """Append one iteration's metrics (``metrics["iteration"]`` is the step); the row as written."""
        record = {key: _json_value(value) for key, value in metrics.items()}
        with os.fdopen(open_in_folder(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a") as file:
            file.write(json.dumps(record) + "\n")
            file.flush()
            os.fsync(file.fileno())
        if self.writer is not None:
            step = int(record["iteration"])
            for key, value in record.items():
                if key == "iteration" or not isinstance(value, (int, float)):
                    continue  # bools are ints: logged as 0/1
                group, _, rest = key.partition("_")
                tag = f"{group}/{rest}" if group in _TB_GROUPS and rest else key
                self.writer.add_scalar(tag, float(value), step)
            self.writer.flush()
        return record

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def __enter__(self) -> "MetricsLogger":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
