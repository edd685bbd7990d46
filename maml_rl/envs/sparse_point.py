"""Sparse-reward point robot: find a goal on the unit half circle, rewarded only near it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from maml_rl.envs.meta_env import MetaEnv, validate_normalization_scale

__all__ = ["SparsePointEnv"]


class SparsePointEnv(MetaEnv, gym.Env):
    """Point robot with a sparse goal reward (oyster's ``sparse-point-robot``; VariBAD's and HyperX's
    ``SparsePointEnv``).

    * Task ``{"goal": (2,)}``: ``(cos a, sin a)`` with ``a ~ U[0, pi]``, a point of the unit half circle
      (VariBAD's semi-circle sampler; oyster spaces 100 fixed goals evenly on it).
    * The point starts at the origin; the action, clipped to ``[-s, s]^2`` and scaled by ``0.1 / s``
      (``s = normalization_scale``, default 0.1: no scaling), is added to its position. The observation
      is the position. ``normalization_scale=1`` maps a policy's ``[-1, 1]`` onto steps in
      ``[-0.1, 0.1]``, as VariBAD's env does; oyster does not clip.
    * Reward, with ``d = ||position - goal||_2`` after the move: ``1 - d`` when ``d <= goal_radius``
      (0.2; on the radius counts as inside), else 0. This is oyster's and VariBAD's sparse reward: their
      dense reward ``-d`` masked outside the radius, plus 1 inside, so every reward inside is in
      ``[0.8, 1]`` and a step outside is worth nothing. ``info["success"]`` is 1.0 at a step inside,
      and an episode succeeds when one of its steps does (the sampler carries ``success``).
    * Never terminates. Horizon 20 when made through gymnasium (oyster's ``max_path_length``): a
      searcher that goes out to the circle and along it finds about half the goals in one attempt and,
      sweeping from the other end in a second, all of them (``tests/envs/test_sparse_point.py``). Within
      VariBAD's and HyperX's 100 steps one attempt sweeps the whole arc, and success no longer needs the
      memory of an earlier attempt. The trials of ``configs/rl2/sparse-point-robot.yaml`` run 3 attempts,
      as VariBAD's and HyperX's ``max_rollouts_per_task``.
    """

    metadata = {"render_modes": []}
    info_keys = ("success",)
    max_action = 0.1

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        goal_radius: float = 0.2,
        normalization_scale: float = max_action,
    ):
        goal_radius = float(goal_radius)
        if not (np.isfinite(goal_radius) and goal_radius > 0):
            raise ValueError(f"goal_radius must be a positive number, got {goal_radius}.")
        scale = validate_normalization_scale(normalization_scale)
        self.goal_radius = goal_radius
        self.normalization_scale = scale
        self.observation_space = spaces.Box(low=-np.inf, high=np.inf, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Box(low=-scale, high=scale, shape=(2,), dtype=np.float32)
        self._position = np.zeros(2, dtype=np.float32)
        self._goal = np.zeros(2, dtype=np.float64)
        if task is None:
            task = {"goal": np.array([1.0, 0.0])}
        self.reset_task(task)

    # Task protocol
    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"goal": (2,)}

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        angles = self.np_random.uniform(0.0, np.pi, size=num_tasks)
        return [{"goal": np.array([np.cos(a), np.sin(a)])} for a in angles]

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
        distance = float(np.sqrt(dx * dx + dy * dy))
        inside = distance <= self.goal_radius
        reward = 1.0 - distance if inside else 0.0
        return self._position.copy(), reward, False, False, {"success": float(inside)}
