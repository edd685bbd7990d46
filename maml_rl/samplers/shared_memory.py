"""Numpy arrays in shared memory that reach a child under every start method.

A numpy view pickled for a spawned or forkserver child is copied by value, so
the child would write into its own private copy. ``SharedArray`` pickles as
the underlying ``RawArray`` instead (allowed while a process is being started)
and rebuilds the numpy view on the other side with ``np.frombuffer``.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import Sequence

import numpy as np


class SharedArray:
    """A fixed-shape numpy array backed by a ``multiprocessing`` RawArray.

    :param shape: shape of the array.
    :param dtype: numpy dtype of the array.
    :param ctx: multiprocessing context whose ``RawArray`` allocates the
        memory; ``None`` allocates a plain (unshared) numpy array, for the
        in-process mode.
    """

    def __init__(self, shape: Sequence[int], dtype, ctx=None):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        nbytes = max(1, math.prod(self.shape) * self.dtype.itemsize)
        self._raw = None if ctx is None else ctx.RawArray(ctypes.c_byte, nbytes)
        self.array = self._view()

    def _view(self) -> np.ndarray:
        if self._raw is None:
            return np.zeros(self.shape, dtype=self.dtype)
        count = math.prod(self.shape)
        return np.frombuffer(self._raw, dtype=self.dtype, count=count).reshape(self.shape)

    def __getstate__(self):
        if self._raw is None:
            raise TypeError("an in-process SharedArray cannot be sent to another process")
        return self.shape, self.dtype.str, self._raw

    def __setstate__(self, state):
        self.shape, dtype, self._raw = state
        self.dtype = np.dtype(dtype)
        self.array = self._view()


@dataclass
class TrajectoryBuffers:
    """Everything the main process and the workers exchange during a rollout.

    Trajectories are time-major over env slots, so a worker writes each step
    straight into the trajectory and the main process copies once per call.
    Observations have ``horizon + 1`` rows: row ``t`` is what the policy
    sees at step ``t``. The observation after an episode's last step is not
    kept (no loss uses it), so rows past an episode's end stay stale and are
    masked when the episodes are assembled.
    """

    observations: SharedArray  # [T + 1, S, *obs]
    actions: SharedArray  # [T, S, *act]
    rewards: SharedArray  # [T, S]
    infos: SharedArray  # [T, S, len(info_keys)], the chosen per-step info values (float64)
    lengths: SharedArray  # [S]
    end_reason: SharedArray  # [S], how each episode ended (child_env.HORIZON, TERMINATED, TRUNCATED)
    command: SharedArray  # [W], what each worker is asked to do next
    step_index: SharedArray  # [W], the time step each worker steps next
    status: SharedArray  # [W], 0 after success, 1 after an error
    active: SharedArray  # [W], slots of each worker still running
    ready: SharedArray  # [W], set by a worker when its command is done
    info_keys: tuple = ()  # the keys of step()'s info that fill ``infos``

    @classmethod
    def allocate(
        cls,
        num_slots: int,
        num_workers: int,
        horizon: int,
        observation_shape: Sequence[int],
        observation_dtype,
        action_shape: Sequence[int],
        action_dtype,
        info_keys: Sequence[str] = (),
        ctx=None,
    ) -> "TrajectoryBuffers":
        """Allocate the buffers (shared when ``ctx`` is given)."""
        obs_shape, act_shape = tuple(observation_shape), tuple(action_shape)
        S, W, T = num_slots, max(1, num_workers), horizon
        return cls(
            observations=SharedArray((T + 1, S, *obs_shape), observation_dtype, ctx),
            actions=SharedArray((T, S, *act_shape), action_dtype, ctx),
            rewards=SharedArray((T, S), np.float32, ctx),
            infos=SharedArray((T, S, len(info_keys)), np.float64, ctx),
            lengths=SharedArray((S,), np.int64, ctx),
            end_reason=SharedArray((S,), np.uint8, ctx),
            command=SharedArray((W,), np.int32, ctx),
            step_index=SharedArray((W,), np.int64, ctx),
            status=SharedArray((W,), np.int32, ctx),
            active=SharedArray((W,), np.int64, ctx),
            ready=SharedArray((W,), np.uint8, ctx),
            info_keys=tuple(info_keys),
        )

    @staticmethod
    def nbytes(num_slots: int, horizon: int, observation_shape: Sequence[int], observation_dtype,
               action_shape: Sequence[int], action_dtype, info_keys: Sequence[str] = ()) -> int:
        """Bytes of the trajectory arrays :meth:`allocate` makes for these sizes (per-worker arrays aside)."""
        S, T = num_slots, horizon
        return (
            (T + 1) * S * math.prod(observation_shape) * np.dtype(observation_dtype).itemsize
            + T * S * math.prod(action_shape) * np.dtype(action_dtype).itemsize
            + T * S * np.dtype(np.float32).itemsize
            + T * S * len(info_keys) * np.dtype(np.float64).itemsize
            + S * (np.dtype(np.int64).itemsize + 1)
        )

    def views(self) -> SimpleNamespace:
        """The numpy views under the same names, as plain attributes for the hot loops."""
        views = {f.name: getattr(self, f.name) for f in fields(self)}
        return SimpleNamespace(**{name: getattr(value, "array", value) for name, value in views.items()})
