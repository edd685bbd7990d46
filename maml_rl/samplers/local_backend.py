"""Rollouts on this machine: an EnvPool of ChildEnv processes, or this process."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any, Callable, List, Optional, Sequence

import gymnasium as gym
import numpy as np

from .backend import Params, RolloutBackend, RolloutSpec, Trajectories
from .env_pool import EnvPool
from .memory import check_memory
from .rollout import ActionFunction, call_noise, fallback_seed, rollout_torch_settings, run_rollout, slot_seeds
from .shared_memory import TrajectoryBuffers
from .vector_env import ChildEnvPool, InProcessPool


class LocalBackend(RolloutBackend):
    """One pool, kept between calls and rebuilt larger when a call needs more slots.

    :param spec: the sampler's rollout settings (``num_workers`` resolved).
    :param env_fn: the env factory (``spec.env_fn_bytes`` unpickled).
    :param policy: evaluated in this process on every slot.
    :param action_space: to draw discrete or continuous noise.
    :param split_invariant: evaluate a policy that cannot take stacked
        parameters once per task (see ``rollout.ActionFunction``).
    :param first_task: numbering of tasks and slots in messages, the seeds
        and the noise: this backend's tasks are those from ``first_task`` of
        a larger call (a Ray actor's group).
    """

    def __init__(self, spec: RolloutSpec, env_fn: Callable[[], Any], policy, action_space: gym.Space,
                 split_invariant: bool = False):
        self.spec = spec
        self.env_fn = env_fn
        self.policy = policy
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.split_invariant = split_invariant
        self.pool: Optional[EnvPool] = None

    def run(self, tasks: Sequence[Any], per_task: List[Optional[Params]], seed: int, call: int, device,
            *, actions: str = "sample", first_task: int = 0, total_tasks: Optional[int] = None) -> Trajectories:
        """See :meth:`RolloutBackend.run`. With ``first_task``/``total_tasks``,
        ``tasks`` are tasks ``first_task ..`` of a call of ``total_tasks``,
        and get the seeds and noise of those slots of that call."""
        spec, B = self.spec, self.spec.batch_size
        total_slots = (len(tasks) if total_tasks is None else total_tasks) * B
        lo, hi = first_task * B, (first_task + len(tasks)) * B
        seeds = slot_seeds(seed, call, total_slots)[lo:hi]
        try:
            with rollout_torch_settings():
                # The pool first: it checks that the request fits in memory, noise included.
                pool = self._pool_for(hi - lo)
                noise = call_noise(seed, call, spec.horizon, total_slots, spec.buffer_spec["action_shape"], self.discrete)
                act = ActionFunction(self.policy, per_task, B, device, noise[:, lo:hi], fallback_seed(seed, call),
                                     first_task, self.split_invariant, actions)
                pool.slot_offset = lo
                run_rollout(pool, act, tasks, B, seeds, spec.partial)
        except BaseException:
            # A pool interrupted mid-step cannot be trusted; the next call starts a new one.
            self.close()
            raise
        return self.pool.views

    def close(self) -> None:
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.close()

    def _pool_for(self, num_slots: int) -> EnvPool:
        spec = self.spec
        if self.pool is not None and self.pool.capacity < num_slots:
            self.close()
        if self.pool is None:
            processes = 0 if spec.num_workers == 0 else min(spec.num_workers, num_slots)
            trajectories = TrajectoryBuffers.nbytes(num_slots, **spec.buffer_spec)
            noise = 4 * spec.horizon * num_slots * int(np.prod(spec.buffer_spec["action_shape"]))
            check_memory(
                env_fn=self.env_fn, env_fn_bytes=spec.env_fn_bytes,
                ctx=mp.get_context(spec.start_method), num_slots=num_slots, num_processes=processes,
                # The shared buffers, the action noise and the episodes' own copy of the trajectories.
                buffer_bytes=2 * trajectories + noise,
                what=f"sampling {num_slots // spec.batch_size} tasks x {spec.batch_size} episodes "
                     f"of {spec.env_name} at horizon {spec.horizon}",
            )
            if processes == 0:
                self.pool = InProcessPool(self.env_fn, num_slots, spec.buffer_spec, spec.batch_threads)
            else:
                self.pool = ChildEnvPool(spec.env_fn_bytes, processes, num_slots, spec.buffer_spec,
                                         spec.start_method, spec.batch_threads)
        self.pool.assign(num_slots)
        return self.pool
