"""Small envs for the vector env's tests: each draws its episode lengths and rewards from its
own ``np_random`` (so seeds show), ends episodes by termination and by truncation, and returns
infos of every kind gymnasium's vector infos handle (ints, floats, bools, numpy numbers and
arrays, nested dicts, strings), some only on some steps (so the ``_key`` masks matter); and
:func:`assert_same`, the tests' bit-for-bit comparison of what two vector envs return."""

from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class _Episodes(gym.Env):
    """The episode bookkeeping the test envs share.

    :param max_length: episodes last 1 to ``max_length`` steps (drawn at reset); ``1``: every
        episode ends at its first step.
    :param fail_in: ``"step"`` or ``"reset"``: raise there once ``fail_at`` steps have been
        taken in total (``options={"fail": True}`` at reset raises at once too).
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, max_length: int = 6, fail_in: Optional[str] = None, fail_at: int = 0,
                 render_mode: Optional[str] = None):
        self.max_length = max_length
        self.fail_in = fail_in
        self.fail_at = fail_at
        self.render_mode = render_mode
        self.steps_taken = 0
        self.scale = 1.0  # set through set_attr in the tests

    def _start(self, seed, options):
        super().reset(seed=seed)
        if options and options.get("fail") or self.fail_in == "reset" and self.steps_taken >= self.fail_at:
            raise RuntimeError("told to fail in reset")
        self.t = 0
        self.length = int(self.np_random.integers(1, self.max_length + 1))
        info = {"length": self.length}
        if options and "tag" in options:
            info["tag"] = options["tag"]
        return info

    def _advance(self):
        if self.fail_in == "step" and self.steps_taken >= self.fail_at:
            raise RuntimeError("told to fail in step")
        self.t += 1
        self.steps_taken += 1
        ended = self.t >= self.length
        # Even lengths end by termination, odd ones by truncation.
        return ended and self.length % 2 == 0, ended and self.length % 2 == 1

    def _info(self):
        info = {"t": self.t, "noise": float(self.np_random.normal()), "flag": bool(self.t % 2),
                "f32": np.float32(self.t / 3), "vec": np.arange(2, dtype=np.int16) + self.t,
                "nested": {"deep": self.t * 2}, "name": f"step {self.t}"}
        if self.t % 3 == 0:
            info["every_third"] = self.t
        return info

    def render(self):
        return np.full((2, 2, 3), self.t, dtype=np.uint8)

    def double(self, x):
        return 2 * x * self.scale


class BoxEnv(_Episodes):
    """Box observations (float32) and Box actions; rewards as numpy float32."""

    observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        info = self._start(seed, options)
        self.state = self.np_random.normal(size=3)
        return self.state.astype(np.float32), info

    def step(self, action):
        terminated, truncated = self._advance()
        self.state = self.state + np.concatenate([action, [self.np_random.normal()]])
        reward = np.float32(self.state.sum() * self.scale)
        # float64 observations, which the float32 space takes (as SyncVectorEnv does).
        return self.state.copy(), reward, terminated, truncated, self._info()


class DiscreteEnv(_Episodes):
    """Discrete observations and actions, each with a ``start``; no infos on reset; int rewards."""

    observation_space = spaces.Discrete(7, start=2)
    action_space = spaces.Discrete(3, start=-1)

    def reset(self, *, seed=None, options=None):
        self._start(seed, options)
        self.state = int(self.np_random.integers(2, 9))
        return self.state, {}

    def step(self, action):
        assert self.action_space.contains(action), action
        terminated, truncated = self._advance()
        self.state = 2 + (self.state - 2 + int(action) + int(self.np_random.integers(0, 2))) % 7
        return self.state, int(action) * self.state, terminated, truncated, self._info() if self.t % 2 else {}


class StructuredEnv(_Episodes):
    """Dict observations holding a Tuple, and Dict actions (which travel pickled)."""

    observation_space = spaces.Dict({
        "position": spaces.Box(-10.0, 10.0, (2,), np.float64),
        "mode": spaces.Discrete(4),
        "bits": spaces.Tuple((spaces.MultiBinary(3), spaces.MultiDiscrete([3, 5]))),
    })
    action_space = spaces.Dict({"move": spaces.Box(-1.0, 1.0, (2,), np.float32), "choose": spaces.Discrete(3)})

    def _observation(self):
        return {"position": self.position.copy(), "mode": int(self.np_random.integers(4)),
                "bits": (self.np_random.integers(0, 2, 3, dtype=np.int8),
                         self.np_random.integers(0, [3, 5], dtype=np.int64))}

    def reset(self, *, seed=None, options=None):
        info = self._start(seed, options)
        self.position = self.np_random.uniform(-1, 1, 2)
        return self._observation(), info

    def step(self, action):
        terminated, truncated = self._advance()
        self.position = np.clip(self.position + action["move"], -10, 10)
        return self._observation(), float(action["choose"]) - 1.0, terminated, truncated, self._info()


class SequenceEnv(_Episodes):
    """An observation space of dynamic shape, which no shared memory can hold."""

    observation_space = spaces.Sequence(spaces.Discrete(2))
    action_space = spaces.Discrete(2)


class OddSpace(gym.Space):
    """A space gymnasium knows nothing of."""

    def __init__(self):
        super().__init__((), np.float32)


class OddSpaceEnv(_Episodes):
    observation_space = OddSpace()
    action_space = spaces.Discrete(2)


class KillerEnv(BoxEnv):
    """Kills its own worker process at the ``kill_at``-th step (SIGKILL)."""

    def __init__(self, kill_at: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.kill_at = kill_at

    def step(self, action):
        if self.steps_taken + 1 >= self.kill_at:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


class TextOneOfEnv(_Episodes):
    """A Dict of Text and OneOf observations (gymnasium's other shared-memory spaces), MultiBinary actions.
    The OneOf index is a numpy int64, as gymnasium's shared memory gives it back."""

    observation_space = spaces.Dict({
        "word": spaces.Text(max_length=5, charset="abcde"),
        "either": spaces.OneOf((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,), np.float32))),
    })
    action_space = spaces.MultiBinary(4)

    def _observation(self):
        word = "".join(self.np_random.choice(list("abcde"), size=int(self.np_random.integers(1, 6))))
        if self.np_random.integers(2):
            either = (np.int64(0), np.int64(self.np_random.integers(3)))
        else:
            either = (np.int64(1), self.np_random.uniform(-1, 1, 2).astype(np.float32))
        return {"word": word, "either": either}

    def reset(self, *, seed=None, options=None):
        info = self._start(seed, options)
        return self._observation(), info

    def step(self, action):
        terminated, truncated = self._advance()
        return self._observation(), float(np.sum(action)), terminated, truncated, self._info()


def assert_same(ours, reference, where="result"):
    """Equal bit for bit: the same types, dtypes, shapes, bytes, and dict keys in the same order."""
    if isinstance(reference, dict):
        assert isinstance(ours, dict), f"{where}: {type(ours).__name__} instead of a dict"
        assert list(ours) == list(reference), f"{where}: keys {list(ours)} != {list(reference)}"
        for key in reference:
            assert_same(ours[key], reference[key], f"{where}[{key!r}]")
    elif isinstance(reference, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(reference), f"{where}: {ours!r} != {reference!r}"
        for i, (a, b) in enumerate(zip(ours, reference)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(reference, np.ndarray):
        assert isinstance(ours, np.ndarray), f"{where}: {type(ours).__name__} instead of an array"
        assert (ours.dtype, ours.shape) == (reference.dtype, reference.shape), \
            f"{where}: {ours.dtype}{ours.shape} != {reference.dtype}{reference.shape}"
        if reference.dtype == object:
            for i, (a, b) in enumerate(zip(ours, reference)):
                assert_same(a, b, f"{where}[{i}]")
        else:
            assert ours.tobytes() == reference.tobytes(), f"{where}: {ours} != {reference}"
    else:
        assert type(ours) is type(reference) and ours == reference, f"{where}: {ours!r} != {reference!r}"
