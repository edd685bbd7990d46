"""A point on the plane moved by bounded steps towards a hidden goal: what 2D navigation and the sparse point
robot share (their rewards, goals and ends are their own)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from maml_rl.envs.meta_env import MetaEnv, validate_normalization_scale

__all__ = ["PointMassEnv"]


class PointMassEnv(MetaEnv, gym.Env):
    """Task ``{"goal": (2,)}``. The point starts at the origin; the action, clipped to ``[-s, s]^2`` and scaled by
    ``0.1 / s`` (``s = normalization_scale``, default 0.1: no scaling), is added to its position, which is the
    observation. Subclasses set ``default_goal`` and define ``sample_tasks`` and ``step`` (with :meth:`move`)."""

    metadata = {"render_modes": []}
    max_action = 0.1
    default_goal = (0.0, 0.0)

    def __init__(self, task: Mapping[str, Any] | None, normalization_scale: float):
        scale = validate_normalization_scale(normalization_scale)
        self.normalization_scale = scale
        self.observation_space = spaces.Box(low=-np.inf, high=np.inf, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Box(low=-scale, high=scale, shape=(2,), dtype=np.float32)
        self._position = np.zeros(2, dtype=np.float32)
        self._goal = np.zeros(2, dtype=np.float64)
        self.reset_task({"goal": np.array(self.default_goal)} if task is None else task)

    # Task protocol
    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"goal": (2,)}

    def reset_task(self, task: Mapping[str, Any]) -> None:
        self._goal = self.validate_task(task)["goal"]

    def get_task(self) -> dict[str, Any]:
        return {"goal": self._goal.copy()}

    # Environment
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._position = np.zeros(2, dtype=np.float32)
        return self._position.copy(), {}

    def move(self, action) -> tuple[float, float]:
        """Apply ``action`` to the position; the position's offset from the goal after the move (float64)."""
        action = np.asarray(action, dtype=np.float32)
        if action.shape != (2,):
            raise ValueError(f"Expected an action of shape (2,), got {action.shape}.")
        scale = self.normalization_scale
        action = np.minimum(np.maximum(action, -scale), scale)
        if scale != self.max_action:
            action = action * np.float32(self.max_action / scale)
        self._position = self._position + action
        dx, dy = self._position.astype(np.float64) - self._goal
        return dx, dy
