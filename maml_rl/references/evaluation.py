"""The references on a seeded set of tasks, summed up attempt by attempt.

Tasks are the env's own draw, ``env.reset(seed=seed)`` then ``env.sample_tasks(num_tasks)``. Every
algorithm plays task ``i`` with the env's rewards seeded by ``SeedSequence([seed, i])`` (common random
numbers: the algorithms differ only by their choices) and its own generator
``default_rng([seed, i, 1 + j])``, ``j`` its place in the registry, so the same seed gives the same
numbers whichever algorithms are asked for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from maml_rl.envs.bandit import BernoulliBanditEnv
from maml_rl.envs.mdp import TabularMDPEnv
from maml_rl.references.bandits import BANDIT_AGENTS, play_bandit
from maml_rl.references.mdps import MDP_AGENTS, play_mdp, value_iteration

__all__ = ["bandit_references", "mdp_references", "save", "summarise_bandits", "summarise_mdps"]


def _env_seed(seed: int, task: int) -> int:
    return int(np.random.SeedSequence([seed, task]).generate_state(1)[0])


def _agent_rng(seed: int, task: int, registry: Sequence[str], name: str) -> np.random.Generator:
    return np.random.default_rng([seed, task, 1 + list(registry).index(name)])


def _check(names: Sequence[str], registry: Sequence[str], num_tasks: int) -> list[str]:
    unknown = [name for name in names if name not in registry]
    if unknown or not names:
        raise ValueError(f"Unknown or no algorithms {list(unknown)}: choose from {', '.join(registry)}.")
    if int(num_tasks) < 1:
        raise ValueError(f"num_tasks must be at least 1, got {num_tasks}.")
    return list(names)


def bandit_references(arms: int, pulls: int, num_tasks: int, seed: int,
                      algorithms: Sequence[str] = tuple(BANDIT_AGENTS),
                      means: np.ndarray | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Per algorithm, ``arms`` / ``rewards`` / ``regret`` ``[num_tasks, pulls]`` on ``num_tasks`` Bernoulli
    bandits of ``arms`` arms (``regret``: best mean minus the pulled arm's mean).

    :param means: ``[num_tasks, arms]``, the tasks to play (another evaluation's); by default the env's own
        draw from ``seed``. ``seed`` seeds the rewards and the algorithms either way.
    """
    names = _check(algorithms, tuple(BANDIT_AGENTS), num_tasks)
    env = BernoulliBanditEnv(arms)
    env.reset(seed=int(seed))
    if means is None:
        tasks = env.sample_tasks(num_tasks)
    else:
        means = np.asarray(means, np.float64)
        if means.shape != (int(num_tasks), env.k):
            raise ValueError(f"means must be [num_tasks, arms] = [{num_tasks}, {env.k}], got {list(means.shape)}.")
        tasks = [env.validate_task({"mean": mean}) for mean in means]
    shape = (len(tasks), int(pulls))
    out = {name: {"arms": np.zeros(shape, np.int64), "rewards": np.zeros(shape), "regret": np.zeros(shape)}
           for name in names}
    for i, task in enumerate(tasks):
        env.reset_task(task)
        for name in names:
            agent = BANDIT_AGENTS[name](env.k, task["mean"])
            trial = play_bandit(agent, env, pulls, _env_seed(seed, i), _agent_rng(seed, i, BANDIT_AGENTS, name))
            out[name]["arms"][i], out[name]["rewards"][i] = trial.arms, trial.rewards
            out[name]["regret"][i] = trial.regret_per_pull
    return out


def mdp_references(num_states: int, num_actions: int, horizon: int, episodes: int, num_tasks: int, seed: int,
                   algorithms: Sequence[str] = tuple(MDP_AGENTS),
                   tasks: Sequence[dict[str, np.ndarray]] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Per algorithm, ``returns`` ``[num_tasks, episodes]`` on ``num_tasks`` tabular MDPs; and under
    ``"optimal"``, ``value`` ``[num_tasks]``: the optimal expected return of one episode from state 0.

    :param tasks: ``num_tasks`` tasks to play (``transitions`` and ``rewards_mean``, another evaluation's); by
        default the env's own draw from ``seed``. ``seed`` seeds the rewards and the algorithms either way.
    """
    names = _check(algorithms, tuple(MDP_AGENTS), num_tasks)
    env = TabularMDPEnv(num_states, num_actions)
    env.reset(seed=int(seed))
    if tasks is None:
        tasks = env.sample_tasks(num_tasks)
    elif len(tasks) != int(num_tasks):
        raise ValueError(f"{len(tasks)} tasks given for num_tasks={num_tasks}.")
    else:
        tasks = [env.validate_task(task) for task in tasks]
    out = {name: {"returns": np.zeros((len(tasks), int(episodes)))} for name in names}
    out["optimal"] = {"value": np.zeros(len(tasks))}
    for i, task in enumerate(tasks):
        env.reset_task(task)
        out["optimal"]["value"][i] = value_iteration(task["transitions"], task["rewards_mean"], horizon)[1][0, 0]
        for name in names:
            agent = MDP_AGENTS[name](env, horizon)
            rng = _agent_rng(seed, i, MDP_AGENTS, name)
            out[name]["returns"][i] = play_mdp(agent, env, episodes, horizon, _env_seed(seed, i), rng)
    return out


def _mean_sem(values: np.ndarray) -> dict[str, float | None]:
    """The mean over tasks and its standard error (None for one task)."""
    n = values.shape[0]
    sem = float(values.std(ddof=1) / np.sqrt(n)) if n > 1 else None
    return {"mean": float(values.mean()), "sem": sem}


def summarise_bandits(results: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """Per algorithm: the trial's total reward and expected regret (mean and standard error over tasks),
    and per pull the mean reward and the mean cumulative regret."""
    return {name: {"total_reward": _mean_sem(r["rewards"].sum(axis=1)),
                   "regret": _mean_sem(r["regret"].sum(axis=1)),
                   "mean_reward_per_pull": r["rewards"].mean(axis=0).tolist(),
                   "cumulative_regret": r["regret"].cumsum(axis=1).mean(axis=0).tolist()}
            for name, r in results.items()}


def summarise_mdps(results: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """Per algorithm: the trial's total return and each episode's return (mean and standard error over
    tasks); ``optimal``: the mean optimal expected return of an episode."""
    summary: dict[str, Any] = {}
    for name, r in results.items():
        if name == "optimal":
            summary[name] = {"value_per_episode": _mean_sem(r["value"])}
            continue
        returns = r["returns"]
        per_episode = [_mean_sem(returns[:, e]) for e in range(returns.shape[1])]
        summary[name] = {"total_return": _mean_sem(returns.sum(axis=1)),
                         "return_per_episode": [p["mean"] for p in per_episode],
                         "return_per_episode_sem": [p["sem"] for p in per_episode]}
    return summary


def save(prefix: str | Path, header: dict[str, Any], summary: dict[str, Any],
         results: dict[str, dict[str, np.ndarray]]) -> tuple[Path, Path]:
    """``PREFIX.json`` (the header and the summary) and ``PREFIX.npz`` (``ALGORITHM_FIELD`` per-task arrays)."""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    json_path, npz_path = prefix.with_name(prefix.name + ".json"), prefix.with_name(prefix.name + ".npz")
    json_path.write_text(json.dumps({**header, "algorithms": summary}, indent=1) + "\n")
    np.savez_compressed(npz_path, **{f"{name}_{field}": array for name, fields in results.items()
                                     for field, array in fields.items()})
    return json_path, npz_path
