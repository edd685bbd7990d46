"""A configurable meta-env for the property-based replay tests (importable by worker processes).

``PropertyEnv(config)`` is a small deterministic meta-learning env whose
spaces, episode ends and action handling come from a plain ``config`` dict
(see :func:`make_property_env`), so that hypothesis can generate many of
them. Every number it returns depends on the task, the reset seed (through
``self.np_random``, drawn at reset and at every step), the step and the
action, with plain float64 numpy arithmetic: a wrong seed, task, action or
step changes the next observation and the reward.

A task is ``{"scale": s, "end": e, "trunc": c}`` or the float64 array
``[s, e, c]``: ``end`` ``n > 0`` terminates every episode after ``n`` steps,
``0`` never, ``-1`` after a number of steps drawn at each reset (1 to the
config's ``end_max``); ``trunc`` ``c > 0`` makes the env itself return
``truncated=True`` at step ``c``.

The env is strict about what it receives: a ``Box`` action must be a float32
``np.ndarray`` of the space's shape, a ``Discrete(n, start)`` action an
integer in ``start .. start + n - 1``; anything else raises.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List

import gymnasium as gym
import numpy as np


def task_parameters(task: Any):
    """``(scale, end, trunc)`` of a dict or array task."""
    if isinstance(task, dict):
        return float(task["scale"]), int(task["end"]), int(task["trunc"])
    values = np.asarray(task, dtype=np.float64)
    return float(values[0]), int(values[1]), int(values[2])


class PropertyEnv(gym.Env):
    """See the module docstring. ``config`` keys:

    * ``obs_shape`` (tuple), ``obs_dtype`` (``"float32"``/``"float64"``: the
      space's), ``emit_dtype`` (the dtype ``reset``/``step`` return; may
      differ from the space's within the float kind);
    * ``action``: ``("box", dims, low, high)`` or ``("discrete", n, start)``;
    * ``clip``: for Box, ``"none"`` (out-of-bounds actions used as given),
      ``"inplace"`` (``np.clip(action, low, high, out=action)``) or ``"copy"``
      (the same numbers, clipping a copy);
    * ``task_kind``: ``"dict"`` or ``"array"`` (what ``sample_tasks`` returns);
    * ``end_max``: the largest per-episode end drawn for ``end == -1``.
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(self, config: Dict[str, Any]):
        self.config = dict(config)
        self.obs_shape = tuple(config["obs_shape"])
        self.obs_size = int(np.prod(self.obs_shape, dtype=np.int64))
        self.emit_dtype = np.dtype(config.get("emit_dtype", config["obs_dtype"]))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, self.obs_shape, np.dtype(config["obs_dtype"]))
        action = config["action"]
        if action[0] == "box":
            _, dims, low, high = action
            self.low, self.high = float(low), float(high)
            self.action_space = gym.spaces.Box(self.low, self.high, (int(dims),), np.float32)
        else:
            _, n, start = action
            self.action_space = gym.spaces.Discrete(int(n), start=int(start))
        self.clip = config.get("clip", "none")
        self.end_max = int(config.get("end_max", 5))
        self.scale, self.end, self.trunc = 0.5, 0, 0
        self.x = np.zeros(self.obs_size)
        self.t, self.episode_end = 0, 0

    # -- the meta-learning interface ---------------------------------------------

    def sample_tasks(self, num_tasks: int) -> List[Any]:
        scales = self.np_random.uniform(-2.0, 2.0, size=num_tasks)
        ends = self.np_random.integers(-1, self.end_max + 1, size=num_tasks)
        if self.config.get("task_kind", "dict") == "array":
            return [np.array([s, e, 0.0]) for s, e in zip(scales, ends)]
        return [{"scale": float(s), "end": int(e), "trunc": 0} for s, e in zip(scales, ends)]

    def reset_task(self, task: Any) -> None:
        self.scale, self.end, self.trunc = task_parameters(task)

    # -- the gymnasium interface -------------------------------------------------

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.x = self.np_random.uniform(-1.0, 1.0, size=self.obs_size) * (1.0 + abs(self.scale))
        self.episode_end = self.end if self.end >= 0 else int(self.np_random.integers(1, self.end_max + 1))
        return self._observation(), {}

    def step(self, action):
        push = self._push(action)
        self.t += 1
        noise = self.np_random.normal(size=self.obs_size)
        self.x = 0.8 * self.x + 0.3 * push + 0.1 * self.scale + 0.05 * noise + 0.01 * self.t
        reward = float(-self.scale * np.sum(self.x * self.x) + 0.5 * np.sum(push) + 0.01 * self.t + 0.1 * noise[0])
        terminated = self.episode_end > 0 and self.t >= self.episode_end
        truncated = self.trunc > 0 and self.t >= self.trunc
        return self._observation(), reward, bool(terminated), bool(truncated), {}

    # -- helpers -------------------------------------------------------------------

    def _push(self, action) -> np.ndarray:
        """The action's effect on every coordinate of the state (float64 ``[obs_size]``)."""
        space = self.action_space
        if isinstance(space, gym.spaces.Box):
            if type(action) is not np.ndarray or action.dtype != np.float32 or action.shape != space.shape:
                raise TypeError(f"PropertyEnv expects a float32 ndarray action of shape {space.shape}, got "
                                f"{type(action).__name__} {getattr(action, 'dtype', '')} "
                                f"{getattr(action, 'shape', '')}: {action!r}")
            if self.clip == "inplace":
                np.clip(action, self.low, self.high, out=action)
            elif self.clip == "copy":
                action = np.clip(action, self.low, self.high)
            a = action.astype(np.float64)
            weights = 1.0 + 0.25 * np.arange(a.size)
            return np.resize(a * weights, self.obs_size) + 0.1 * float(np.sum(a))
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            raise TypeError(f"PropertyEnv expects an integer action for {space}, got {type(action).__name__} "
                            f"{action!r}")
        if not space.start <= int(action) < space.start + space.n:
            raise ValueError(f"PropertyEnv got the action {action!r}, outside {space}")
        v = float(int(action))
        return np.full(self.obs_size, 0.37 * v) + 0.11 * v * v + 0.05 * np.arange(self.obs_size) * v

    def _observation(self) -> np.ndarray:
        values = self.x * 3.7 + 0.001 * self.t + 1e-9 * self.scale
        return values.reshape(self.obs_shape).astype(self.emit_dtype)


def make_property_env(config: Dict[str, Any]) -> gym.Env:
    """``PropertyEnv(config)``, in a ``TimeLimit`` of ``config["time_limit"]`` steps if not ``None``."""
    env: gym.Env = PropertyEnv(config)
    if config.get("time_limit") is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=int(config["time_limit"]))
    return env


def property_factory(config: Dict[str, Any]):
    """A picklable env factory for ``config``."""
    return functools.partial(make_property_env, dict(config))
