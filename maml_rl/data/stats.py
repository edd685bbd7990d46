"""Sampled batches reduced to what a run logs: returns (and success) before and after adaptation, env steps.

Each meta-learner's :meth:`~maml_rl.metalearners.base.MetaLearner.batch_stats` summarises its own batch with
these: :func:`episode_stats` of gradient adaptation's episodes, :func:`trial_stats` of RL²'s trials,
:func:`transition_stats` of PEARL's collections.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import torch

from maml_rl.data.transitions import TransitionBatch

__all__ = ["carries_success", "episode_stats", "mean_returns", "success_rates", "trial_stats", "transition_stats"]


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
