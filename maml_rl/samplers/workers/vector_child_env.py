"""The vector env's side of a worker: its spec, its shared memory and its stepper.

``MultiTaskVectorEnv`` runs on the sampler's worker processes (``entry.worker_main``,
``pools.ChildEnvPool``): the same command codes, wake-ups and failure handling. What
differs is what a worker steps, and where the results go:

* :class:`VectorSpec`: the single spaces, the number of envs and workers, the autoreset mode;
* :class:`VectorBuffers`: gymnasium's own shared memory for observations (and actions),
  rewards and flags, plus the per-worker command arrays ``entry`` reads;
* :class:`VectorChildEnv`: one worker's envs, stepped one after another with gymnasium's
  vector semantics (``SyncVectorEnv``'s loop, env for env);
* :class:`InfoColumns`: a step's infos as one array, where every env has the same float keys.

A step writes observations, rewards and flags into shared memory; only non-empty infos
(and, in ``SAME_STEP`` mode, the final observations) travel back pickled, one reply per
worker. Torch-free: the worker processes import it.
"""

from __future__ import annotations

import multiprocessing
import traceback
from dataclasses import dataclass, fields
from typing import Any, Callable, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

from .buffers import SharedArray
from .child_env import assign_slots
from .vector_mistakes import EnvRaised

# Action spaces whose batch the caller's array is written into shared memory as it is; actions
# of other spaces (Dict, Tuple, Text...) go to the workers pickled, one message per worker.
_FLAT_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def read_copies(space: gym.Space) -> bool:
    """Whether gymnasium's ``read_from_shared_memory`` of ``space`` copies (a Text or OneOf anywhere in it)."""
    if isinstance(space, (gym.spaces.Text, gym.spaces.OneOf)):
        return True
    if isinstance(space, gym.spaces.Dict):
        return any(read_copies(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return any(read_copies(s) for s in space.spaces)
    return False


def fits_buffer(actions: Any, buffer: np.ndarray) -> bool:
    """Whether ``actions`` go into the shared buffer unchanged (same dtype and shape)."""
    return isinstance(actions, np.ndarray) and actions.dtype == buffer.dtype and actions.shape == buffer.shape


@dataclass(frozen=True)
class VectorSpec:
    """What every worker of a vector env agrees on (picklable).

    :param observation_space: one env's observation space.
    :param action_space: one env's action space.
    :param num_envs: envs over all workers.
    :param num_workers: worker processes; worker ``w`` steps envs ``ranges[w]``.
    :param autoreset_mode: gymnasium's ``AutoresetMode`` value.
    :param mujoco_batch: step through the fast path (``batched_vector_child_env``, or
        ``stepper_vector_child_env`` with ``own_stepper``): ``True`` required, ``None`` where every env of a
        worker can, ``False`` never.
    :param own_stepper: the envs make their own stepper (``BatchSteppedEnv``: Meta-World's benchmarks).
    """

    observation_space: gym.Space
    action_space: gym.Space
    num_envs: int
    num_workers: int
    autoreset_mode: str
    mujoco_batch: Optional[bool] = False
    own_stepper: bool = False

    @property
    def ranges(self) -> List[range]:
        return assign_slots(self.num_envs, self.num_workers)

    @property
    def shares_actions(self) -> bool:
        """Whether the actions travel through shared memory (else pickled)."""
        return isinstance(self.action_space, _FLAT_SPACES)


@dataclass
class VectorBuffers:
    """The shared memory of a vector env.

    ``observations`` and ``actions`` are gymnasium's (``create_shared_memory`` of the single
    space for ``num_envs`` envs), as ``AsyncVectorEnv(shared_memory=True)`` has them; the rest
    are ``SharedArray``s, the per-worker ones named as ``TrajectoryBuffers`` names them.
    """

    spec: VectorSpec
    observations: Any
    actions: Any
    rewards: SharedArray  # [N] float64, as SyncVectorEnv's
    terminated: SharedArray  # [N] bool
    truncated: SharedArray  # [N] bool
    command: SharedArray  # [W]
    step_index: SharedArray  # [W]
    status: SharedArray  # [W]
    ready: SharedArray  # [W]

    @classmethod
    def allocate(cls, spec: VectorSpec, num_slots: int, num_workers: int, ctx) -> "VectorBuffers":
        N, W = num_slots, max(1, num_workers)
        # ctx=None (the envs step in this process): gymnasium's layout still, in memory no other process maps.
        memory_ctx = ctx if ctx is not None else multiprocessing.get_context()
        actions = create_shared_memory(spec.action_space, n=N, ctx=memory_ctx) if spec.shares_actions else None
        return cls(
            spec=spec,
            observations=create_shared_memory(spec.observation_space, n=N, ctx=memory_ctx),
            actions=actions,
            rewards=SharedArray((N,), np.float64, ctx),
            terminated=SharedArray((N,), np.bool_, ctx),
            truncated=SharedArray((N,), np.bool_, ctx),
            command=SharedArray((W,), np.int32, ctx),
            step_index=SharedArray((W,), np.int64, ctx),
            status=SharedArray((W,), np.int32, ctx),
            ready=SharedArray((W,), np.uint8, ctx),
        )

    def views(self) -> "VectorViews":
        """Numpy views; ``observations`` and ``actions`` batched as gymnasium reads them."""
        spec = self.spec
        arrays = {f.name: getattr(self, f.name).array for f in fields(self)
                  if isinstance(getattr(self, f.name), SharedArray)}
        observations = read_from_shared_memory(spec.observation_space, self.observations, n=spec.num_envs)
        actions = None
        if self.actions is not None:
            actions = read_from_shared_memory(spec.action_space, self.actions, n=spec.num_envs)
        return VectorViews(observation_memory=self.observations, observations=observations, actions=actions,
                           **arrays)


@dataclass
class VectorViews:
    """The numpy views of :class:`VectorBuffers` (``observation_memory``: gymnasium's shared memory)."""

    observation_memory: Any
    observations: Any
    actions: Any
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    command: np.ndarray
    step_index: np.ndarray
    status: np.ndarray
    ready: np.ndarray


# (env index, info) of the envs whose info is not empty, in env order.
Infos = List[Tuple[int, dict]]


@dataclass(frozen=True)
class InfoColumns:
    """The step infos of envs ``start, start + 1, ...`` when each has the same keys, in the same order,
    with float, int or bool values: ``values[i, j]`` is env ``start + i``'s value of ``keys[j]``. One array crosses
    the pipe instead of a dict per env, and the vector env writes each key's column into its infos
    at once, which is what gymnasium's ``_add_info`` builds from the dicts env by env."""

    start: int
    keys: Tuple[str, ...]
    values: np.ndarray  # (n, len(keys)) float64
    #: The type of the first env's value of each key (bool, int or float); empty: all float.
    types: Tuple[type, ...] = ()

    def add_to(self, infos: dict, num_envs: int) -> None:
        """``VectorEnv._add_info`` of each env's infos, a key at a time: the same arrays (of the first value's
        type, as ``_add_info`` makes them; the other values cast into it), the same masks and the same order of
        keys."""
        rows = slice(self.start, self.start + len(self.values))
        for j, key in enumerate(self.keys):
            array = infos[key] if key in infos else np.zeros(num_envs, dtype=self.types[j] if self.types else float)
            array[rows] = self.values[:, j]
            mask = infos[f"_{key}"] if f"_{key}" in infos else np.zeros(num_envs, dtype=np.bool_)
            mask[rows] = True
            infos[key], infos[f"_{key}"] = array, mask


class VectorChildEnv:
    """One worker's envs of a vector env (``env_fns[ranges[index]]``), stepped one after another.

    Built by ``entry.make_child_env`` with ChildEnv's arguments, so the worker's command loop
    is the sampler's: ``reset`` (``RESET``), ``step`` (``STEP``) and ``request`` (``REQUEST``: call,
    get and set attributes, set tasks, a step with pickled actions). Each returns what goes back
    pickled, or ``None``.

    :param env_fns: every env's factory; this worker builds its own range of them.
    :param num_envs: unused (the worker's range says how many).
    :param buffers: the views of :class:`VectorBuffers`.
    :param index: the worker's index.
    :param spec: the :class:`VectorSpec`.
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], num_envs: int, buffers: VectorViews, index: int,
                 spec: VectorSpec):
        del num_envs
        self.spec = spec
        self.range = spec.ranges[index]
        self.mode = AutoresetMode(spec.autoreset_mode)
        self.space = spec.observation_space
        # An observation array of the space's shape is assigned to its row of the batched view: what
        # write_to_shared_memory writes (the same cast), without its ~6 us of views per call.
        self.flat_shape = self.space.shape if isinstance(self.space, _FLAT_SPACES) else None
        self.buffers = buffers
        self.actions = buffers.actions
        self.current_env: Optional[int] = None
        self.current_operation = "start-up"
        self.tasks: List[Any] = []
        self.envs: List[Any] = []
        for i in self.range:
            self.current_env = i
            self.envs.append(env_fns[i]())
        self.current_env = None
        # SyncVectorEnv's _autoreset_envs, for this worker's envs.
        self.autoreset = np.zeros(len(self.range), dtype=np.bool_)

    def reset_task(self, first_slot: int, tasks: Sequence[Any], slot_offset: int = 0) -> None:
        """Set env ``first_slot + i`` to ``tasks[i]`` (``env.unwrapped.reset_task``)."""
        self.current_operation = "reset_task"
        self.tasks = list(tasks)
        for i, (env, task) in enumerate(zip(self.envs, tasks)):
            self.current_env = first_slot + i
            env.unwrapped.reset_task(task)
        self.current_env = None

    def reset(self, request: Tuple[Sequence[Any], Any, Optional[Sequence[bool]]]) -> Optional[Infos]:
        """``(seeds, options, mask)`` for this worker's envs: reset each (each masked one, with a
        mask), as ``SyncVectorEnv.reset`` does."""
        seeds, options, mask = request
        b, lo = self.buffers, self.range.start
        infos: Infos = []
        self.current_operation = "reset"
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                continue
            g = self.current_env = lo + i
            b.terminated[g] = b.truncated[g] = self.autoreset[i] = False
            observation, info = env.reset(seed=seeds[i], options=options)
            self._write(g, observation)
            if info:
                infos.append((g, info))
        self.current_env = None
        return infos or None

    def step(self, t: int = 0) -> Optional[Infos]:
        """Step every env with its action from shared memory (a copy of it)."""
        return self._step([self.actions[g].copy() for g in self.range])

    def request(self, request: Tuple[str, Any]) -> Any:
        """A rare command: ``("step", actions)`` with this worker's actions pickled,
        ``("call", (name, args, kwargs))``, ``("set_attr", (name, values))`` or
        ``("reset_task", (first_slot, tasks, slot_offset))``. An env's exception in the last three is the
        caller's to handle, as ``SyncVectorEnv`` leaves it (a missing attribute, a task the env refuses): it
        comes back as an :class:`EnvRaised` reply, and the worker and its envs stay as they are."""
        kind, payload = request
        if kind == "step":
            return self._step(payload)
        handler = {"call": self._call, "set_attr": self._set_attr, "reset_task": self.reset_task}[kind]
        try:
            return handler(*payload)
        except Exception as error:
            if not EnvRaised.crosses_processes(error):
                raise
            return EnvRaised(error, self.describe_failure(), traceback.format_exc())

    def _step(self, actions: Sequence[Any]) -> Optional[Infos]:
        b, lo, mode, write = self.buffers, self.range.start, self.mode, self._write
        rewards, terminated, truncated, autoreset = b.rewards, b.terminated, b.truncated, self.autoreset
        infos: Infos = []
        self.current_operation = "step"
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            g = self.current_env = lo + i
            if mode is AutoresetMode.NEXT_STEP and autoreset[i]:
                self.current_operation = "reset (autoreset)"
                observation, info = env.reset()
                self.current_operation = "step"
                rewards[g], terminated[g], truncated[g] = 0.0, False, False
            else:
                observation, rewards[g], terminated[g], truncated[g], info = env.step(action)
                if mode is AutoresetMode.SAME_STEP and (terminated[g] or truncated[g]):
                    infos.append((g, {"final_obs": observation, "final_info": info}))
                    self.current_operation = "reset (autoreset)"
                    observation, info = env.reset()
                    self.current_operation = "step"
            write(g, observation)
            autoreset[i] = terminated[g] or truncated[g]
            if info:
                infos.append((g, info))
        self.current_env = None
        return infos or None

    def _write(self, g: int, observation: Any) -> None:
        if observation.__class__ is np.ndarray and observation.shape == self.flat_shape:
            self.buffers.observations[g] = observation
        else:
            write_to_shared_memory(self.space, g, observation, self.buffers.observation_memory)

    def _call(self, name: str, args: tuple, kwargs: dict) -> List[Any]:
        """``SyncVectorEnv.call``'s result for this worker's envs."""
        self.current_operation = f"call({name!r})"
        results = []
        for i, env in enumerate(self.envs):
            self.current_env = self.range.start + i
            function = env.get_wrapper_attr(name)
            results.append(function(*args, **kwargs) if callable(function) else function)
        self.current_env = None
        return results

    def _set_attr(self, name: str, values: Sequence[Any]) -> None:
        self.current_operation = f"set_attr({name!r})"
        for i, (env, value) in enumerate(zip(self.envs, values)):
            self.current_env = self.range.start + i
            env.set_wrapper_attr(name, value)
        self.current_env = None

    def position(self) -> Tuple[str, Optional[int], Any]:
        """Where the worker is (a step past ``step_timeout``): the operation, the env index and its task."""
        i = None if self.current_env is None else self.current_env - self.range.start
        task = self.tasks[i] if i is not None and 0 <= i < len(self.tasks) else None
        return self.current_operation, self.current_env, task

    def describe_failure(self) -> str:
        """Where the last exception happened: operation and env index."""
        where = f"during {self.current_operation}"
        return where if self.current_env is None else f"{where} in env {self.current_env}"

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []

