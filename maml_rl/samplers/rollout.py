"""One rollout of a group of whole tasks: the policy on every slot, a pool stepping them.

The local backend runs every task of a call through :func:`run_rollout`; a
Ray actor runs a contiguous group of them. Both get the same numbers because
everything random is a function of (seed, call, slot) -- :func:`slot_seeds`
and :func:`call_noise` -- and because a task's actions come out of the same
arithmetic whatever other tasks share the policy call (:class:`ActionFunction`).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch.distributions import Distribution

from maml_rl.policies.policy import expand_params

from .action_noise import actions_from_noise, draw_noise
from .env_pool import EnvPool

Params = Dict[str, torch.Tensor]


def slot_seeds(seed: int, call: int, num_slots: int) -> np.ndarray:
    """The reset seed of every slot of rollout ``call``."""
    return np.random.SeedSequence([seed, call]).generate_state(num_slots)


def call_noise(seed: int, call: int, horizon: int, num_slots: int, action_shape: Sequence[int], discrete: bool) -> torch.Tensor:
    """The action noise ``[T, S, ...]`` of every slot of rollout ``call``."""
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, call, 1]).generate_state(1)[0]))
    return draw_noise(horizon, num_slots, action_shape, discrete, generator)


def fallback_seed(seed: int, call: int) -> int:
    """Seed of ``sample()`` for distributions other than Normal and Categorical."""
    return int(np.random.SeedSequence([seed, call, 2]).generate_state(1)[0])


@contextlib.contextmanager
def rollout_torch_settings():
    """Torch settings for the per-step policy calls, restored afterwards.

    The workers keep the other cores busy, so torch's intra-op threads would
    wait on each other far longer than the small per-step matmuls take (a
    4x5x64 bmm: 7.8 ms with 2 threads under load, 9 us with one). And the
    distributions are only read for their parameters, so validating their
    arguments at every step (half the cost of a policy call at 40 slots)
    buys nothing.
    """
    threads, validate = torch.get_num_threads(), Distribution._validate_args
    torch.set_num_threads(1)
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        Distribution.set_default_validate_args(validate)


class ActionFunction:
    """The policy, evaluated on every slot under each task's parameters.

    A task's actions never depend on which other tasks share the call (so a
    group of tasks on a Ray actor gets exactly the numbers of the whole call
    here): a policy that takes stacked parameters is always evaluated with
    one ``[K, B]`` batched product, each task its own matrix product of the
    same shape, even when all tasks share parameters. (One ``[K * B]``
    product would not do: torch computes a single row, ``K * B == 1``, with
    other arithmetic than the same row among others.) A policy that cannot
    take stacked parameters runs once over all slots when they share
    parameters, else once per task; with ``split_invariant`` always per task.

    :param per_task: each task's parameters (``None``: the policy's own).
    :param noise: ``[T, S, ...]`` noise of these tasks' slots.
    :param first_task: index of the first of these tasks in the whole call
        (for the per-task fallback seeds).
    :param mode: ``"sample"``, or ``"mean"`` for the policy's most likely
        actions (evaluation; the noise is then unused).
    """

    def __init__(self, policy, per_task: List[Optional[Params]], batch_size: int, device, noise: torch.Tensor,
                 fallback: int, first_task: int = 0, split_invariant: bool = False, mode: str = "sample"):
        self.policy = policy
        self.mode = mode
        self.device = torch.device(device)
        self.noise = noise
        self.fallback_seed = fallback
        self.first_task = first_task
        self.num_tasks, self.batch_size = len(per_task), batch_size
        # One of three ways to run the policy: the same parameters for every
        # slot in one call, stacked per-task parameters in one batched call,
        # or a loop over tasks for policies that cannot batch them.
        self.shared: Optional[Params] = None
        self.batched: Optional[Params] = None
        self.per_task: Optional[List[Optional[Params]]] = None
        same = all(p is per_task[0] for p in per_task)
        if getattr(policy, "supports_batched_params", False):
            own = None
            if any(p is None for p in per_task):
                own = OrderedDict((name, p.detach()) for name, p in policy.named_parameters())
            if same:
                self.batched = expand_params(own if per_task[0] is None else per_task[0], self.num_tasks)
            else:
                filled = [own if p is None else p for p in per_task]
                self.batched = OrderedDict((name, torch.stack([p[name] for p in filled])) for name in filled[0])
        elif same and not split_invariant:
            self.shared = per_task[0]
        else:
            self.per_task = list(per_task)

    @torch.no_grad()
    def __call__(self, observations: np.ndarray, noise: torch.Tensor, t: int) -> np.ndarray:
        """Actions ``[S, *act]`` for ``observations`` ``[S, *obs]`` and ``noise`` ``[S, ...]``."""
        obs = torch.from_numpy(observations).to(self.device, torch.float32)
        seed = self.fallback_seed + t
        if self.batched is not None:
            obs = obs.view(self.num_tasks, self.batch_size, *obs.shape[1:])
            return actions_from_noise(self.policy(obs, params=self.batched), noise, seed, self.mode).numpy()
        if self.per_task is not None:
            B = self.batch_size
            parts = []
            for k, p in enumerate(self.per_task):
                distribution = self.policy(obs[k * B:(k + 1) * B]) if p is None else self.policy(obs[k * B:(k + 1) * B], params=p)
                parts.append(actions_from_noise(distribution, noise[k * B:(k + 1) * B], seed + self.first_task + k,
                                                self.mode))
            return torch.cat(parts).numpy()
        distribution = self.policy(obs) if self.shared is None else self.policy(obs, params=self.shared)
        return actions_from_noise(distribution, noise, seed, self.mode).numpy()


def run_rollout(pool: EnvPool, act: ActionFunction, tasks: Sequence[Any], batch_size: int, seeds: Sequence[int],
                partial: bool) -> None:
    """Reset every slot of ``tasks`` (``batch_size`` slots each) with its seed and
    step until every episode has ended; the trajectories are left in ``pool.views``."""
    num_slots = len(tasks) * batch_size
    pool.reset_task([tasks[j // batch_size] for j in range(num_slots)])
    pool.reset(seeds)
    if partial:
        _run_partial(pool, act, num_slots)
    else:
        _run_lockstep(pool, act, num_slots)


def _run_lockstep(pool: EnvPool, act: ActionFunction, num_slots: int) -> None:
    """Every step: the policy on all slots, then all workers step, then wait for all."""
    views = pool.views
    workers = [w for w, r in enumerate(pool.ranges) if len(r)]
    for t in range(views.actions.shape[0]):
        views.actions[t, :num_slots] = act(views.observations[t, :num_slots], act.noise[t], t)
        pool.step(workers, t)
        pool.wait(workers)
        workers = [w for w in workers if views.active[w]]
        if not workers:
            return


def _run_partial(pool: EnvPool, act: ActionFunction, num_slots: int) -> None:
    """Step each worker again as soon as it is ready, whatever the others do.

    Workers run at different time steps, so the policy sees a gathered copy
    of each worker's current observations (and noise). It is still evaluated
    on all slots at once: every action then comes out of exactly the same
    arithmetic as in the lockstep mode, bit for bit.
    """
    views = pool.views
    observations = np.zeros_like(views.observations[0, :num_slots])
    noise = act.noise[0].clone()
    time = [0] * len(pool.ranges)
    ready = [w for w, r in enumerate(pool.ranges) if len(r)]
    in_flight = 0
    while ready or in_flight:
        if ready:
            for w in ready:
                r = pool.ranges[w]
                observations[r.start:r.stop] = views.observations[time[w], r.start:r.stop]
                noise[r.start:r.stop] = act.noise[time[w], r.start:r.stop]
            actions = act(observations, noise, max(time))
            for w in ready:
                r = pool.ranges[w]
                views.actions[time[w], r.start:r.stop] = actions[r.start:r.stop]
                pool.step([w], time[w])
            in_flight += len(ready)
            ready = []
        for w in pool.wait_any():
            in_flight -= 1
            time[w] += 1
            if views.active[w]:
                ready.append(w)
