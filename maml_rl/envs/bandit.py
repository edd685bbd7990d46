"""Multi-armed bandits with Bernoulli or Gaussian arms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from maml_rl.envs.meta_env import MetaEnv

__all__ = ["BernoulliBanditEnv", "GaussianBanditEnv"]


class _BanditEnv(MetaEnv, gym.Env):
    """``k``-armed bandit; task ``{"mean": (k,)}``, means uniform in [0, 1].

    The observation is always ``zeros(1)`` and every pull terminates the
    episode (horizon 1 when made through gymnasium).
    """

    metadata = {"render_modes": []}

    def __init__(self, k: int, task: Mapping[str, Any] | None = None):
        k = int(k)
        if k < 1:
            raise ValueError(f"A bandit needs at least one arm, got k={k}.")
        self.k = k
        self.action_space = spaces.Discrete(k)
        # The observation is always 0; a [0, 1] box rather than [0, 0], which gymnasium's env checker
        # flags as degenerate on every make().
        self.observation_space = spaces.Box(low=0.0, high=1.0, shape=(1,), dtype=np.float32)
        if task is None:
            task = {"mean": np.full(k, 0.5)}
        self.reset_task(task)

    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"mean": (self.k,)}

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        means = self.np_random.uniform(0.0, 1.0, size=(num_tasks, self.k))
        return [{"mean": mean} for mean in means]

    def reset_task(self, task: Mapping[str, Any]) -> None:
        self._means = self.validate_task(task)["mean"]

    def get_task(self) -> dict[str, Any]:
        return {"mean": self._means.copy()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def _arm(self, action) -> int:
        arm = int(action)
        if arm != action or not 0 <= arm < self.k:
            raise ValueError(f"Expected an arm in [0, {self.k}), got {action!r}.")
        return arm

    def _pull(self, arm: int) -> float:
        raise NotImplementedError

    def step(self, action):
        reward = self._pull(self._arm(action))
        return np.zeros(1, dtype=np.float32), reward, True, False, {}


class BernoulliBanditEnv(_BanditEnv):
    """Bernoulli ``k``-armed bandit.

    Task ``{"mean": (k,)}`` with means uniform in [0, 1]; pulling arm ``a``
    gives reward ~ Bernoulli(mean[a]).
    """

    def validate_task(self, task: Any) -> dict[str, Any]:
        task = super().validate_task(task)
        if np.any(task["mean"] < 0.0) or np.any(task["mean"] > 1.0):
            raise ValueError("Task key 'mean' of a Bernoulli bandit must lie in [0, 1].")
        return task

    def _pull(self, arm: int) -> float:
        return float(self.np_random.random() < self._means[arm])


class GaussianBanditEnv(_BanditEnv):
    """Gaussian ``k``-armed bandit.

    Task ``{"mean": (k,)}`` with means uniform in [0, 1]; pulling arm ``a``
    gives reward ~ N(mean[a], std^2), std = 1.
    """

    def __init__(self, k: int, task: Mapping[str, Any] | None = None, std: float = 1.0):
        if not std > 0:
            raise ValueError(f"std must be positive, got {std}.")
        self.std = float(std)
        super().__init__(k, task=task)

    def _pull(self, arm: int) -> float:
        return float(self.np_random.normal(self._means[arm], self.std))
