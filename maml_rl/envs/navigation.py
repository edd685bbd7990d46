"""2D navigation: a point moves towards a goal on the plane."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from maml_rl.envs.meta_env import MetaEnv, validate_normalization_scale

__all__ = ["Navigation2DEnv"]


class Navigation2DEnv(MetaEnv, gym.Env):
    """2D navigation to a goal (Finn et al., 2017).

    * Task ``{"goal": (2,)}``, goal uniform in ``[low, high]^2``.
    * The point starts at the origin; the action, clipped to ``[-s, s]^2`` and
      scaled by ``0.1 / s`` (``s = normalization_scale``, default 0.1: no
      scaling), is added to its position. The observation is the position.
      ``normalization_scale=1`` is the original MAML code's setting, whose
      environment wrapper mapped actions in ``[-1, 1]`` onto ``[-0.1, 0.1]``.
    * Reward ``-||position - goal||_2`` after the move; the episode terminates
      when both coordinates are within 0.01 of the goal (horizon 100 when
      made through gymnasium).
    """

    metadata = {"render_modes": []}
    max_action = 0.1
    goal_tolerance = 0.01

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        low: float = -0.5,
        high: float = 0.5,
        normalization_scale: float = max_action,
    ):
        if not low <= high:
            raise ValueError(f"Expected low <= high, got low={low}, high={high}.")
        scale = validate_normalization_scale(normalization_scale)
        self.low = float(low)
        self.high = float(high)
        self.normalization_scale = scale
        self.observation_space = spaces.Box(
            low=-np.inf, high=np.inf, shape=(2,), dtype=np.float32
        )
        self.action_space = spaces.Box(
            low=-scale, high=scale, shape=(2,), dtype=np.float32
        )
        self._position = np.zeros(2, dtype=np.float32)
        self._goal = np.zeros(2, dtype=np.float64)
        if task is None:
            task = {"goal": np.zeros(2)}
        self.reset_task(task)

    # Task protocol
    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"goal": (2,)}

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        goals = self.np_random.uniform(self.low, self.high, size=(num_tasks, 2))
        return [{"goal": goal} for goal in goals]

    def reset_task(self, task: Mapping[str, Any]) -> None:
        self._goal = self.validate_task(task)["goal"]

    def get_task(self) -> dict[str, Any]:
        return {"goal": self._goal.copy()}

    # Environment
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._position = np.zeros(2, dtype=np.float32)
        return self._position.copy(), {}

    def step(self, action):
        action = np.asarray(action, dtype=np.float32)
        if action.shape != (2,):
            raise ValueError(f"Expected an action of shape (2,), got {action.shape}.")
        scale = self.normalization_scale
        action = np.minimum(np.maximum(action, -scale), scale)
        if scale != self.max_action:
            action = action * np.float32(self.max_action / scale)
        self._position = self._position + action
        dx, dy = self._position.astype(np.float64) - self._goal
        reward = -float(np.sqrt(dx * dx + dy * dy))
        terminated = bool(abs(dx) < self.goal_tolerance and abs(dy) < self.goal_tolerance)
        return self._position.copy(), reward, terminated, False, {}
