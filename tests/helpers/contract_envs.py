"""Small meta-envs at the edge of the sampler's contract with users' own envs
(importable by worker processes). Each observation shows what the env was
given, so a test can tell what reached the env from what was recorded."""

import functools

import gymnasium as gym
import numpy as np


class EchoEnv(gym.Env):
    """Observes the last action it received (and the step); tasks are ignored."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
    action_space = gym.spaces.Box(-0.5, 0.5, (2,), np.float32)

    def __init__(self, action_space=None, clip_in_place=False, observation_space=None, value=None):
        if action_space is not None:
            self.action_space = action_space
        if observation_space is not None:
            self.observation_space = observation_space
        self.clip_in_place = clip_in_place
        self.value = value  # an observation to return at step 1 instead (a bad one, say)
        self.t = 0

    def sample_tasks(self, num_tasks):
        return [{"id": i} for i in range(num_tasks)]

    def reset_task(self, task):
        self.task = task

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(0.0, 0.0), {}

    def step(self, action):
        if self.clip_in_place:
            np.clip(action, self.action_space.low, self.action_space.high, out=action)  # as many user envs do
        self.t += 1
        values = np.atleast_1d(np.asarray(action, dtype=np.float64))
        observation = self._observe(values[0], values[-1])
        if self.value is not None and self.t == 1:
            observation = np.asarray(self.value)
        return observation, float(values[0]), False, False, {}

    def _observe(self, first, last):
        return np.array([first, last, self.t], dtype=self.observation_space.dtype)


def make_echo_env(horizon=4, **kwargs):
    return gym.wrappers.TimeLimit(EchoEnv(**kwargs), max_episode_steps=horizon)


def echo_factory(horizon=4, **kwargs):
    return functools.partial(make_echo_env, horizon, **kwargs)
