"""The vector env's fast path for an env that makes its own stepper (``maml_rl.envs.batch_stepping``).

Meta-World's benchmarks, for one: each task class's envs of a worker advance as one ``BatchedSawyer``
(``metaworld_fast/batched``), with the observations, rewards, flags and infos of each env's own ``step``,
bit for bit. The step loop is ``fast_vector_child_env``'s; resets stay each env's own, with the stepper told
around each (``before_reset``, ``after_reset``), and the ``TimeLimit`` of ``gymnasium.make`` is counted here.

The stepper holds the envs' state while they are *bound* to it. A call, ``set_attr`` or ``reset_tasks``
unbinds them first: each env's own state (its simulation, its counters, its ``TimeLimit``'s step count) is
given back, so the method sees the env as it is and may change it. The envs then step one at a time, as
``VectorChildEnv`` steps them, until each has been reset, and are bound again (so an env never steps
from a state the stepper did not see). Torch-free.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple, Union

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from maml_rl.envs.batch_stepping import BatchSteppedEnv

from .batched_child_env import fast_path_support
from .child_env import time_limit_wrapper
from .fast_vector_child_env import FastVectorChildEnv, StepInfos
from .vector_child_env import InfoColumns, Infos, VectorSpec, VectorViews


def stepper_support(envs: Sequence[gym.Env]) -> Optional[str]:
    """``None`` if one ``BatchStepper`` can step ``envs``: each makes its own (``BatchSteppedEnv``), of one
    class, in the wrappers ``gymnasium.make`` adds; else why not."""
    first = envs[0].unwrapped
    if not isinstance(first, BatchSteppedEnv):
        return f"{type(first).__name__} does not implement BatchSteppedEnv"
    for env in envs:
        if type(env.unwrapped) is not type(first):
            return "its envs differ in class (one stepper steps copies of one env)"
        reason = fast_path_support(env)
        if reason is not None:
            return reason
    return None


class StepperVectorChildEnv(FastVectorChildEnv):
    """A :class:`FastVectorChildEnv` whose envs step through their env's ``BatchStepper``.

    :param nthread: the stepper's physics threads (this one included).
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], num_envs: int, buffers: VectorViews, index: int,
                 spec: VectorSpec, nthread: int = 1):
        super().__init__(env_fns, num_envs, buffers, index, spec)
        self.stepper = None
        self.bound = False  # whether the stepper holds the envs' state (see the module's docstring)
        reason = stepper_support(self.envs)
        if reason is not None:
            if spec.mujoco_batch:
                raise TypeError(f"mujoco_batch=True, but the fast path cannot step these envs: {reason}; leave "
                                "mujoco_batch at None to step them one at a time")
            return  # mujoco_batch=None: this worker steps its envs one at a time (VectorChildEnv's)
        n = len(self.envs)
        self.stepper = self.envs[0].unwrapped.batch_stepper([env.unwrapped for env in self.envs], nthread)
        self.info_keys: Tuple[str, ...] = self.stepper.all_info_keys
        if self.info_keys is None:
            self.stepper.close()
            self.stepper = None
            if spec.mujoco_batch:
                raise TypeError("mujoco_batch=True, but the fast path cannot step these envs: their stepper does not "
                                "say its infos' types (BatchStepper.all_info_keys); leave mujoco_batch at None to step "
                                "them one at a time")
            return
        self.limits = [time_limit_wrapper(env) for env in self.envs]
        never = np.iinfo(np.int64).max
        self.max_steps = np.array([never if w is None else int(w._max_episode_steps) for w in self.limits])
        self.elapsed = np.zeros(n, dtype=np.int64)  # steps of each env's episode while bound (its TimeLimit's)
        self.ready = np.zeros(n, dtype=np.bool_)  # reset since the envs were unbound (all: bind them)

    # -- binding -------------------------------------------------------------

    def _bind(self) -> None:
        """Every env has been reset since it was unbound: the stepper continues from each env's own state."""
        n = len(self.envs)
        self.stepper.assign(n)
        for i in range(n):
            self.stepper.after_reset(i)
            self.elapsed[i] = 0 if self.limits[i] is None else self.limits[i]._elapsed_steps
        self.bound = True

    def _unbind(self) -> None:
        """Give every env its own state back (a method may read or change it); they step one at a time until
        each has been reset."""
        if self.stepper is None:
            return
        if self.bound:
            self.stepper.release()
            for wrapper, elapsed in zip(self.limits, self.elapsed):
                if wrapper is not None:
                    wrapper._elapsed_steps = int(elapsed)
            self.stepper.assign(0)
            self.bound = False
        self.ready[:] = False

    def _were_reset(self, ids: Sequence[int]) -> None:
        if self.stepper is None or self.bound:
            return
        self.ready[list(ids)] = True
        if self.ready.all():
            self._bind()

    # -- the commands ----------------------------------------------------------

    def reset_task(self, first_slot: int, tasks: Sequence[Any], slot_offset: int = 0) -> None:
        self._unbind()
        super().reset_task(first_slot, tasks, slot_offset)

    def reset(self, request: Tuple[Sequence[Any], Any, Optional[Sequence[bool]]]) -> Optional[Infos]:
        mask = request[2]
        ids = [i for i in range(len(self.envs)) if mask is None or mask[i]]
        if self.bound:
            for i in ids:
                self.stepper.before_reset(i)
        infos = super().reset(request)  # each env's own reset: its noise, observation and info
        if self.bound:
            for i in ids:
                self.stepper.after_reset(i)
            self.elapsed[ids] = 0
        else:
            self._were_reset(ids)
        return infos

    def step(self, t: int = 0) -> Union[Infos, InfoColumns, None]:
        if self.bound and self.actions is not None:  # (the rows are a view of the shared buffer: copied)
            return self._step(self.actions[self.range.start:self.range.stop].copy())
        return super().step(t)

    def _step(self, actions: Sequence[Any]) -> Union[Infos, InfoColumns, None]:
        if self.bound or self.stepper is None:
            return super()._step(actions)
        # Unbound: env by env; an env that resets in this step is ready to be bound.
        if self.mode is AutoresetMode.NEXT_STEP:
            resetting = self.autoreset.copy()
        infos = super()._step(actions)
        if self.mode is AutoresetMode.NEXT_STEP:
            self._were_reset(np.flatnonzero(resetting))
        elif self.mode is AutoresetMode.SAME_STEP:
            rows = slice(self.range.start, self.range.stop)
            self._were_reset(np.flatnonzero(self.buffers.terminated[rows] | self.buffers.truncated[rows]))
        return infos

    def _fast(self) -> bool:
        return self.bound

    def _reset_env(self, i: int) -> Tuple[Any, dict]:
        self.stepper.before_reset(i)
        observation, info = self.envs[i].reset()
        self.stepper.after_reset(i)
        self.elapsed[i] = 0
        return observation, info

    def _advance(self, ids: np.ndarray, actions: Sequence[Any]
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Optional[StepInfos]]:
        n = len(self.envs)
        rows = np.asarray(ids, dtype=np.intp)
        stepped = np.asarray(actions if len(ids) == n else [actions[i] for i in ids])
        observations, rewards, terminated, truncated, values = self.stepper.step(rows, stepped, self.info_keys)
        self.elapsed[rows] += 1
        truncated = truncated | (self.elapsed[rows] >= self.max_steps[rows])
        return observations, rewards, terminated, truncated, StepInfos(self.info_keys, values,
                                                                       self.stepper.info_types())

    def _before_call(self) -> None:
        self._unbind()

    def close(self) -> None:
        if getattr(self, "stepper", None) is not None:
            self.stepper.close()
            self.stepper = None
        super().close()
