"""A trained trial policy's evaluation (test.py's ``results.npz``) beside the references on the same tasks.

test.py writes each task's numeric fields as ``task_KEY`` arrays and its settings as a JSON record, so the
file is read here without unpickling: the bandits' means are ``task_mean``, the MDPs' ``task_transitions`` and
``task_rewards_mean``; the episodes of a trial are the record's ``episodes-per-trial``, and each episode's
return (the mean over the task's trials) is a row of ``returns_per_step``. On bandits the policy's regret is the
realised one, ``pulls * best mean - total reward``: its expectation is the expected regret the references
report, which the file cannot give (it holds rewards, not arms).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from maml_rl.references.evaluation import _mean_sem

__all__ = ["BanditPolicyResults", "MDPPolicyResults", "compare_bandits", "compare_mdps", "read_bandit_results",
           "read_mdp_results"]


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


def _read_trials(path: str | Path, benchmark: str, fields: tuple[str, ...]) -> tuple[dict, np.ndarray, int, int, dict]:
    """The task arrays, ``[tasks, episodes]`` returns, episodes, trials a task and record of a trial policy's
    results.npz, checked."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files if key != "tasks"}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} is not a results.npz that test.py wrote ({exc}).") from None
    where = f"{path} (test.py's results of a trial policy on {benchmark})"
    missing = [f"task_{field}" for field in fields if f"task_{field}" not in arrays]
    if missing:
        raise ValueError(f"{where} has no {', '.join(missing)}: test.py writes the tasks' fields since this "
                         "version; evaluate the policy again with test.py.")
    try:
        record = json.loads(str(arrays["evaluation"]))
        settings = record["settings"]
        episodes, trials = int(settings["episodes-per-trial"]), int(settings["fast-batch-size"])
    except (KeyError, TypeError, ValueError, json.JSONDecodeError):
        raise ValueError(f"{where}: its evaluation record names no episodes-per-trial; only trial policies "
                         "(rl2-ppo, the Transformer) play a trial's episodes as one trial.") from None
    tasks = {field: np.asarray(arrays[f"task_{field}"], np.float64) for field in fields}
    per_step = np.asarray(arrays["returns_per_step"])
    count = {len(a) for a in tasks.values()}
    if per_step.ndim != 2 or per_step.shape[0] < episodes or count != {per_step.shape[1]}:
        shapes = ", ".join(f"task_{k} {list(v.shape)}" for k, v in tasks.items())
        raise ValueError(f"{where}: {shapes} and returns_per_step {list(per_step.shape)} do not make {episodes} "
                         "episodes of each task.")
    return tasks, per_step[:episodes].T.astype(np.float64), episodes, trials, record


def _seed(record: dict) -> int | None:
    return None if record.get("seed") is None else int(record["seed"])


def read_bandit_results(path: str | Path) -> BanditPolicyResults:
    """The tasks and per-pull rewards of a trial policy's evaluation on a Bernoulli bandit.

    :raises ValueError: the file is not an evaluation of a trial policy on bandits, or is older than the task
        arrays (evaluate again with test.py).
    """
    tasks, rewards, _, trials, record = _read_trials(path, "Bernoulli bandits", ("mean",))
    if tasks["mean"].ndim != 2:
        raise ValueError(f"{path}: task_mean must be [tasks, arms], got {list(tasks['mean'].shape)}.")
    return BanditPolicyResults(str(path), tasks["mean"], rewards, trials, _seed(record))


@dataclass(frozen=True)
class MDPPolicyResults:
    """``transitions`` ``[N, S, A, S]``, ``rewards_mean`` ``[N, S, A]``; ``returns`` ``[N, episodes]``, each the
    mean over ``trials`` trials of the task; ``config`` the run's config file named by the record, if any."""

    path: str
    transitions: np.ndarray
    rewards_mean: np.ndarray
    returns: np.ndarray
    trials: int
    seed: int | None
    config: str | None

    @property
    def tasks(self) -> list[dict[str, np.ndarray]]:
        return [{"transitions": t, "rewards_mean": r} for t, r in zip(self.transitions, self.rewards_mean)]


def read_mdp_results(path: str | Path) -> MDPPolicyResults:
    """The tasks and per-episode returns of a trial policy's evaluation on tabular MDPs.

    :raises ValueError: as :func:`read_bandit_results`.
    """
    tasks, returns, _, trials, record = _read_trials(path, "tabular MDPs", ("transitions", "rewards_mean"))
    transitions, rewards_mean = tasks["transitions"], tasks["rewards_mean"]
    if transitions.ndim != 4 or rewards_mean.shape != transitions.shape[:3]:
        raise ValueError(f"{path}: task_transitions {list(transitions.shape)} and task_rewards_mean "
                         f"{list(rewards_mean.shape)} are not [tasks, S, A, S] and [tasks, S, A].")
    config = record.get("config")
    return MDPPolicyResults(str(path), transitions, rewards_mean, returns, trials, _seed(record),
                            config if isinstance(config, str) else None)


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


def compare_mdps(policy: MDPPolicyResults, references: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """The policy's total return and return per episode, and per reference the ratio of the policy's total
    return to the reference's with their paired difference over the same tasks."""
    total = policy.returns.sum(axis=1)
    summary: dict[str, Any] = {"file": policy.path, "trials_per_task": policy.trials, "seed": policy.seed,
                               "total_return": _mean_sem(total),
                               "return_per_episode": policy.returns.mean(axis=0).tolist(), "against": {}}
    for name, r in references.items():
        if name == "optimal":
            continue
        theirs = r["returns"].sum(axis=1)
        summary["against"][name] = {"return_ratio": float(total.mean() / theirs.mean()),
                                    "difference": _mean_sem(total - theirs)}
    return summary
