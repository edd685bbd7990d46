"""The vector env's MuJoCo fast path: a worker's envs advance in one ``mujoco.batch`` call per step.

For envs that implement ``maml_rl.envs.vectorised.VectorisedMujocoEnv`` (the HalfCheetah and Ant
families), :class:`BatchedVectorChildEnv` steps a worker's envs as the sampler's fast path does
(``batched_child_env``): one ``Batch.step`` over every env stepped, then the observations, rewards,
terminations and step infos as array arithmetic, bit for bit those of ``env.step`` (the step loop, with its
autoreset modes, is ``fast_vector_child_env``'s). Everything else is
:class:`~.vector_child_env.VectorChildEnv`'s: each env's own ``reset`` (its noise, from its own
generator) whose state is copied into the env's simulation, its task, gymnasium's three autoreset modes
and the ``TimeLimit`` of ``gymnasium.make``, counted here. Before a ``call`` or ``set_attr`` each env's
own ``MjData`` is given its simulation's state, so methods that read it see the env as it is.

Like the other workers' modules, it imports no torch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple, Union

import mujoco
import numpy as np

from .batched_child_env import _RESET_STATE, batch_support, copy_reset_state, mujoco_batch
from .child_env import time_limit
from .fast_vector_child_env import FastVectorChildEnv, StepInfos
from .vector_child_env import InfoColumns, Infos, VectorSpec, VectorViews


class BatchedVectorChildEnv(FastVectorChildEnv):
    """A :class:`VectorChildEnv` whose envs step through one ``mujoco.batch.Batch``."""

    def __init__(self, env_fns: Sequence[Callable[[], Any]], num_envs: int, buffers: VectorViews, index: int,
                 spec: VectorSpec, nthread: int = 1):
        super().__init__(env_fns, num_envs, buffers, index, spec)
        first = self.envs[0]
        reason = batch_support(first)
        if reason is None:
            kinds = {(type(env.unwrapped), int(env.unwrapped.frame_skip), time_limit(env)) for env in self.envs}
            if len(kinds) > 1:
                reason = "its envs differ in class, frame skip or time limit (one batch steps one model)"
        self.batch = None
        if reason is not None:
            if spec.mujoco_batch:
                raise TypeError(f"mujoco_batch=True, but the MuJoCo fast path cannot step these envs: {reason}; "
                                "leave mujoco_batch at None to step them one at a time")
            return  # mujoco_batch=None: this worker steps its envs one at a time (VectorChildEnv's)
        self.vector = first.unwrapped
        self.frame_skip = int(self.vector.frame_skip)
        self.time_limit = time_limit(first)
        n = len(self.envs)
        self.batch = mujoco_batch.Batch(self.vector.model, n, nthread=nthread)
        self.fields = {name: self.batch.bind(name) for name in self.vector.vector_fields}
        self.reset_state = {name: self.batch.bind(name) for name in _RESET_STATE}
        self.ctrl = self.batch.bind("ctrl")
        self.elapsed = np.zeros(n, dtype=np.int64)  # steps of each env's episode (its TimeLimit)
        self._read_tasks()
        # Each env's own MjData holds its simulation's state (false once the batch has stepped it).
        self.synced = True

    def _read_tasks(self) -> None:
        self.task_rows = self.vector.vector_tasks([env.unwrapped.get_task() for env in self.envs])

    def reset_task(self, first_slot: int, tasks: Sequence[Any], slot_offset: int = 0) -> None:
        try:
            super().reset_task(first_slot, tasks, slot_offset)
        finally:  # the tasks of the envs before one that refused its task have changed
            if self.batch is not None:
                self._read_tasks()

    def reset(self, request: Tuple[Sequence[Any], Any, Optional[Sequence[bool]]]) -> Optional[Infos]:
        infos = super().reset(request)  # each env's own reset: its noise, observation and info
        if self.batch is None:
            return infos
        mask = request[2]
        ids = np.asarray([i for i in range(len(self.envs)) if mask is None or mask[i]], dtype=np.int32)
        self._copy_reset_state(ids)
        return infos

    def _copy_reset_state(self, ids: np.ndarray) -> None:
        """Copy the state each env's reset set into its simulation; its episode starts."""
        if len(ids) == 0:
            return
        copy_reset_state(self.batch, self.reset_state, self.envs, ids)
        self.elapsed[ids] = 0

    def step(self, t: int = 0) -> Union[Infos, InfoColumns, None]:
        """Step every env with its action from shared memory (one copy of the worker's rows)."""
        return self._step(self.actions[self.range.start:self.range.stop].copy())

    def _fast(self) -> bool:
        return self.batch is not None

    def _reset_env(self, i: int) -> Tuple[Any, dict]:
        observation, info = self.envs[i].reset()
        self._copy_reset_state(np.asarray([i], dtype=np.int32))
        return observation, info

    def _advance(self, ids: np.ndarray, actions: Sequence[Any]
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Optional[StepInfos]]:
        self.synced = False
        vector, n = self.vector, len(self.envs)
        every = len(ids) == n
        rows = slice(None) if every else ids
        # All rows: the bound fields themselves (fresh after every call), not views of them.
        fields = self.fields if every else {name: field[rows] for name, field in self.fields.items()}
        tasks = self.task_rows if every else {key: value[rows] for key, value in self.task_rows.items()}
        controls = vector.vector_controls(np.asarray(actions if every else [actions[i] for i in ids]))
        self.ctrl[rows] = controls
        before = vector.vector_before(fields)
        try:
            self.batch.step(None if len(ids) == n else ids, nstep=self.frame_skip)
        except mujoco_batch.SimulationError as error:
            self.current_env = self.range.start + int(np.asarray(error.ids).flat[0])
            raise
        observations = np.empty((len(ids), *self.space.shape), dtype=self.space.dtype)
        if not every:
            fields = {name: field[rows] for name, field in self.fields.items()}
        step_infos: dict = {}
        rewards, terminated = vector.vector_outputs(fields, before, controls, tasks, observations, step_infos)
        self.elapsed[ids] += 1
        truncated = self.elapsed[ids] >= self.time_limit if self.time_limit is not None \
            else np.zeros(len(ids), dtype=np.bool_)
        infos = None
        if step_infos:
            values = np.empty((len(ids), len(step_infos)), dtype=np.float64)
            for j, column in enumerate(step_infos.values()):
                values[:, j] = column  # what float(column[k]) gives, env by env
            infos = StepInfos(tuple(step_infos), values)
        return observations, rewards, terminated, truncated, infos

    def _sync(self) -> None:
        """Give each env's own ``MjData`` its simulation's state (for a call that reads the env)."""
        if self.synced or self.batch is None:
            return
        for i, env in enumerate(self.envs):
            data = env.unwrapped.data
            for name, rows in self.reset_state.items():
                getattr(data, name)[:] = rows[i]
            mujoco.mj_forward(env.unwrapped.model, data)
        self.synced = True

    def _before_call(self) -> None:
        self._sync()

    def close(self) -> None:
        super().close()
        self.batch = None
