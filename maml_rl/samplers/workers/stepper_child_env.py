"""The fast path of a ChildEnv whose env makes its own stepper (``maml_rl.envs.batch_stepping``).

Meta-World's benchmarks, for one, step each task class's slots together (``metaworld_fast/batched``).
Here a step hands all running slots' actions to the env's ``BatchStepper`` at once and writes what it
returns into the buffers; resets, trials, horizons and the ``TimeLimit`` stay this worker's, as in
``ChildEnv``, so each slot's episode equals the per-env path's bit for bit. Torch-free.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from maml_rl.envs.batch_stepping import BatchStepper

from .batched_child_env import fast_path_support
from .buffers import BufferSpec, BufferViews
from .child_env import HORIZON, TERMINATED, TRUNCATED, ChildEnv, _bad_observation, time_limit


class StepperChildEnv(ChildEnv):
    """A ChildEnv whose slots step through their env's ``BatchStepper`` (same calls and buffers).

    :param nthread: the stepper's physics threads (the caller's included).
    """

    def __init__(self, env_fn: Callable[[], Any], num_envs: int, buffers: BufferViews, index: int,
                 spec: BufferSpec, nthread: int = 1):
        super().__init__(env_fn, num_envs, buffers, index, spec)
        first = self.envs[0]
        reason = fast_path_support(first)
        if reason is not None:
            raise TypeError(f"the fast path cannot step these envs: {reason}")
        self.time_limit = time_limit(first)
        self.stepper: BatchStepper = first.unwrapped.batch_stepper([env.unwrapped for env in self.envs], nthread)
        self.episode_start = np.zeros(0, dtype=np.int64)

    def reset_task(self, first_slot: int, tasks: Sequence[Any], slot_offset: int = 0) -> None:
        self.current_operation = "reset_task"
        self.stepper.release()
        super().reset_task(first_slot, tasks, slot_offset)
        self.stepper.assign(len(tasks))

    def reset(self, seeds: Sequence[int]) -> None:
        # Per env: the step its episode started at (for the env's own time limit), set by _reset_slot.
        self.episode_start = np.zeros(len(seeds), dtype=np.int64)
        super().reset(seeds)

    def _reset_slot(self, i: int, slot: int, seed: int, row: int) -> None:
        self.stepper.before_reset(i)
        super()._reset_slot(i, slot, seed, row)
        self.stepper.after_reset(i)
        self.episode_start[i] = row

    def step(self, t: int) -> None:
        b = self.buffers
        self.current_operation = f"step {t}"
        if not self.active:
            b.active[self.index] = 0
            return
        first = self.first_slot
        slots = np.asarray(self.active, dtype=np.intp)
        rows = slots - first
        observations, rewards, terminated, truncated, infos = self.stepper.step(rows, b.actions[t][slots],
                                                                                 self.info_keys)
        next_observations = b.observations[t + 1]
        if observations.shape != (len(rows), *next_observations.shape[1:]):
            raise ValueError(_bad_observation(self.envs[int(rows[0])], observations[0],
                                              next_observations.shape[1:], "step"))
        if observations.dtype not in self.fitting_dtypes:
            self._check_dtype(self.envs[int(rows[0])], observations[0], "step")
        b.rewards[t][slots] = rewards
        if self.info_keys:
            b.infos[t][slots] = infos
        if self.time_limit is not None:
            truncated = truncated | (t + 1 - self.episode_start[rows] >= self.time_limit)
        horizon = t + 1 == np.asarray(self.episode_end, dtype=np.int64)[rows]
        done = terminated | truncated | horizon
        running = slots[~done]
        with np.errstate(over="ignore"):  # as _store_cast: an overflow becomes inf, which the driver names
            next_observations[running] = observations[~done]
        if done.any():
            running = list(running)
            for k in np.flatnonzero(done):
                slot = int(slots[k])
                reason = TERMINATED if terminated[k] else TRUNCATED if truncated[k] else HORIZON
                self.current_slot = slot
                if self._episode_ended(slot, t, reason, observations[k]):
                    running.append(slot)
            self.current_slot = None
            running = sorted(running)
        self.active = [int(slot) for slot in running]
        b.active[self.index] = len(self.active)

    def close(self) -> None:
        if getattr(self, "stepper", None) is not None:
            self.stepper.close()
            self.stepper = None
        super().close()

