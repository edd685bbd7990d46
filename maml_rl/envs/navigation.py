"""2D navigation: a point moves towards a goal on the plane."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from maml_rl.envs.point_mass import PointMassEnv

__all__ = ["Navigation2DEnv"]


class Navigation2DEnv(PointMassEnv):
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

    goal_tolerance = 0.01

    def __init__(
        self,
        task: Mapping[str, Any] | None = None,
        low: float = -0.5,
        high: float = 0.5,
        normalization_scale: float = PointMassEnv.max_action,
    ):
        if not low <= high:
            raise ValueError(f"Expected low <= high, got low={low}, high={high}.")
        self.low = float(low)
        self.high = float(high)
        super().__init__(task, normalization_scale)

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        goals = self.np_random.uniform(self.low, self.high, size=(num_tasks, 2))
        return [{"goal": goal} for goal in goals]

    def step(self, action):
        dx, dy = self.move(action)
        reward = -float(np.sqrt(dx * dx + dy * dy))
        terminated = bool(abs(dx) < self.goal_tolerance and abs(dy) < self.goal_tolerance)
        return self._position.copy(), reward, terminated, False, {}
