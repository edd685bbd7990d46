"""The env pools: ChildEnv worker processes over shared memory, or this process.

Both implement :class:`~maml_rl.samplers.workers.protocol.EnvPool`, which
checks the order of the calls. A pool is open until ``close()`` or a
failure; a closed pool refuses every call with ``SamplerClosedError``
instead of hanging. Torch-free.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
import weakref
from multiprocessing.connection import wait as wait_connections
from typing import Any, Callable, List, Optional, Sequence

import cloudpickle

from ..errors import WorkerDiedError, WorkerError
from .buffers import BufferSpec, TrajectoryBuffers
from .child_env import assign_slots
from .entry import CLOSE, FAILED, RESET, RESET_TASK, STEP, WorkerConfig, WorkerHandles, make_child_env, worker_main
from .processes import (deferred_signals, describe_exit, main_module_reference, start_resource_tracker,
                        starting_worker, warn_if_oversubscribed)
from .protocol import EnvPool
from .timeouts import ask_positions, step_timeout_error

# How often the main process, while waiting on workers, checks that none died.
LIVENESS_CHECK_INTERVAL = 0.2
# How long a worker gets to exit after CLOSE before it is terminated.
CLOSE_TIMEOUT = 2.0


class InProcessPool(EnvPool):
    """All slots stepped in the calling process by one ChildEnv (``num_workers=0``)."""

    num_workers = 1

    def __init__(self, env_fn: Callable[[], Any], num_slots: int, spec: BufferSpec,
                 batch_threads: Optional[int] = None):
        self._init_state()
        self.closed = True
        self.buffers = TrajectoryBuffers.allocate(spec, num_slots, 1, ctx=None)
        self.views = self.buffers.views()
        self.capacity = num_slots
        self.child = make_child_env(env_fn, num_slots, self.views, 0, spec, batch_threads)
        self.ranges = assign_slots(num_slots, 1)
        self._ready: List[int] = []
        self.closed = False

    def _assign(self, num_slots: int) -> None:
        self.ranges = assign_slots(num_slots, 1)

    @property
    def worker_pids(self) -> List[int]:
        return []

    def _reset_task(self, tasks: Sequence[Any], first_slot: int) -> None:
        self._run(lambda: self.child.reset_task(0, tasks, first_slot))

    def _reset(self, seeds: Sequence[int]) -> None:
        self._run(lambda: self.child.reset(seeds))

    def _step(self, workers: Sequence[int], t: int) -> None:
        self._run(lambda: self.child.step(t))
        self._ready = list(workers)

    def _wait(self, workers: Sequence[int]) -> None:
        self._ready = []

    def _wait_any(self) -> List[int]:
        ready, self._ready = self._ready, []
        return ready

    def _run(self, operation: Callable[[], None]) -> None:
        try:
            operation()
        except Exception as exc:
            where = self.child.describe_failure()
            self.close()
            raise WorkerError(f"the environment failed {where}: {exc!r}") from exc

    def _close(self) -> None:
        if self.child is not None:
            child, self.child = self.child, None
            child.close()


class _Workers:
    """The OS resources of a process pool, kept apart from the pool object so
    that a finalizer can shut them down without keeping the pool alive."""

    def __init__(self, processes, connections, wakes, command):
        self.processes = processes
        self.connections = connections
        self.wakes = wakes
        self.command = command
        # Only the process that started the workers ends them (not a child of it after os.fork()).
        self.owner_pid = os.getpid()
        _live_workers.add(self)
        # Until every worker has said hello, some may still be importing or
        # building envs, deaf to CLOSE: those are terminated at once.
        self.started = False

    def shutdown(self, interruptible: bool = False) -> None:
        """End every worker and release its pipe.

        A signal whose Python handler would raise (a second Ctrl-C, SIGTERM
        under train.py) waits until the workers are ended, so that it cannot
        abandon them half-way (or print "Exception ignored" from a garbage
        collection). It is then handled, and what its handler raises goes on
        only when ``interruptible`` (an explicit ``close()``) and no exception
        is already on its way: otherwise the program is already stopping, or
        raising is impossible (a finalizer).
        """
        if os.getpid() != self.owner_pid:
            return  # a forked child's copy (its close(), a garbage collection, its exit): the parent's workers
        may_raise = interruptible and sys.exc_info()[1] is None
        with deferred_signals() as received:
            self._end_processes()
        for signum, handler in received:
            try:
                handler(signum, None)
            except BaseException:
                if may_raise:
                    raise

    def _end_processes(self) -> None:
        """CLOSE, then SIGTERM, then SIGKILL, each stage with one deadline for
        all the workers: ending them takes at most about 2 * CLOSE_TIMEOUT
        however many there are (and whoever holds Ctrl-C waits that long)."""
        for w, process in enumerate(self.processes):
            if process.is_alive():
                self.command[w] = CLOSE
                self.wakes[w].release()
        stages = ((CLOSE_TIMEOUT if self.started else 0.0, None), (CLOSE_TIMEOUT, "terminate"), (None, "kill"))
        for timeout, end in stages:
            alive = [p for p in self.processes if p.is_alive()]
            if not alive:
                break
            for process in alive:
                if end is not None:
                    getattr(process, end)()
            deadline = None if timeout is None else time.monotonic() + timeout
            for process in alive:
                process.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for connection in self.connections:
            connection.close()
        for process in self.processes:
            process.close()
        # Emptied in place, not rebound: a frame kept alive by an exception's
        # traceback may hold these lists, and under spawn and forkserver each
        # semaphore is a named file (/dev/shm/sem.mp-*) until it is freed.
        self.processes.clear()
        self.connections.clear()
        self.wakes.clear()


_live_workers: "weakref.WeakSet[_Workers]" = weakref.WeakSet()


def _forget_workers_after_fork() -> None:
    """In a child of os.fork(): the workers are the parent's, but multiprocessing's exit handler
    would take them for the child's own (its registry of children is copied), terminate them
    (they are daemonic) and fail to join them. Forgetting them there leaves them to the parent."""
    children = getattr(mp.process, "_children", None)
    if children is not None:
        for workers in list(_live_workers):
            children.difference_update(workers.processes)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_after_fork)


class ChildEnvPool(EnvPool):
    """``num_workers`` ChildEnv processes, each stepping a contiguous slot range.

    :param env_fn_bytes: the env factory, pickled with cloudpickle.
    :param num_workers: number of worker processes.
    :param num_slots: the most slots one call will use; each worker builds
        ``ceil(num_slots / num_workers)`` envs.
    :param spec: the trajectory buffers' sizes and dtypes, and the info keys.
    :param start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``.
    :param batch_threads: each worker steps its envs through the MuJoCo fast
        path on this many threads; ``None``: one env at a time.
    :param step_timeout: seconds the pool waits without any worker finishing
        its command (a step, a reset) before it gives up on those still busy:
        each is asked where it is, then killed, the other workers are ended
        and the call raises :class:`StepTimeoutError`. ``None``: wait forever.
    """

    #: What the workers build and share: the sampler's ChildEnv over trajectory buffers, unless a
    #: subclass names another stepper (with ChildEnv's constructor) and its buffers (with ``allocate``).
    stepper: Optional[type] = None
    buffers_type: Any = TrajectoryBuffers

    def __init__(self, env_fn_bytes: bytes, num_workers: int, num_slots: int, spec: BufferSpec, start_method: str,
                 batch_threads: Optional[int] = None, step_timeout: Optional[float] = None):
        warn_if_oversubscribed(num_workers)
        self._init_state()
        self.step_timeout = step_timeout
        # How long one wait on the workers' reports lasts before the liveness check (and the timeout's).
        self._check_interval = LIVENESS_CHECK_INTERVAL if step_timeout is None else min(LIVENESS_CHECK_INTERVAL,
                                                                                         step_timeout)
        self._tasks: Sequence[Any] = ()
        self._first_slot = 0
        ctx = mp.get_context(start_method)
        self.start_method = start_method
        self.num_workers = num_workers
        main_module = None
        if start_method != "fork":
            main_module = main_module_reference()
            start_resource_tracker()
        self.buffers = self.buffers_type.allocate(spec, num_slots, num_workers, ctx=ctx)
        self.views = self.buffers.views()
        self.ranges = assign_slots(num_slots, num_workers)
        self.capacity = num_slots
        config = WorkerConfig(env_fn_bytes, max(len(r) for r in self.ranges), spec, batch_threads,
                              main_module, start_method, self.stepper)
        self._ready = ctx.Semaphore(0)
        wakes = [ctx.Semaphore(0) for _ in range(num_workers)]
        connections, processes = [], []
        self.closed = True
        self._workers = _Workers(processes, connections, wakes, self.views.command)
        self._finalizer = weakref.finalize(self, self._workers.shutdown)
        try:
            for w in range(num_workers):
                parent_end, child_end = ctx.Pipe()
                process = ctx.Process(
                    target=worker_main,
                    args=(w, config, WorkerHandles(self.buffers, wakes[w], self._ready, child_end)),
                    name=f"ChildEnv-{w}",
                    daemon=True,
                )
                processes.append(process)
                connections.append(parent_end)
                try:
                    with starting_worker(start_method):
                        process.start()
                finally:
                    child_end.close()
            self.closed = False
            self._await_start_up()
        except BaseException:
            # Interrupted or failed while starting: end the workers now
            # rather than in a finalizer at some later garbage collection.
            self.close()
            raise
        self._workers.started = True

    # -- commands -----------------------------------------------------------

    def _assign(self, num_slots: int) -> None:
        self.ranges = assign_slots(num_slots, self.num_workers)

    @property
    def worker_pids(self) -> List[int]:
        return [p.pid for p in self._workers.processes]

    def _reset_task(self, tasks: Sequence[Any], first_slot: int) -> None:
        self._tasks, self._first_slot = tasks, first_slot  # for a timeout's message
        self._broadcast(RESET_TASK, [(r.start, list(tasks[r.start:r.stop]), first_slot) for r in self.ranges])

    def _reset(self, seeds: Sequence[int]) -> None:
        self._broadcast(RESET, [list(seeds[r.start:r.stop]) for r in self.ranges])

    def _step(self, workers: Sequence[int], t: int) -> None:
        views, wakes = self.views, self._workers.wakes
        for w in workers:
            views.step_index[w] = t
            views.command[w] = STEP
            wakes[w].release()

    def _wait(self, workers: Sequence[int]) -> None:
        for _ in range(len(workers)):
            self._acquire_ready(workers)
        self._collect(workers)

    def _wait_any(self) -> List[int]:
        self._acquire_ready(self._pending)
        ready = [w for w in range(self.num_workers) if self.views.ready[w]]
        # A worker sets its flag, then releases the semaphore once: take exactly
        # one count per flag taken (the first is ours already). Draining the
        # semaphore instead raced with a worker between the two, leaving a
        # stale count that later woke the main process for a command not done.
        for _ in range(len(ready) - 1):
            self._acquire_ready(ready)
        self._collect(ready)
        return ready

    def _close(self) -> None:
        if self._finalizer.detach() is not None:
            self._workers.shutdown(interruptible=True)
        self._ready = None  # its name is released now, not when a traceback holding this pool goes

    # -- internals ----------------------------------------------------------

    def _broadcast(self, command: int, payloads: List[Any]) -> None:
        workers = range(self.num_workers)
        for w in workers:
            self.views.command[w] = command
            self._workers.wakes[w].release()
            # Sent after the wake-up: the worker is then already reading, so
            # a payload larger than the pipe buffer cannot block us. With
            # cloudpickle, as the env factory: the workers have no main
            # module, so a task of a class defined there travels by value.
            self._workers.connections[w].send_bytes(cloudpickle.dumps(payloads[w]))
        self._wait(workers)

    def _acquire_ready(self, waiting_for: Sequence[int]) -> None:
        """Take one worker's report off the ``ready`` semaphore, checking between waits that no
        worker died, and past ``step_timeout`` seconds without a report timing out the workers of
        ``waiting_for`` still busy. A report that comes in time costs one wait, as without a timeout."""
        if self._ready.acquire(timeout=self._check_interval):
            return
        # The first wait took at least the interval: the time counted from here is never more than waited.
        started = time.monotonic() - self._check_interval
        while True:
            self._check_alive()
            if self.step_timeout is not None and time.monotonic() - started >= self.step_timeout:
                self._time_out(waiting_for)
            if self._ready.acquire(timeout=self._check_interval):
                return

    def _collect(self, workers) -> None:
        views = self.views
        for w in workers:
            views.ready[w] = 0
            if views.status[w] == FAILED:
                _, message = self._workers.connections[w].recv()
                self._fail(WorkerError(f"ChildEnv worker {w}: the environment raised {message}"))

    def _check_alive(self) -> None:
        # No Process in this frame's locals: the traceback of the error keeps them.
        exits = [(process.pid, process.exitcode) for process in self._workers.processes]
        for w, (pid, exitcode) in enumerate(exits):
            if exitcode is not None:
                self._fail(WorkerDiedError(f"ChildEnv worker {w} (pid {pid}) {describe_exit(exitcode)} during sampling"))

    def _time_out(self, waiting_for: Sequence[int]) -> None:
        """Ask every worker of ``waiting_for`` still busy where it is, kill it, end the
        others and raise :class:`StepTimeoutError` naming it (the first, and any other)."""
        busy = sorted(w for w in waiting_for if not self.views.ready[w])
        pids = [self._workers.processes[w].pid for w in busy]
        positions = ask_positions(dict(zip(busy, pids)), self._workers.connections)
        for w in busy:
            self._kill(w)
        self._fail(step_timeout_error(busy, pids, positions, self.step_timeout, [self.ranges[w] for w in busy],
                                      [int(self.views.command[w]) for w in busy], self._tasks, self._first_slot))

    def _kill(self, w: int) -> None:
        process = self._workers.processes[w]
        process.kill()
        process.join(CLOSE_TIMEOUT)

    def _fail(self, error: Exception) -> None:
        self.close()
        try:
            raise error
        finally:
            del error  # else this frame and the error hold each other until a garbage collection

    def _await_start_up(self) -> None:
        """Wait for every worker's hello (or its error) from its pipe."""
        processes = self._workers.processes
        pending = dict(enumerate(self._workers.connections))
        while pending:
            handles = {}
            for w, connection in pending.items():
                handles[connection] = w
                handles[processes[w].sentinel] = w
            for handle in wait_connections(list(handles), timeout=LIVENESS_CHECK_INTERVAL):
                w = handles[handle]
                if w not in pending:
                    continue
                try:
                    # A dead worker's pipe reads as end-of-file after its last message.
                    kind, message = pending[w].recv() if pending[w].poll() else ("died", None)
                except EOFError:
                    kind = "died"
                if kind == "died":
                    self._fail(WorkerDiedError(self._start_up_death(w)))
                if kind == "error":
                    self._fail(WorkerError(f"ChildEnv worker {w} failed {message}"))
                del pending[w]

    def _start_up_death(self, w: int) -> str:
        process = self._workers.processes[w]
        return (
            f"ChildEnv worker {w} (pid {process.pid}) {describe_exit(process.exitcode)} while starting "
            "(the worker's own traceback, if any, is printed above)."
        )


