"""The rollout loops: the policy on every slot, a pool stepping them, until every episode ends.

The local backend runs every task of a call through :func:`run_rollout`; a
Ray actor runs a contiguous group of them. Both get the same numbers because
everything random is a function of (seed, call, slot) (``noise``) and a
task's actions come out of the same arithmetic whatever other tasks share
the policy call (``actions.ActionFunction``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..workers.protocol import EnvPool
from .actions import ActionFunction


def run_rollout(pool: EnvPool, act: ActionFunction, tasks: Sequence[Any], batch_size: int, seeds: Sequence[int],
                partial: bool, first_slot: int = 0) -> None:
    """Reset every slot of ``tasks`` (``batch_size`` slots each) with its seed(s) and
    step until every episode (every trial: ``seeds`` ``[slots, E]``) has ended;
    the trajectories are left in ``pool.views``. Messages number the slots
    from ``first_slot``.

    The action function gets, besides the observations and noise, each slot's
    time step and which slots step now (a recurrent policy advances only
    those slots' states)."""
    num_slots = len(tasks) * batch_size
    pool.reset_task([tasks[j // batch_size] for j in range(num_slots)], first_slot)
    pool.reset(seeds)
    if partial:
        _run_partial(pool, act, num_slots)
    else:
        _run_lockstep(pool, act, num_slots)


def _run_lockstep(pool: EnvPool, act: ActionFunction, num_slots: int) -> None:
    """Every step: the policy on all slots, then all workers step, then wait for all."""
    views = pool.views
    workers = [w for w, r in enumerate(pool.ranges) if len(r)]
    for t in range(act.noise.shape[0]):
        running = views.lengths[:num_slots] == 0
        actions = act(views.observations[t, :num_slots], act.noise[t], t, t, running)
        act.check_actions(actions, running, lambda row: t)
        views.actions[t, :num_slots] = actions
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
    times = np.zeros(num_slots, dtype=np.int64)  # time[w] of each slot's worker
    ready = [w for w, r in enumerate(pool.ranges) if len(r)]
    in_flight = 0
    while ready or in_flight:
        if ready:
            checked = np.zeros(num_slots, dtype=bool)
            for w in ready:
                r = pool.ranges[w]
                observations[r.start:r.stop] = views.observations[time[w], r.start:r.stop]
                noise[r.start:r.stop] = act.noise[time[w], r.start:r.stop]
                times[r.start:r.stop] = time[w]
                checked[r.start:r.stop] = True
            stepping = checked & (views.lengths[:num_slots] == 0)
            actions = act(observations, noise, max(time), times, stepping)
            act.check_actions(actions, stepping,
                              lambda row: time[next(w for w in ready if row in pool.ranges[w])])
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
