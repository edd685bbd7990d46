"""Pools of ChildEnv workers: processes over shared memory, or in-process.

Both pools expose the same calls, used by ``MultiTaskSampler``:
``assign(num_slots)``, ``reset_task(tasks)``, ``reset(seeds)``,
``step(workers, t)`` and ``wait(workers)`` / ``wait_any()``, ``close()``.
A pool is ``open`` until ``close()`` or a failure; a closed pool refuses
every call with ``SamplerClosedError`` instead of hanging.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import weakref
from multiprocessing.connection import wait as wait_connections
from typing import Any, Callable, List, Sequence

from .child_env import CLOSE, FAILED, RESET, RESET_TASK, STEP, ChildEnv, assign_slots, worker_main
from .errors import SamplerClosedError, WorkerDiedError, WorkerError
from .shared_memory import TrajectoryBuffers

# How often the main process, while waiting on workers, checks that none died.
LIVENESS_CHECK_INTERVAL = 0.2
# How long a worker gets to exit after CLOSE before it is terminated.
CLOSE_TIMEOUT = 2.0


class InProcessPool:
    """All slots stepped in the calling process by one ChildEnv (``num_workers=0``)."""

    num_workers = 1

    def __init__(self, env_fn: Callable[[], Any], num_slots: int, buffer_spec: dict):
        self.buffers = TrajectoryBuffers.allocate(num_slots, 1, ctx=None, **buffer_spec)
        self.views = self.buffers.views()
        self.capacity = num_slots
        self._child = ChildEnv(env_fn, num_slots, self.views, 0)
        self.ranges = assign_slots(num_slots, 1)
        self._ready: List[int] = []
        self.closed = False

    def assign(self, num_slots: int) -> None:
        self.ranges = assign_slots(num_slots, 1)

    def reset_task(self, tasks: Sequence[Any]) -> None:
        self._run(lambda: self._child.reset_task(0, tasks))

    def reset(self, seeds: Sequence[int]) -> None:
        self._run(lambda: self._child.reset(seeds))

    def step(self, workers: Sequence[int], t: int) -> None:
        self._run(lambda: self._child.step(t))
        self._ready = list(workers)

    def wait(self, workers: Sequence[int]) -> None:
        self._ready = []

    def wait_any(self) -> List[int]:
        ready, self._ready = self._ready, []
        return ready

    def _run(self, operation: Callable[[], None]) -> None:
        if self.closed:
            raise SamplerClosedError("the sampler is closed")
        try:
            operation()
        except Exception as exc:
            raise WorkerError(f"the environment failed {self._child.describe_failure()}: {exc!r}") from exc

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._child.close()


class _Workers:
    """The OS resources of a process pool, kept apart from the pool object so
    that a finalizer can shut them down without keeping the pool alive."""

    def __init__(self, processes, connections, wakes, command):
        self.processes = processes
        self.connections = connections
        self.wakes = wakes
        self.command = command

    def shutdown(self) -> None:
        for w, process in enumerate(self.processes):
            if process.is_alive():
                self.command[w] = CLOSE
                self.wakes[w].release()
        for process in self.processes:
            process.join(CLOSE_TIMEOUT)
            if process.is_alive():
                process.terminate()
                process.join(CLOSE_TIMEOUT)
            if process.is_alive():
                process.kill()
                process.join()
        for connection in self.connections:
            connection.close()
        for process in self.processes:
            process.close()
        self.processes, self.connections = [], []


class ChildEnvPool:
    """``num_workers`` ChildEnv processes, each stepping a contiguous slot range.

    :param env_fn_bytes: the env factory, pickled with cloudpickle.
    :param num_workers: number of worker processes.
    :param num_slots: the most slots one call will use; each worker builds
        ``ceil(num_slots / num_workers)`` envs.
    :param buffer_spec: horizon, observation and action shapes and dtypes.
    :param start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``.
    """

    def __init__(self, env_fn_bytes: bytes, num_workers: int, num_slots: int, buffer_spec: dict, start_method: str):
        ctx = mp.get_context(start_method)
        self.start_method = start_method
        self.num_workers = num_workers
        self.buffers = TrajectoryBuffers.allocate(num_slots, num_workers, ctx=ctx, **buffer_spec)
        self.views = self.buffers.views()
        self.ranges = assign_slots(num_slots, num_workers)
        self.capacity = num_slots
        envs_per_worker = max(len(r) for r in self.ranges)
        self._ready = ctx.Semaphore(0)
        wakes = [ctx.Semaphore(0) for _ in range(num_workers)]
        connections, processes = [], []
        self.closed = True
        self._workers = _Workers(processes, connections, wakes, self.views.command)
        self._finalizer = weakref.finalize(self, self._workers.shutdown)
        for w in range(num_workers):
            parent_end, child_end = ctx.Pipe()
            process = ctx.Process(
                target=worker_main,
                args=(w, env_fn_bytes, envs_per_worker, self.buffers, wakes[w], self._ready, child_end),
                name=f"ChildEnv-{w}",
                daemon=True,
            )
            processes.append(process)
            connections.append(parent_end)
            try:
                process.start()
            except BaseException:
                self._finalizer()
                raise
            finally:
                child_end.close()
        self.closed = False
        self._await_start_up()

    # -- commands -----------------------------------------------------------

    def assign(self, num_slots: int) -> None:
        """Split the next calls' ``num_slots`` slots over the workers."""
        if num_slots > self.capacity:
            raise ValueError(f"{num_slots} slots requested from a pool built for {self.capacity}")
        self.ranges = assign_slots(num_slots, self.num_workers)

    def reset_task(self, tasks: Sequence[Any]) -> None:
        """Send each worker the tasks of its slots (a ``reset_task`` command)."""
        self._broadcast(RESET_TASK, [(r.start, list(tasks[r.start:r.stop])) for r in self.ranges])

    def reset(self, seeds: Sequence[int]) -> None:
        """Reset every slot with its own seed."""
        self._broadcast(RESET, [list(seeds[r.start:r.stop]) for r in self.ranges])

    def step(self, workers: Sequence[int], t: int) -> None:
        """Ask ``workers`` to step their running slots with ``actions[t]``."""
        self._check_open()
        views, wakes = self.views, self._workers.wakes
        for w in workers:
            views.step_index[w] = t
            views.command[w] = STEP
            wakes[w].release()

    def wait(self, workers: Sequence[int]) -> None:
        """Block until every worker in ``workers`` has finished its command."""
        for _ in range(len(workers)):
            self._acquire_ready()
        self._collect(workers)

    def wait_any(self) -> List[int]:
        """Block until at least one worker is done; return all that are."""
        self._acquire_ready()
        while self._ready.acquire(block=False):
            pass
        ready = [w for w in range(self.num_workers) if self.views.ready[w]]
        self._collect(ready)
        return ready

    def close(self) -> None:
        """End every worker; idempotent."""
        self.closed = True
        self._finalizer()

    # -- internals ----------------------------------------------------------

    def _broadcast(self, command: int, payloads: List[Any]) -> None:
        self._check_open()
        workers = range(self.num_workers)
        for w in workers:
            self.views.command[w] = command
            self._workers.wakes[w].release()
            # Sent after the wake-up: the worker is then already reading, so
            # a payload larger than the pipe buffer cannot block us.
            self._workers.connections[w].send(payloads[w])
        self.wait(workers)

    def _check_open(self) -> None:
        if self.closed:
            raise SamplerClosedError(
                "the sampler's workers are closed (close() was called, or a worker failed); "
                "create a new sampler"
            )

    def _acquire_ready(self) -> None:
        while not self._ready.acquire(timeout=LIVENESS_CHECK_INTERVAL):
            self._check_alive()

    def _collect(self, workers) -> None:
        views = self.views
        for w in workers:
            views.ready[w] = 0
            if views.status[w] == FAILED:
                _, message = self._workers.connections[w].recv()
                self._fail(WorkerError(f"ChildEnv worker {w}: the environment raised {message}"))

    def _check_alive(self) -> None:
        for w, process in enumerate(self._workers.processes):
            if process.exitcode is not None:
                self._fail(WorkerDiedError(f"ChildEnv worker {w} (pid {process.pid}) {_describe_exit(process.exitcode)} during sampling"))

    def _fail(self, error: Exception) -> None:
        self.close()
        raise error

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
        message = f"ChildEnv worker {w} (pid {process.pid}) {_describe_exit(process.exitcode)} while starting."
        if self.start_method in ("spawn", "forkserver"):
            message += (
                f" Under the '{self.start_method}' start method each worker imports your main module "
                "again (as __mp_main__), so the code that creates the sampler must sit under "
                "`if __name__ == \"__main__\":`; the worker's own traceback is printed above."
            )
        return message


def _describe_exit(exitcode: int) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"
