"""Small meta-learning envs for the sampler tests, importable by spawned workers.

``ProbeEnv`` makes every slot's trajectory predictable and can fail on
demand: a task ``{"value": v, "length": n}`` gives observations
``[v, t, torch_loaded]`` and terminates after ``n`` steps; ``"fail"`` makes
``reset_task`` or ``step`` raise, ``"kill_at"`` makes the process SIGKILL
itself at that step (``"kill_once": path`` at step 2, unless ``path``
exists, which it then creates), ``"sleep"`` makes every step take that many seconds.
"""

import os
import signal
import sys
import time

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
        marker = self.task.get("kill_once")
        if marker and self.t == 2 and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        if self.task.get("sleep"):
            time.sleep(self.task["sleep"])
        self.t += 1
        reward = float(action[0]) + self.task["value"] + self.np_random.normal()
        return self._observation(), reward, self.t >= self.task["length"], False, {}

    def _observation(self):
        torch_loaded = float("torch" in sys.modules)
        return np.array([self.task["value"], self.t, torch_loaded], dtype=np.float32)


def make_probe_env(max_length: int = 6):
    return gym.wrappers.TimeLimit(ProbeEnv(max_length), max_episode_steps=max_length)
