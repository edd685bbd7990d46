"""Metrics of a run: sampled episodes reduced to returns and success, and their per-iteration log."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from maml_rl.config.loading import ConfigError
from maml_rl.data.transitions import TransitionBatch
from maml_rl.data.trials import TrialBatch
from maml_rl.app.runs.files import METRICS_FILE, TENSORBOARD_DIR, atomic_write

__all__ = ["MetricsLogger", "carries_success", "episode_stats", "logged_rows", "mean_returns", "success_rates"]


def mean_returns(episodes: Iterable[Any]) -> np.ndarray:
    """``[num_tasks, batch_size]`` undiscounted returns of each task's episodes."""
    return np.stack([batch.total_rewards.detach().cpu().numpy() for batch in episodes])


def success_rates(episodes: Iterable[Any]) -> np.ndarray:
    """``[num_tasks, batch_size]`` 1.0 where the episode succeeded (``info["success"]`` at some step), else 0.0."""
    return np.stack([batch.success().cpu().numpy().astype(np.float64) for batch in episodes])


def carries_success(episodes: Sequence[Any]) -> bool:
    """Whether the episodes carry the env's ``success`` info (Meta-World's envs do)."""
    return bool(episodes) and all("success" in getattr(batch, "infos", {}) for batch in episodes)


def episode_stats(train_episodes: Sequence[Sequence[Any]], valid_episodes: Sequence[Any]) -> dict[str, float]:
    """Returns before adaptation (``train_episodes[0]``) and after (``valid_episodes``), and env steps.

    :return: ``return_before``, ``return_after`` (means over every episode of
        every task), ``env_steps`` (steps taken in all the batches) and, for
        episodes that carry ``success`` (see ``MultiTaskSampler(info_keys=)``),
        ``success_before`` and ``success_after``: the fraction of episodes
        that succeeded at some step, over every episode of every task.
    """
    all_batches = [batch for step in train_episodes for batch in step] + list(valid_episodes)
    before = train_episodes[0] if train_episodes else valid_episodes
    stats = {
        "return_before": float(mean_returns(before).mean()),
        "return_after": float(mean_returns(valid_episodes).mean()),
        "env_steps": int(sum(int(batch.lengths.sum()) for batch in all_batches)),
    }
    if carries_success(before) and carries_success(valid_episodes):
        stats["success_before"] = float(success_rates(before).mean())
        stats["success_after"] = float(success_rates(valid_episodes).mean())
    return stats


def trial_stats(trials: Sequence[Any]) -> dict[str, float]:
    """Returns (and successes) per episode index of the trials: the meta-RL adaptation curve.

    :return: ``return_episode_i`` (and ``success_episode_i`` when the trials
        carry ``success``) for each episode index ``i`` of the trial, averaged
        over every trial of every task; ``return_before`` / ``return_after``
        (and ``success_before`` / ``success_after``): those of the first and
        the last episode, so that RL² and MAML runs plot alike; ``env_steps``.
    """
    returns = torch.cat([batch.episode_returns() for batch in trials], dim=1)  # [N, all trials]
    stats: dict[str, float] = {"env_steps": int(sum(int(batch.lengths.sum()) for batch in trials))}
    curve = [float(row[~row.isnan()].mean()) if (~row.isnan()).any() else float("nan") for row in returns]
    for i, value in enumerate(curve):
        stats[f"return_episode_{i}"] = value
    stats["return_before"], stats["return_after"] = curve[0], curve[-1]
    if all("success" in batch.infos for batch in trials):
        success = torch.cat([batch.episode_success() for batch in trials], dim=1)
        rates = [float(row[~row.isnan()].mean()) if (~row.isnan()).any() else float("nan") for row in success]
        for i, value in enumerate(rates):
            stats[f"success_episode_{i}"] = value
        stats["success_before"], stats["success_after"] = rates[0], rates[-1]
    return stats


def transition_stats(batch: TransitionBatch) -> dict[str, float]:
    """An off-policy collection: the mean episode return (and success) with z from the prior
    (``return_before``) and from the posterior (``return_after``; the prior's when none was collected)."""
    stats: dict[str, float] = {"env_steps": batch.env_steps}
    for name, part in (("before", batch.prior), ("after", batch.posterior or batch.prior)):
        episodes = [t.split_episodes() for t in part]
        returns = torch.cat([t.episode_returns() for t in part]) if part else torch.zeros(0)
        stats[f"return_{name}"] = float(returns.mean()) if len(returns) else float("nan")
        if part and all("success" in t.infos for t in part):
            success = [float(e.infos["success"].max() > 0) for task in episodes for e in task]
            stats[f"success_{name}"] = sum(success) / len(success) if success else float("nan")
    return stats


def batch_stats(batch: Any) -> dict[str, float]:
    """What ``train.py`` logs of one iteration's batch, as a meta-learner's ``sample`` returned it:
    :func:`trial_stats` of trials, :func:`transition_stats` of a :class:`TransitionBatch`,
    :func:`episode_stats` of ``(train_episodes, valid_episodes)``."""
    if isinstance(batch, Sequence) and batch and all(isinstance(b, TrialBatch) for b in batch):
        return trial_stats(batch)
    if isinstance(batch, TransitionBatch):
        return transition_stats(batch)
    if isinstance(batch, tuple) and len(batch) == 2:
        train_episodes, valid_episodes = batch
        return episode_stats(train_episodes, valid_episodes)
    raise TypeError(f"a meta-learner's sample() returned a {type(batch).__name__}; train.py logs trials "
                    "(TrialBatch per task), a TransitionBatch or an AdaptationBatch(train_episodes, valid_episodes)")


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
    iteration done again after the restart) and any partial last line are
    dropped first, so the file ends up with one line per iteration.

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
        if not self.path.exists():
            return
        self.history = [row for row in logged_rows(self.path.parent)
                        if row.get("iteration", start_iteration) < start_iteration]
        text = "".join(json.dumps(row) + "\n" for row in self.history)
        atomic_write(self.path, lambda f: f.write(text.encode()))

    def log(self, metrics: Mapping[str, Any]) -> None:
        """Append one iteration's metrics (``metrics["iteration"]`` is the step)."""
        record = {key: _json_value(value) for key, value in metrics.items()}
        with open(self.path, "a") as file:
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

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def __enter__(self) -> "MetricsLogger":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
