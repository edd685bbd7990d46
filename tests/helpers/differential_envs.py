"""Meta-envs for the differential sampler tests (importable by worker processes).

Every number an env returns depends on its seeded generator (drawn at reset
and at every step), the task, the step and the action, so a wrong seed, a
wrong noise draw, an action sent to the wrong slot or a stale buffer row all
change the trajectory. A task ``{"offset": o, "length": n}`` ends its episodes
after ``n`` steps; ``"length": None`` draws each episode's length at reset
(1 to 8), so that episodes of one task end at different steps; a length past
the horizon runs into the ``TimeLimit``. Every step's info carries
``near`` (a bool: ``|x| < 0.5``) and ``x``, which the sampler carries by
default (``info_keys``), and a string the sampler must ignore.
"""

import functools

import gymnasium as gym
import numpy as np


class DriftEnv(gym.Env):
    """Continuous actions: a point drifting by the action, the task's offset and noise."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    info_keys = ("near", "x")

    def __init__(self):
        self.task = {"offset": 0.0, "length": 1}
        self.x, self.t, self.length = 0.0, 0, 1

    def sample_tasks(self, num_tasks):
        offsets = self.np_random.uniform(-1.0, 1.0, size=num_tasks)
        lengths = self.np_random.integers(0, 10, size=num_tasks)
        return [{"offset": float(o), "length": int(n) or None} for o, n in zip(offsets, lengths)]

    def reset_task(self, task):
        self.task = task

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.x = float(self.np_random.normal())
        self.length = self.task["length"] or int(self.np_random.integers(1, 9))
        return self._observation(), {}

    def _move(self, push):
        self.t += 1
        self.x = 0.9 * self.x + push + self.task["offset"] + 0.1 * float(self.np_random.normal())
        reward = -abs(self.x) + push * self.task["offset"] + 0.01 * self.t
        info = {"x": self.x, "near": abs(self.x) < 0.5, "note": "not carried"}
        return self._observation(), reward, self.t >= self.length, False, info

    def step(self, action):
        action = np.asarray(action, dtype=np.float32)
        return self._move(float(action[0]) - 0.5 * float(action[1]))

    def _observation(self):
        return np.array([self.x, self.task["offset"], self.t], dtype=np.float32)


class DiscreteDriftEnv(DriftEnv):
    """The same with three discrete pushes: left, none, right."""

    action_space = gym.spaces.Discrete(3)

    def step(self, action):
        return self._move(0.5 * (int(action) - 1))


def make_env(env_class, horizon):
    return gym.wrappers.TimeLimit(env_class(), max_episode_steps=horizon)


def factory(discrete: bool, horizon: int):
    """A picklable env factory."""
    return functools.partial(make_env, DiscreteDriftEnv if discrete else DriftEnv, horizon)
