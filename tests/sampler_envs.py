"""Small meta-learning envs for the sampler tests, importable by spawned workers.

``ProbeEnv`` makes every slot's trajectory predictable and can fail on
demand: a task ``{"value": v, "length": n}`` gives observations
``[v, t, torch_loaded]`` and terminates after ``n`` steps; ``"fail"`` makes
``reset_task`` or ``step`` raise, ``"kill_at"`` makes the process SIGKILL
itself at that step.
"""

import os
import signal
import sys

import gymnasium as gym
import numpy as np


class ProbeEnv(gym.Env):
    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, max_length: int = 6):
        self.max_length = max_length
        self.task = {"value": 0.0, "length": max_length}
        self.t = 0

    def sample_tasks(self, num_tasks):
        values = self.np_random.uniform(-1.0, 1.0, size=num_tasks)
        lengths = self.np_random.integers(1, self.max_length + 1, size=num_tasks)
        return [{"value": float(v), "length": int(n)} for v, n in zip(values, lengths)]

    def reset_task(self, task):
        if task.get("fail") == "reset_task":
            raise RuntimeError("ProbeEnv was told to fail in reset_task")
        self.task = task

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action):
        if self.task.get("fail") == "step" and self.t == 2:
            raise RuntimeError("ProbeEnv was told to fail in step")
        if self.task.get("kill_at") == self.t:
            os.kill(os.getpid(), signal.SIGKILL)
        self.t += 1
        reward = float(action[0]) + self.task["value"] + self.np_random.normal()
        return self._observation(), reward, self.t >= self.task["length"], False, {}

    def _observation(self):
        torch_loaded = float("torch" in sys.modules)
        return np.array([self.task["value"], self.t, torch_loaded], dtype=np.float32)


def make_probe_env(max_length: int = 6):
    return gym.wrappers.TimeLimit(ProbeEnv(max_length), max_episode_steps=max_length)


# -- Envs of the reference-sampler differential tests (tests/test_sampler_reference.py) --
#
# Every number they return depends on the seeded ``np_random`` (drawn at reset
# and at every step), the task, the step and the action, so a wrong seed, a
# wrong noise draw, an action routed to the wrong slot or a stale buffer row
# all change the trajectory. A task is a dict ``{"scale": s, "target": i,
# "lengths": (lo, hi)}``: each episode's length is drawn at reset from
# ``np_random`` in ``[lo, hi]`` (``(1, 1)``: every episode ends at step 1; a
# ``hi`` past the horizon lets episodes run into the TimeLimit). Both envs
# share the task format, so the tests build tasks without asking the env.
# Observations are float32 on purpose: BatchEpisodes keeps float32 tensors
# as they are (a float64 space would be copied there and hide a sampler that
# hands out views of its buffers).


class ReferenceBoxEnv(gym.Env):
    """Continuous actions (2,), observations (3,): a noisy state pushed by the action."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self):
        self.task = {"scale": 1.0, "target": 0, "lengths": (1, 1)}
        self.state = np.zeros(self.observation_space.shape, np.float32)
        self.t, self.length = 0, 1

    def sample_tasks(self, num_tasks):
        scales = self.np_random.uniform(0.5, 1.5, size=num_tasks)
        targets = self.np_random.integers(0, 3, size=num_tasks)
        lows = self.np_random.integers(1, 4, size=num_tasks)
        spans = self.np_random.integers(0, 6, size=num_tasks)
        return [{"scale": float(s), "target": int(i), "lengths": (int(lo), int(lo + n))}
                for s, i, lo, n in zip(scales, targets, lows, spans)]

    def reset_task(self, task):
        self.task = task

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        lo, hi = self.task["lengths"]
        self.length = int(self.np_random.integers(lo, hi + 1))
        start = self.np_random.normal(size=self.observation_space.shape) * self.task["scale"]
        self.state = (start + 0.25 * self.task["target"]).astype(np.float32)
        return self.state.copy(), {}

    def _advance(self, push):
        self.t += 1
        noise = self.np_random.normal(size=self.state.shape)
        state = 0.8 * self.state.astype(np.float64) + self.task["scale"] * push + 0.1 * noise + 0.05 * self.t
        self.state = state.astype(np.float32)
        return noise

    def step(self, action):
        a = np.asarray(action, dtype=np.float64)
        noise = self._advance(np.array([a[0], a[1], a[0] * a[1]]))
        reward = -float(np.sum((a - 0.3 * self.task["target"]) ** 2)) + 0.01 * float(noise[0]) + 0.1 * self.state[2]
        return self.state.copy(), float(reward), self.t >= self.length, False, {}


class ReferenceDiscreteEnv(ReferenceBoxEnv):
    """Three discrete actions, observations (4,): the action's one-hot pushes the state."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def step(self, action):
        a = int(action)
        push = np.zeros(self.state.shape)
        push[a] = 1.0
        push[3] = a - 1.0
        noise = self._advance(push)
        reward = float(a == self.task["target"]) - 0.2 * a + 0.01 * float(noise[1]) + 0.1 * float(self.state[3])
        return self.state.copy(), reward, self.t >= self.length, False, {}


def make_reference_box_env(horizon: int = 6):
    return gym.wrappers.TimeLimit(ReferenceBoxEnv(), max_episode_steps=horizon)


def make_reference_discrete_env(horizon: int = 5):
    return gym.wrappers.TimeLimit(ReferenceDiscreteEnv(), max_episode_steps=horizon)
