"""Rollouts on this machine: an env pool of ChildEnv processes, or this process."""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import replace
from typing import Any, Callable, List, Optional

import numpy as np

from ..rollout.actions import ActionFunction, rollout_torch_settings
from ..rollout.loop import run_rollout
from ..rollout.noise import call_noise, fallback_seed, trial_seeds
from ..rollout.recurrent import RecurrentActionFunction
from ..rollout.request import RolloutRequest
from ..settings.execution import ExecutionSettings, Layout
from ..settings.workload import Workload
from ..workers.buffers import Trajectories
from ..workers.memory import check_memory
from ..workers.pools import ChildEnvPool, InProcessPool
from ..workers.protocol import EnvPool
from .base import RolloutBackend


class LocalBackend(RolloutBackend):
    """One env pool, kept between calls and rebuilt larger when a call needs more slots.

    :param workload: the env, the buffers' spec and the episodes per task.
    :param settings: start method and lockstep or partial.
    :param layout: worker processes and fast-path threads on this machine.
    :param env_fn: the env factory (``workload.env_fn_bytes`` unpickled).
    :param policy: evaluated in this process on every slot.
    """

    def __init__(self, workload: Workload, settings: ExecutionSettings, layout: Layout, env_fn: Callable[[], Any],
                 policy):
        self.workload = workload
        self.settings = settings
        self.layout = layout
        self.env_fn = env_fn
        self.policy = policy
        #: The env pool of the last rollout (``None`` before the first and after ``close``).
        self.pool: Optional[EnvPool] = None
        #: Bytes of recorded policy states the last memory check covered.
        self._checked_recorded = 0

    def run(self, request: RolloutRequest, device) -> Trajectories:
        spec = self.workload.spec
        slots, episodes = request.slots, request.episodes
        seeds = trial_seeds(request.seed, request.call, request.total_slots, episodes)[slots.start:slots.stop]
        rows = spec.horizon * episodes
        try:
            with rollout_torch_settings():
                # The pool first: it checks that the request fits in memory, noise included.
                pool = self._pool_for(request)
                noise = call_noise(request.seed, request.call, rows, request.total_slots, spec.action_shape,
                                   spec.discrete)
                # Partial mode has no fallback: sample() over all slots at once would draw
                # differently depending on which workers happen to be ready.
                fallback = None if self.settings.partial else fallback_seed(request.seed, request.call)
                args = (self.policy, request, device, noise[:, slots.start:slots.stop], fallback, spec,
                        self.workload.env_name)
                act = RecurrentActionFunction(*args, pool.views) if request.trial.recurrent else ActionFunction(*args)
                run_rollout(pool, act, request.tasks, request.batch_size, seeds, self.settings.partial, slots.start)
        except BaseException:
            # A pool interrupted mid-step cannot be trusted; the next call starts a new one.
            self.close()
            raise
        trajectories = self.pool.views.trajectories()
        trajectories.recorded = act.recorded()
        return trajectories

    def close(self) -> None:
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.close()

    def describe(self) -> str:
        return f"{self.layout.num_workers} worker process(es)" if self.layout.num_workers else "this process"

    @property
    def worker_pids(self) -> List[int]:
        return [] if self.pool is None else self.pool.worker_pids

    def _pool_for(self, request: RolloutRequest) -> EnvPool:
        workload, layout = self.workload, self.layout
        num_slots, episodes = request.num_slots, request.episodes
        spec = replace(workload.spec, episodes_per_trial=episodes)
        if self.pool is not None and (self.pool.capacity < num_slots or self.pool.rows < spec.rows):
            self.close()
        recorded = 0
        if request.trial.recurrent:
            recorded = RecurrentActionFunction.recorded_bytes(request, spec.rows, self.policy)
        trials = f"trials of {episodes} episodes" if episodes > 1 else "episodes"
        if self.pool is not None and recorded > self._checked_recorded:
            # A reused pool's buffers exist; what a recurrent policy records (e.g. a
            # shorter BPTT chunk, more chunk states) is allocated anew for this call.
            check_memory(env_fn=self.env_fn, env_fn_bytes=workload.env_fn_bytes,
                         ctx=mp.get_context(self.settings.start_method), num_slots=0, num_processes=0,
                         buffer_bytes=2 * recorded,
                         what=f"recording the policy's states for {num_slots // workload.batch_size} tasks x "
                              f"{workload.batch_size} {trials} of {workload.env_name} (chunk {request.trial.chunk})")
            self._checked_recorded = recorded
        if self.pool is None:
            processes = 0 if layout.num_workers == 0 else min(layout.num_workers, num_slots)
            noise = 4 * spec.rows * num_slots * int(np.prod(spec.action_shape))
            check_memory(
                env_fn=self.env_fn, env_fn_bytes=workload.env_fn_bytes,
                ctx=mp.get_context(self.settings.start_method), num_slots=num_slots, num_processes=processes,
                # The shared buffers, the action noise, what a recurrent policy records,
                # and the episodes' own copy of the trajectories.
                buffer_bytes=2 * spec.trajectory_bytes(num_slots) + noise + 2 * recorded,
                what=f"sampling {num_slots // workload.batch_size} tasks x {workload.batch_size} {trials} "
                     f"of {workload.env_name} at horizon {spec.horizon}",
            )
            self._checked_recorded = recorded
            if processes == 0:
                self.pool = InProcessPool(self.env_fn, num_slots, spec, layout.batch_threads)
            else:
                self.pool = ChildEnvPool(workload.env_fn_bytes, processes, num_slots, spec,
                                         self.settings.start_method, layout.batch_threads,
                                         step_timeout=self.settings.step_timeout)
        self.pool.assign(num_slots)
        return self.pool
