"""Meta-envs that misbehave on purpose, for the sampler's input checks (importable by workers).

``BadOutputEnv``: a task ``{"bad": kind, "slot_step": n}`` makes the env go
wrong at step ``n``: ``"scalar"`` returns a scalar observation, ``"huge"`` a
float64 1e300 (beyond float32), ``"nan_reward"`` a NaN reward, ``"array_reward"``
a reward of shape (2,), ``"string_reward"`` the reward ``"1.5"``, ``"none_reward"``
``None``, ``"string_terminated"`` ``terminated="False"``, ``"int_terminated"``
``terminated=1`` (accepted). Any other task behaves. ``NoTimeLimitEnv`` has no
TimeLimit: it ends its episodes after ``task["length"]`` steps on its own.
``HangingEnv``: a task ``{"hang_at": n}`` makes its ``step`` at step ``n`` never return; with
``"deaf": True`` it first blocks every signal it can, as an env stuck in C code would be deaf to them.
``make_slow_start_env(folder)``: in a worker process, writes a file named by its pid into ``folder``,
then takes 2 s to build its env (the main process builds its own at once).
"""

import multiprocessing
import os
import signal
import time

import gymnasium as gym
import numpy as np


class BadOutputEnv(gym.Env):
    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self):
        self.task = {}
        self.t = 0

    def sample_tasks(self, num_tasks):
        return [{} for _ in range(num_tasks)]

    def reset_task(self, task):
        self.task = task

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        bad = self.task.get("bad") if self.t == self.task.get("at_step") else None
        self.t += 1
        observation = np.full(2, self.t, np.float32)
        reward = float(action[0])
        if bad == "scalar":
            observation = 1.0
        elif bad == "huge":
            observation = np.array([1e300, 0.0])
        elif bad == "nan_reward":
            reward = float("nan")
        elif bad == "array_reward":
            reward = np.ones(2)
        elif bad == "string_reward":
            reward = "1.5"
        elif bad == "none_reward":
            reward = None
        terminated = {"string_terminated": "False", "int_terminated": 1}.get(bad, False)
        return observation, reward, terminated, False, {}


def make_bad_output_env():
    return gym.wrappers.TimeLimit(BadOutputEnv(), max_episode_steps=5)


class NoTimeLimitEnv(BadOutputEnv):
    def step(self, action):
        observation, reward, _, _, info = super().step(action)
        return observation, reward, self.t >= self.task.get("length", 3), False, info


class HangingEnv(BadOutputEnv):
    def step(self, action):
        if self.t == self.task.get("hang_at"):
            if self.task.get("deaf"):
                signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
            while True:  # a step that never returns (asleep in Python, so that it can say where it is)
                time.sleep(3600)
        return super().step(action)


def make_hanging_env():
    return gym.wrappers.TimeLimit(HangingEnv(), max_episode_steps=5)


def make_slow_start_env(folder):
    if multiprocessing.parent_process() is not None:
        open(os.path.join(folder, str(os.getpid())), "w").close()
        time.sleep(2.0)
    return make_bad_output_env()
