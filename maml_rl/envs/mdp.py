"""Random tabular MDPs (Duan et al., 2016)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from maml_rl.envs.meta_env import MetaEnv

__all__ = ["TabularMDPEnv"]


class TabularMDPEnv(MetaEnv, gym.Env):
    """Tabular MDP with ``S`` states and ``A`` actions.

    * Task ``{"transitions": (S, A, S), "rewards_mean": (S, A)}``:
      ``transitions[s, a] ~ Dirichlet(1)``, ``rewards_mean[s, a] ~ N(1, 1)``.
    * Starts in state 0; the observation is the one-hot state (float32).
    * Reward ~ N(rewards_mean[s, a], 1); next state ~ transitions[s, a].
      Never terminates by itself (horizon 10 when made through gymnasium).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        num_states: int = 10,
        num_actions: int = 5,
        task: Mapping[str, Any] | None = None,
    ):
        self.num_states = int(num_states)
        self.num_actions = int(num_actions)
        if self.num_states < 1 or self.num_actions < 1:
            raise ValueError(
                f"Expected at least one state and one action, got "
                f"num_states={num_states}, num_actions={num_actions}."
            )
        self.action_space = spaces.Discrete(self.num_actions)
        self.observation_space = spaces.Box(
            low=0.0, high=1.0, shape=(self.num_states,), dtype=np.float32
        )
        self._state = 0
        if task is None:
            shape = (self.num_states, self.num_actions)
            task = {
                "transitions": np.full(shape + (self.num_states,), 1.0 / self.num_states),
                "rewards_mean": np.zeros(shape),
            }
        self.reset_task(task)

    # Task protocol
    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        S, A = self.num_states, self.num_actions
        return {"transitions": (S, A, S), "rewards_mean": (S, A)}

    def validate_task(self, task: Any) -> dict[str, Any]:
        task = super().validate_task(task)
        transitions = task["transitions"]
        if np.any(transitions < 0.0) or not np.allclose(
            transitions.sum(axis=-1), 1.0, rtol=0.0, atol=1e-5
        ):
            raise ValueError(
                "Task key 'transitions' must hold probability distributions "
                "over next states (non-negative, summing to 1 on the last axis)."
            )
        return task

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        num_tasks = self._check_num_tasks(num_tasks)
        S, A = self.num_states, self.num_actions
        transitions = self.np_random.dirichlet(np.ones(S), size=(num_tasks, S, A))
        rewards_mean = self.np_random.normal(1.0, 1.0, size=(num_tasks, S, A))
        return [
            {"transitions": t, "rewards_mean": r}
            for t, r in zip(transitions, rewards_mean, strict=True)
        ]

    def reset_task(self, task: Mapping[str, Any]) -> None:
        task = self.validate_task(task)
        self._transitions = task["transitions"]
        self._rewards_mean = task["rewards_mean"]
        self._cumulative = np.cumsum(self._transitions, axis=-1)

    def get_task(self) -> dict[str, Any]:
        return {
            "transitions": self._transitions.copy(),
            "rewards_mean": self._rewards_mean.copy(),
        }

    # Environment
    def _observation(self) -> np.ndarray:
        observation = np.zeros(self.num_states, dtype=np.float32)
        observation[self._state] = 1.0
        return observation

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._state = 0
        return self._observation(), {}

    def step(self, action):
        a = int(action)
        if a != action or not 0 <= a < self.num_actions:
            raise ValueError(f"Expected an action in [0, {self.num_actions}), got {action!r}.")
        s = self._state
        reward = float(self.np_random.normal(self._rewards_mean[s, a], 1.0))
        # Inverse-CDF sampling of the next state from transitions[s, a].
        u = self.np_random.random()
        next_state = int(np.searchsorted(self._cumulative[s, a], u, side="right"))
        self._state = min(next_state, self.num_states - 1)
        return self._observation(), reward, False, False, {}
