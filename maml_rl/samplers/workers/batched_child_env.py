"""The fast path of a ChildEnv: all its slots advance in one ``mujoco.batch`` call.

For envs that implement ``maml_rl.envs.vectorised.VectorisedMujocoEnv``, a
worker keeps one ``mujoco.batch.Batch`` with a simulation per slot. A step
maps the slots' actions to controls, makes one ``Batch.step`` call over the
slots still running (in C, without the GIL), and computes observations,
rewards and terminations in numpy straight into the shared trajectory
buffers. No Python runs per env per step.

Resets keep the env's own reset: each slot still has its gymnasium env,
used only for ``reset(seed)`` (the same reset noise, from the same
generator) and for its task; the state it resets to is copied into the
slot's simulation, followed by one ``forward``. The result equals the
per-env path bit for bit (``mujoco.batch`` is bit-identical to ``mj_step``
on one ``MjData`` per simulation; the vectorised functions to ``env.step``).

Like ``child_env``, this module imports no torch.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import gymnasium as gym
import mujoco
import numpy as np

from maml_rl.envs.batch_stepping import BatchSteppedEnv
from maml_rl.envs.vectorised import VectorisedMujocoEnv

from .buffers import BufferSpec, BufferViews
from .child_env import HORIZON, TERMINATED, TRUNCATED, ChildEnv, time_limit

try:
    from mujoco import batch as mujoco_batch
except ImportError:  # MuJoCo < 4.0
    mujoco_batch = None

# Wrappers whose step adds only what this stepper does itself: the time limit
# (truncation), call-order and first-call checks. gymnasium.make adds them.
TRANSPARENT_WRAPPERS = (
    gym.wrappers.TimeLimit,
    gym.wrappers.OrderEnforcing,
    gym.wrappers.PassiveEnvChecker,
)
# The state an env's reset sets (MujocoEnv.set_state): copied into the slot's simulation.
_RESET_STATE = ("qpos", "qvel")


def copy_reset_state(batch: Any, reset_state: dict, envs: Sequence[Any], ids: np.ndarray) -> None:
    """Copy the state each env's reset set (``envs[i]``'s ``MjData``) into simulation ``i`` of ``batch``, for
    ``i`` in ``ids``; ``reset_state``: the batch's bound ``qpos`` and ``qvel``."""
    batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE)
    for i in ids:
        data = envs[i].unwrapped.data
        for name, rows in reset_state.items():
            rows[i] = getattr(data, name)
    # Derived fields (the positions read before the first step) need a call.
    batch.forward(ids)


def batch_support(env: gym.Env) -> Optional[str]:
    """``None`` if the MuJoCo fast path can step copies of ``env``, else why not.

    Only envs that opt in (``VectorisedMujocoEnv``) qualify, unwrapped or in
    the wrappers ``gymnasium.make`` adds; another wrapper could change what a
    step returns, which the fast path would skip.
    """
    unwrapped = env.unwrapped
    if not isinstance(unwrapped, VectorisedMujocoEnv):
        return f"{type(unwrapped).__name__} does not implement VectorisedMujocoEnv"
    if mujoco_batch is None:
        return f"mujoco {mujoco.__version__} has no mujoco.batch (it needs MuJoCo >= 4.0)"
    reason = _wrapper_reason(env)
    if reason is not None:
        return reason
    if getattr(unwrapped, "render_mode", None) is not None:
        return f"the env renders (render_mode={unwrapped.render_mode!r})"
    if unwrapped.model.na != 0:
        return "the model has actuator activations, which the env's reset does not set"
    return None


def fast_path_support(env: gym.Env) -> Optional[str]:
    """``None`` if the sampler's fast path can step copies of ``env``: the MuJoCo fast path
    (:func:`batch_support`), or the env's own stepper (``BatchSteppedEnv``); else why not."""
    unwrapped = env.unwrapped
    if not isinstance(unwrapped, BatchSteppedEnv):
        return batch_support(env)
    reason = _wrapper_reason(env)
    return reason if reason is not None else unwrapped.batch_support()


def _wrapper_reason(env: gym.Env) -> Optional[str]:
    wrapper = env
    while isinstance(wrapper, gym.Wrapper):
        if not isinstance(wrapper, TRANSPARENT_WRAPPERS):
            return f"the env is wrapped in {type(wrapper).__name__}, whose step the fast path would skip"
        wrapper = wrapper.env
    return None


class BatchedChildEnv(ChildEnv):
    """A ChildEnv whose slots step through one ``mujoco.batch.Batch``.

    Same calls and buffers as :class:`ChildEnv`, so workers and the
    in-process mode use either.

    :param nthread: the ``Batch``'s threads (the caller's included).
    """

    def __init__(self, env_fn: Callable[[], Any], num_envs: int, buffers: BufferViews, index: int,
                 spec: BufferSpec, nthread: int = 1):
        if spec.info_keys:
            raise ValueError("the MuJoCo fast path computes no step info, so it cannot carry "
                             f"info_keys={spec.info_keys!r}")
        super().__init__(env_fn, num_envs, buffers, index, spec)
        reason = batch_support(self.envs[0])
        if reason is not None:
            raise TypeError(f"the MuJoCo fast path cannot step these envs: {reason}")
        self.vector: VectorisedMujocoEnv = self.envs[0].unwrapped
        self.frame_skip = int(self.vector.frame_skip)
        self.time_limit = time_limit(self.envs[0])
        self.batch = mujoco_batch.Batch(self.vector.model, max(1, num_envs), nthread=nthread)
        self.fields = {name: self.batch.bind(name) for name in self.vector.vector_fields}
        self.reset_state = {name: self.batch.bind(name) for name in _RESET_STATE}
        self.ctrl = self.batch.bind("ctrl")
        self.task_rows: dict = {}
        # The simulations (= slots - first_slot) still running, sorted int32.
        self.ids = np.zeros(0, dtype=np.int32)

    def reset_task(self, first_slot: int, tasks: Sequence[Any], slot_offset: int = 0) -> None:
        super().reset_task(first_slot, tasks, slot_offset)
        self.task_rows = self.vector.vector_tasks([env.unwrapped.get_task() for env in self.envs[: len(tasks)]])

    def reset(self, seeds: Sequence[int]) -> None:
        super().reset(seeds)  # each slot's env: its reset noise and first observation
        n = len(self.trial_seeds)
        ids = np.arange(n, dtype=np.int32)
        self.current_operation = "reset"
        self._copy_reset_state(ids)
        self.ids = ids
        # Per simulation: the step its episode started at (for the env's own time limit).
        self.episode_start = np.zeros(n, dtype=np.int64)
        self.episode_end_rows = np.asarray(self.episode_end, dtype=np.int64)

    def _copy_reset_state(self, ids: np.ndarray) -> None:
        copy_reset_state(self.batch, self.reset_state, self.envs, ids)

    def step(self, t: int) -> None:
        b = self.buffers
        ids = self.ids
        n = len(ids)
        self.current_operation = f"step {t}"
        if n == 0:
            b.active[self.index] = 0
            return
        first = self.first_slot
        # A contiguous run of simulations (always, until an episode ends early)
        # is read and written through slices: views, no copies.
        rows = slice(int(ids[0]), int(ids[0]) + n) if ids[-1] - ids[0] + 1 == n else ids
        slots = slice(first + rows.start, first + rows.stop) if isinstance(rows, slice) else first + ids
        vector, fields = self.vector, self.fields
        controls = vector.vector_controls(b.actions[t][slots])
        self.ctrl[rows] = controls
        before = vector.vector_before({name: field[rows] for name, field in fields.items()})
        try:
            # None (all) skips Batch's validation of the ids, ~30 us a call.
            self.batch.step(None if n == self.batch.nsim else ids, nstep=self.frame_skip)
        except mujoco_batch.SimulationError as error:
            self.current_slot = first + int(np.asarray(error.ids).flat[0])
            raise
        observations = b.observations[t + 1]
        out = observations[slots] if isinstance(slots, slice) else np.empty((n, *observations.shape[1:]), observations.dtype)
        rewards, terminated = vector.vector_outputs(
            {name: field[rows] for name, field in fields.items()},
            before,
            controls,
            {key: value[rows] for key, value in self.task_rows.items()},
            out,
        )
        if not isinstance(slots, slice):
            observations[slots] = out
        b.rewards[t][slots] = rewards
        if self.time_limit is not None:
            truncated = t + 1 - self.episode_start[ids] >= self.time_limit
        else:
            truncated = np.zeros(n, dtype=bool)
        done = terminated | truncated | (t + 1 == self.episode_end_rows[ids])
        if done.any():
            keep = np.ones(n, dtype=bool)
            restart = []
            for k in np.flatnonzero(done):
                i = int(ids[k])
                reason = TERMINATED if terminated[k] else TRUNCATED if truncated[k] else HORIZON
                self.current_slot = first + i
                if self._episode_ended(first + i, t, reason, observations[first + i]):
                    restart.append(i)
                else:
                    keep[k] = False
            self.current_slot = None
            if restart:
                restart = np.asarray(restart, dtype=np.int32)
                self._copy_reset_state(restart)
                self.episode_start[restart] = t + 1
                self.episode_end_rows[restart] = [self.episode_end[i] for i in restart]
            self.ids = ids[keep]
        b.active[self.index] = len(self.ids)

    def close(self) -> None:
        super().close()
        self.batch = None
