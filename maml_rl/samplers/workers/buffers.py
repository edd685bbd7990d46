"""The trajectory buffers: their spec, their shared memory, and what a rollout returns.

* :class:`BufferSpec`: the sizes and dtypes every layer agrees on (horizon,
  observation and action shapes, the carried info keys).
* :class:`SharedArray` / :class:`TrajectoryBuffers`: numpy arrays in shared
  memory that reach a child under every start method. A numpy view pickled
  for a spawned or forkserver child is copied by value, so the child would
  write into its own private copy; ``SharedArray`` pickles as the underlying
  ``RawArray`` instead (allowed while a process is being started) and
  rebuilds the numpy view on the other side with ``np.frombuffer``.
* :class:`Trajectories`: the arrays of one rollout, as the backends return them.

Torch-free: the worker processes import it.
"""

from __future__ import annotations

import ctypes
import enum
import math
from dataclasses import dataclass, field, fields
from typing import ClassVar, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np


class EndReason(enum.IntEnum):
    """Why an episode ended, one ``uint8`` per slot in ``Trajectories.end_reason``."""

    HORIZON = 0  # cut by the sampler at its horizon
    TERMINATED = 1  # the env's terminated flag
    TRUNCATED = 2  # the env's truncated flag (its own TimeLimit, say)


# The codes as plain ints, for numpy: see ``entry.STEP`` for why not the members.
HORIZON, TERMINATED, TRUNCATED = (int(reason) for reason in EndReason)


@dataclass(frozen=True)
class BufferSpec:
    """Sizes and dtypes of the trajectory buffers (picklable, torch-free).

    :param horizon: the most steps of an episode.
    :param info_keys: keys of ``step()``'s info carried into ``infos`` (float64).
    :param num_categories: ``n`` of a ``Discrete`` action space (``None``: ``Box``).
    :param action_start: ``start`` of a ``Discrete`` space: the buffers record
        category indices ``0 .. n - 1`` (what the policy sampled), and the env
        is given ``action_start + index``.
    :param episodes_per_trial: the most episodes a slot runs back to back in
        one rollout (a trial, for recurrent policies); the buffers hold
        ``rows = horizon * episodes_per_trial`` steps. ``horizon`` stays the
        most steps of one episode.
    """

    horizon: int
    observation_shape: Tuple[int, ...]
    observation_dtype: np.dtype
    action_shape: Tuple[int, ...]
    action_dtype: np.dtype
    info_keys: Tuple[str, ...] = ()
    num_categories: Optional[int] = None
    action_start: int = 0
    episodes_per_trial: int = 1

    @property
    def rows(self) -> int:
        """Steps the buffers hold per slot: a whole trial."""
        return self.horizon * self.episodes_per_trial

    @classmethod
    def for_spaces(cls, observation_space: gym.Space, action_space: gym.Space, horizon: int,
                   info_keys: Sequence[str] = ()) -> "BufferSpec":
        """The spec for an env's spaces; ``TypeError`` for spaces the sampler does not support."""
        if not isinstance(observation_space, gym.spaces.Box):
            raise TypeError(f"the sampler needs a Box observation space, got {observation_space}")
        num_categories, start = None, 0
        if isinstance(action_space, gym.spaces.Discrete):
            action_shape, action_dtype = (), np.int64
            num_categories, start = int(action_space.n), int(action_space.start)
        elif isinstance(action_space, gym.spaces.Box):
            action_shape, action_dtype = action_space.shape, np.float32
        else:
            raise TypeError(f"the sampler supports Box and Discrete action spaces, got {action_space}")
        return cls(horizon=horizon, observation_shape=tuple(observation_space.shape),
                   observation_dtype=np.dtype(observation_space.dtype), action_shape=tuple(action_shape),
                   action_dtype=np.dtype(action_dtype), info_keys=tuple(info_keys), num_categories=num_categories,
                   action_start=start)

    @property
    def discrete(self) -> bool:
        """Whether actions are category indices (their noise is one uniform number per slot)."""
        return bool(np.issubdtype(self.action_dtype, np.integer))

    def trajectory_bytes(self, num_slots: int) -> int:
        """Bytes of the trajectory arrays of ``num_slots`` slots (per-worker arrays aside)."""
        S, T = num_slots, self.rows
        return (
            (T + 1) * S * math.prod(self.observation_shape) * self.observation_dtype.itemsize
            + T * S * math.prod(self.action_shape) * self.action_dtype.itemsize
            + T * S * np.dtype(np.float32).itemsize
            + T * S * len(self.info_keys) * np.dtype(np.float64).itemsize
            + T * S  # dones
            + S * (np.dtype(np.int64).itemsize + 1)
            + self.episodes_per_trial * S * math.prod(self.observation_shape) * self.observation_dtype.itemsize
        )


@dataclass
class Trajectories:
    """The arrays of one rollout, slot-major on the second axis.

    Rows past an episode's end (``t >= lengths[s]``) hold anything and are
    masked when episodes are assembled. A local backend returns views of its
    shared buffers, valid until its next rollout; Ray returns copies.
    """

    observations: np.ndarray  # [T(+1), S, *obs]: row t is what the policy saw at step t
    actions: np.ndarray  # [T, S, *act]
    rewards: np.ndarray  # [T, S]
    infos: np.ndarray  # [T, S, len(info_keys)]
    dones: np.ndarray  # [T, S], 1 + EndReason at the last step of each episode of a trial, else 0
    lengths: np.ndarray  # [S], steps of the slot's episode (of its whole trial)
    end_reason: np.ndarray  # [S], EndReason codes (of the trial's last episode)
    #: What the policy side recorded (a recurrent policy's log-probs and states), slot-major on axis 1.
    recorded: Dict[str, np.ndarray] = field(default_factory=dict)
    #: [E, S, *obs]: the observation after the last step of each episode of a slot (the terminal one, or the
    #: one a time limit cut at), which ``observations`` does not keep (the next row is the next reset's).
    final_observations: Optional[np.ndarray] = None

    ARRAYS: ClassVar[Tuple[str, ...]] = ("observations", "actions", "rewards", "infos", "dones", "lengths",
                                         "end_reason")
    STEPS: ClassVar[Tuple[str, ...]] = ("observations", "actions", "rewards", "infos", "dones")

    def nbytes(self) -> int:
        finals = 0 if self.final_observations is None else self.final_observations.nbytes
        return int(sum(getattr(self, name).nbytes for name in self.ARRAYS)
                   + sum(a.nbytes for a in self.recorded.values()) + finals)

    @classmethod
    def side_by_side(cls, groups: List["Trajectories"]) -> "Trajectories":
        """The groups' slots side by side (Ray's task groups), padded to the longest episode."""
        out = {name: _side_by_side([getattr(g, name) for g in groups]) for name in cls.STEPS}
        for name in ("lengths", "end_reason"):
            out[name] = np.concatenate([getattr(g, name) for g in groups])
        # Time-major (log-probs) or chunk-major (states): padded on axis 0 as well.
        recorded = {name: _side_by_side([g.recorded[name] for g in groups]) for name in groups[0].recorded}
        # A reused pool may keep rows for more episodes than this call's: padded like the steps.
        finals = None if groups[0].final_observations is None else _side_by_side(
            [g.final_observations for g in groups])
        return cls(**out, recorded=recorded, final_observations=finals)

    def copy_of_slots(self, num_slots: int) -> "Trajectories":
        """A copy of the first ``num_slots`` slots, cut to their longest episode."""
        T = int(self.lengths[:num_slots].max())
        steps = (getattr(self, name)[:T, :num_slots].copy() for name in self.STEPS)
        finals = None if self.final_observations is None else self.final_observations[:, :num_slots].copy()
        return Trajectories(*steps, self.lengths[:num_slots].copy(), self.end_reason[:num_slots].copy(),
                            {name: a[:, :num_slots].copy() for name, a in self.recorded.items()}, finals)


def _side_by_side(parts: List[np.ndarray]) -> np.ndarray:
    """``[T_i, S_i, ...]`` arrays side by side on axis 1, zero-padded to the longest axis 0."""
    array = np.zeros((max(p.shape[0] for p in parts), sum(p.shape[1] for p in parts), *parts[0].shape[2:]),
                     dtype=parts[0].dtype)
    lo = 0
    for part in parts:
        array[:part.shape[0], lo:lo + part.shape[1]] = part
        lo += part.shape[1]
    return array


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
    sees at step ``t``; rows past an episode's end stay stale and are masked
    when the episodes are assembled. The observation after an episode's last
    step goes to ``final_observations`` (row ``e`` for the slot's ``e``-th
    episode), for transitions that bootstrap from it.
    """

    observations: SharedArray  # [T + 1, S, *obs]
    final_observations: SharedArray  # [E, S, *obs], after the last step of each episode of a trial
    actions: SharedArray  # [T, S, *act]
    rewards: SharedArray  # [T, S]
    infos: SharedArray  # [T, S, len(info_keys)], the chosen per-step info values (float64)
    dones: SharedArray  # [T, S], 1 + EndReason at the last step of each episode (trials), else 0
    lengths: SharedArray  # [S]
    end_reason: SharedArray  # [S], how each episode ended (EndReason)
    command: SharedArray  # [W], what each worker is asked to do next
    step_index: SharedArray  # [W], the time step each worker steps next
    status: SharedArray  # [W], 0 after success, 1 after an error
    active: SharedArray  # [W], slots of each worker still running
    ready: SharedArray  # [W], set by a worker when its command is done

    @classmethod
    def allocate(cls, spec: BufferSpec, num_slots: int, num_workers: int, ctx=None) -> "TrajectoryBuffers":
        """Allocate the buffers (shared when ``ctx`` is given)."""
        S, W, T = num_slots, max(1, num_workers), spec.rows
        return cls(
            observations=SharedArray((T + 1, S, *spec.observation_shape), spec.observation_dtype, ctx),
            final_observations=SharedArray((spec.episodes_per_trial, S, *spec.observation_shape),
                                           spec.observation_dtype, ctx),
            actions=SharedArray((T, S, *spec.action_shape), spec.action_dtype, ctx),
            rewards=SharedArray((T, S), np.float32, ctx),
            infos=SharedArray((T, S, len(spec.info_keys)), np.float64, ctx),
            dones=SharedArray((T, S), np.uint8, ctx),
            lengths=SharedArray((S,), np.int64, ctx),
            end_reason=SharedArray((S,), np.uint8, ctx),
            command=SharedArray((W,), np.int32, ctx),
            step_index=SharedArray((W,), np.int64, ctx),
            status=SharedArray((W,), np.int32, ctx),
            active=SharedArray((W,), np.int64, ctx),
            ready=SharedArray((W,), np.uint8, ctx),
        )

    def views(self) -> "BufferViews":
        """The numpy views under the same names, as plain attributes for the hot loops."""
        return BufferViews(**{f.name: getattr(self, f.name).array for f in fields(self)})


@dataclass
class BufferViews:
    """The numpy views of :class:`TrajectoryBuffers`, field for field."""

    observations: np.ndarray
    final_observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    infos: np.ndarray
    dones: np.ndarray
    lengths: np.ndarray
    end_reason: np.ndarray
    command: np.ndarray
    step_index: np.ndarray
    status: np.ndarray
    active: np.ndarray
    ready: np.ndarray

    def trajectories(self) -> Trajectories:
        """The trajectory arrays (views of the buffers, not copies)."""
        return Trajectories(self.observations, self.actions, self.rewards, self.infos, self.dones, self.lengths,
                            self.end_reason, final_observations=self.final_observations)
