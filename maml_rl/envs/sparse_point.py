"""Sparse-reward point robot: find a goal on the unit half circle, rewarded only near it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from maml_rl.envs.point_mass import PointMassEnv

__all__ = ["SparsePointEnv"]


class SparsePointEnv(PointMassEnv):
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

    info_keys = ("success",)
    default_goal = (1.0, 0.0)

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        goal_radius: float = 0.2,
        normalization_scale: float = PointMassEnv.max_action,
    ):
        goal_radius = float(goal_radius)
        if not (np.isfinite(goal_radius) and goal_radius > 0):
            raise ValueError(f"goal_radius must be a positive number, got {goal_radius}.")
        self.goal_radius = goal_radius
        super().__init__(task, normalization_scale)

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        angles = self.np_random.uniform(0.0, np.pi, size=num_tasks)
        return [{"goal": np.array([np.cos(a), np.sin(a)])} for a in angles]

    def step(self, action):
        dx, dy = self.move(action)
        distance = float(np.sqrt(dx * dx + dy * dy))
        inside = distance <= self.goal_radius
        reward = 1.0 - distance if inside else 0.0
        return self._position.copy(), reward, False, False, {"success": float(inside)}
