"""The env pool protocol: what a backend needs from a pool of env workers.

A pool owns ``capacity`` env slots split over ``num_workers`` workers
(``ranges[w]``: worker ``w``'s contiguous slots) and the trajectory buffers
(``views``) those workers write. One rollout is::

    pool.assign(num_slots)        # the slots of this call, split over the workers
    pool.reset_task(tasks)        # a task per slot (first_slot=: how messages number them)
    pool.reset(seeds)             # a seed per slot; first observations in views
    pool.step(workers, t)         # workers step their running slots with actions[t]
    pool.wait(workers)            # ... or pool.wait_any() -> the workers done
    ...                           # until views.active[w] == 0 for every worker
    pool.close()

The order is checked here, once for every backend (as gymnasium's
``AsyncVectorEnv`` checks its ``AsyncState``): a call out of order raises
:class:`PoolStateError` at once, instead of waiting forever on a worker
that was never asked to do anything, or stepping one twice. A pool
implements the underscored methods; ``InProcessPool`` and ``ChildEnvPool``
in ``pools`` do, and so can a new one. Torch-free.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Dict, List, Sequence

from ..errors import PoolStateError, SamplerClosedError
from .buffers import BufferViews


class EnvPool(ABC):
    """Base of the env pools; checks the order of the calls.

    Subclasses set ``views``, ``ranges``, ``capacity`` and ``num_workers``
    and implement the underscored methods, which run only in a legal state.
    """

    views: BufferViews
    ranges: List[range]
    capacity: int
    num_workers: int
    closed: bool

    # -- state --------------------------------------------------------------
    # _slots: slots of the current assignment; _tasks_set / _reset_done: how
    # far the rollout got; _time[w]: the step worker w takes next;
    # _pending: workers with a step not yet collected by wait / wait_any.

    def _init_state(self) -> None:
        self._slots = 0
        self._tasks_set = False
        self._reset_done = False
        self._time: Dict[int, int] = {}
        self._pending: set = set()

    @property
    def rows(self) -> int:
        """Steps the buffers hold per slot (a trial's, when built for trials)."""
        return self.views.actions.shape[0]

    # -- the protocol -------------------------------------------------------

    def assign(self, num_slots: int) -> None:
        """Use ``num_slots`` slots in the next calls, split over the workers."""
        self._check_open("assign")
        self._check_idle("assign")
        if not 1 <= num_slots <= self.capacity:
            raise ValueError(f"{num_slots} slots requested from a pool built for 1 to {self.capacity}")
        self._assign(num_slots)
        self._slots = num_slots
        self._tasks_set = self._reset_done = False

    def reset_task(self, tasks: Sequence[Any], first_slot: int = 0) -> None:
        """Give every assigned slot its task; error messages name slot ``s``
        as ``first_slot + s`` (a Ray actor's pool holds part of a larger call)."""
        self._check_open("reset_task")
        self._check_idle("reset_task")
        self._check_count("reset_task", "tasks", len(tasks))
        self._reset_done = False
        self._reset_task(tasks, first_slot)
        self._tasks_set = True

    def reset(self, seeds: Sequence[int]) -> None:
        """Reset every assigned slot with its seed; first observations in ``views``."""
        self._check_open("reset")
        self._check_idle("reset")
        if not self._tasks_set:
            raise PoolStateError("reset() before reset_task(): give the slots their tasks first")
        self._check_count("reset", "seeds", len(seeds))
        self._reset(seeds)
        self._reset_done = True
        self._time = {w: 0 for w, r in enumerate(self.ranges) if len(r)}

    def step(self, workers: Sequence[int], t: int) -> None:
        """Ask ``workers`` to step their running slots with ``actions[t]``."""
        self._check_open("step")
        if not self._reset_done:
            raise PoolStateError("step() before reset(): reset the slots first")
        for w in workers:
            if w not in self._time:
                raise PoolStateError(f"step() on worker {w}, which has no slots in this call (workers: {sorted(self._time)})")
            if w in self._pending:
                raise PoolStateError(f"step() on worker {w} while its previous step is not collected: call wait() first")
            if t != self._time[w]:
                raise PoolStateError(f"step({t}) on worker {w}, which is at step {self._time[w]}")
        self._pending.update(workers)
        self._step(workers, t)
        for w in workers:
            self._time[w] += 1

    def wait(self, workers: Sequence[int]) -> None:
        """Block until every worker in ``workers`` has finished its step."""
        self._check_open("wait")
        idle = [w for w in workers if w not in self._pending]
        if idle:
            raise PoolStateError(f"wait() on worker(s) {idle} that were not asked to step: it would never return")
        self._wait(workers)
        self._pending.difference_update(workers)

    def wait_any(self) -> List[int]:
        """Block until at least one stepping worker is done; return all that are."""
        self._check_open("wait_any")
        if not self._pending:
            raise PoolStateError("wait_any() with no worker stepping: it would never return")
        ready = self._wait_any()
        self._pending.difference_update(ready)
        return ready

    def close(self) -> None:
        """End the workers; idempotent."""
        self.closed = True
        self._close()

    @property
    @abstractmethod
    def worker_pids(self) -> List[int]:
        """The process ids of the live worker processes (none in process)."""

    # -- what a pool implements ---------------------------------------------

    @abstractmethod
    def _assign(self, num_slots: int) -> None: ...

    @abstractmethod
    def _reset_task(self, tasks: Sequence[Any], first_slot: int) -> None: ...

    @abstractmethod
    def _reset(self, seeds: Sequence[int]) -> None: ...

    @abstractmethod
    def _step(self, workers: Sequence[int], t: int) -> None: ...

    @abstractmethod
    def _wait(self, workers: Sequence[int]) -> None: ...

    @abstractmethod
    def _wait_any(self) -> List[int]: ...

    @abstractmethod
    def _close(self) -> None: ...

    # -- checks -------------------------------------------------------------

    def _check_open(self, call: str) -> None:
        if self.closed:
            raise SamplerClosedError(
                f"{call}() on a closed pool (close() was called, or a worker failed); create a new sampler"
            )

    def _check_idle(self, call: str) -> None:
        if self._pending:
            raise PoolStateError(
                f"{call}() while worker(s) {sorted(self._pending)} are stepping: collect them with wait() first"
            )

    def _check_count(self, call: str, what: str, count: int) -> None:
        if count != self._slots:
            raise PoolStateError(f"{call}() got {count} {what} for the {self._slots} slots assigned")
