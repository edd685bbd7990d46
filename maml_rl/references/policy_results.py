"""A trained trial policy's evaluation (test.py's ``results.npz``) beside the references on the same tasks.

test.py writes each task's numeric fields as ``task_KEY`` arrays and its settings as a JSON record, so the
file is read here without unpickling: the bandits' means are ``task_mean``, the pulls of a trial the record's
``episodes-per-trial``, and each pull's reward (the mean over the task's trials) a row of ``returns_per_step``.
The policy's regret is the realised one, ``pulls * best mean - total reward``: its expectation is the expected
regret the references report, which the file cannot give (it holds rewards, not arms).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BanditPolicyResults", "compare_bandits", "read_bandit_results"]


@dataclass(frozen=True)
class BanditPolicyResults:
    """``means`` ``[N, arms]``; ``rewards`` ``[N, pulls]``, each the mean over ``trials`` trials of the task;
    ``seed`` the evaluation's."""

    path: str
    means: np.ndarray
    rewards: np.ndarray
    trials: int
    seed: int | None

    @property
    def realised_regret(self) -> np.ndarray:
        """``[N]``: the trial's best-arm total minus its reward."""
        return self.rewards.shape[1] * self.means.max(axis=1) - self.rewards.sum(axis=1)


def read_bandit_results(path: str | Path) -> BanditPolicyResults:
    """The tasks and per-pull rewards of a trial policy's evaluation on a Bernoulli bandit.

    :raises ValueError: the file is not an evaluation of a trial policy on bandits, or is older than the task
        arrays (evaluate again with test.py).
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files if key != "tasks"}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} is not a results.npz that test.py wrote ({exc}).") from None
    where = f"{path} (test.py's results of a trial policy on Bernoulli bandits)"
    if "task_mean" not in arrays:
        raise ValueError(f"{where} has no task_mean: test.py writes the tasks' means since this version; "
                         "evaluate the policy again with test.py.")
    try:
        record = json.loads(str(arrays["evaluation"]))
        settings = record["settings"]
        pulls, trials = int(settings["episodes-per-trial"]), int(settings["fast-batch-size"])
    except (KeyError, TypeError, ValueError, json.JSONDecodeError):
        raise ValueError(f"{where}: its evaluation record names no episodes-per-trial; only trial policies "
                         "(rl2-ppo, the Transformer) play a bandit's pulls as one trial.") from None
    means, per_step = np.asarray(arrays["task_mean"], np.float64), np.asarray(arrays["returns_per_step"])
    if means.ndim != 2 or per_step.ndim != 2 or per_step.shape[0] < pulls or per_step.shape[1] != len(means):
        raise ValueError(f"{where}: task_mean {means.shape} and returns_per_step {per_step.shape} do not make "
                         f"{pulls} pulls of each task.")
    seed = record.get("seed")
    return BanditPolicyResults(str(path), means, per_step[:pulls].T.astype(np.float64), trials,
                               None if seed is None else int(seed))


def _mean_sem(values: np.ndarray) -> dict[str, float | None]:
    sem = float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else None
    return {"mean": float(values.mean()), "sem": sem}


def compare_bandits(policy: BanditPolicyResults, references: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """The policy's total reward and realised regret, and per reference the ratio of the policy's regret to
    the reference's expected regret with their paired difference over the same tasks."""
    regret = policy.realised_regret
    summary: dict[str, Any] = {"file": policy.path, "trials_per_task": policy.trials, "seed": policy.seed,
                               "total_reward": _mean_sem(policy.rewards.sum(axis=1)),
                               "realised_regret": _mean_sem(regret),
                               "mean_reward_per_pull": policy.rewards.mean(axis=0).tolist(),
                               "cumulative_realised_regret": (policy.means.max(axis=1, keepdims=True)
                                                              - policy.rewards).cumsum(axis=1).mean(axis=0).tolist(),
                               "against": {}}
    for name, r in references.items():
        theirs = r["regret"].sum(axis=1)
        if theirs.mean() > 0:
            summary["against"][name] = {"regret_ratio": float(regret.mean() / theirs.mean()),
                                        "difference": _mean_sem(regret - theirs)}
    return summary
