"""Pools of ChildEnv workers: processes over shared memory, or in-process.

Both pools implement ``env_pool.EnvPool``, the protocol used by
``MultiTaskSampler`` (which checks the order of the calls). A pool is open
until ``close()`` or a failure; a closed pool refuses every call with
``SamplerClosedError`` instead of hanging.

Worker processes and the main module. Under spawn and forkserver,
multiprocessing makes every child run the parent's main module again (as
``__mp_main__``), so a script that imports torch at the top gave each worker
torch too (~220 MB of memory). The workers need nothing from it: the env
factory travels by value with cloudpickle (functions and classes of
``__main__`` included). So the workers are started while ``__main__`` is
hidden from multiprocessing, as from an interactive session, and a worker
imports the main module only when its envs cannot be built without it (an
env registered with gymnasium in the main script, say).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.resource_tracker
import multiprocessing.spawn
import os
import signal
import sys
import threading
import types
import warnings
import weakref
from multiprocessing.connection import wait as wait_connections
from typing import Any, Callable, Dict, List, Optional, Sequence

import cloudpickle

from .child_env import CLOSE, FAILED, RESET, RESET_TASK, STEP, assign_slots, make_child_env, worker_main
from .env_pool import EnvPool
from .errors import WorkerDiedError, WorkerError
from .shared_memory import TrajectoryBuffers

# How often the main process, while waiting on workers, checks that none died.
LIVENESS_CHECK_INTERVAL = 0.2
# How long a worker gets to exit after CLOSE before it is terminated.
CLOSE_TIMEOUT = 2.0
# More workers than this many per usable CPU draws a warning.
WORKERS_PER_CPU_WARNING = 2
# Signals held back while the workers are shut down (see _deferred_signals).
_DEFERRED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class InProcessPool(EnvPool):
    """All slots stepped in the calling process by one ChildEnv (``num_workers=0``)."""

    num_workers = 1

    def __init__(self, env_fn: Callable[[], Any], num_slots: int, buffer_spec: dict,
                 batch_threads: Optional[int] = None):
        self._init_state()
        self.closed = True
        self.buffers = TrajectoryBuffers.allocate(num_slots, 1, ctx=None, **buffer_spec)
        self.views = self.buffers.views()
        self.capacity = num_slots
        self._child = make_child_env(env_fn, num_slots, self.views, 0, batch_threads)
        self.ranges = assign_slots(num_slots, 1)
        self._ready: List[int] = []
        self.closed = False

    def _assign(self, num_slots: int) -> None:
        self.ranges = assign_slots(num_slots, 1)

    def _reset_task(self, tasks: Sequence[Any]) -> None:
        self._run(lambda: self._child.reset_task(0, tasks, self.slot_offset))

    def _reset(self, seeds: Sequence[int]) -> None:
        self._run(lambda: self._child.reset(seeds))

    def _step(self, workers: Sequence[int], t: int) -> None:
        self._run(lambda: self._child.step(t))
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
            where = self._child.describe_failure()
            self.close()
            raise WorkerError(f"the environment failed {where}: {exc!r}") from exc

    def _close(self) -> None:
        if self._child is not None:
            child, self._child = self._child, None
            child.close()


class _Workers:
    """The OS resources of a process pool, kept apart from the pool object so
    that a finalizer can shut them down without keeping the pool alive."""

    def __init__(self, processes, connections, wakes, command):
        self.processes = processes
        self.connections = connections
        self.wakes = wakes
        self.command = command
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
        may_raise = interruptible and sys.exc_info()[1] is None
        with _deferred_signals() as received:
            self._end_processes()
        for signum, handler in received:
            try:
                handler(signum, None)
            except BaseException:
                if may_raise:
                    raise

    def _end_processes(self) -> None:
        for w, process in enumerate(self.processes):
            if process.is_alive():
                self.command[w] = CLOSE
                self.wakes[w].release()
        for process in self.processes:
            process.join(CLOSE_TIMEOUT if self.started else 0)
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


class ChildEnvPool(EnvPool):
    """``num_workers`` ChildEnv processes, each stepping a contiguous slot range.

    :param env_fn_bytes: the env factory, pickled with cloudpickle.
    :param num_workers: number of worker processes.
    :param num_slots: the most slots one call will use; each worker builds
        ``ceil(num_slots / num_workers)`` envs.
    :param buffer_spec: horizon, observation and action shapes and dtypes.
    :param start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``.
    :param batch_threads: each worker steps its envs through the MuJoCo fast
        path on this many threads; ``None``: one env at a time.
    """

    def __init__(self, env_fn_bytes: bytes, num_workers: int, num_slots: int, buffer_spec: dict, start_method: str,
                 batch_threads: Optional[int] = None):
        _warn_if_oversubscribed(num_workers)
        self._init_state()
        ctx = mp.get_context(start_method)
        self.start_method = start_method
        self.num_workers = num_workers
        main_module = None
        if start_method != "fork":
            main_module = _main_module_reference()
            _start_resource_tracker()
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
        try:
            for w in range(num_workers):
                parent_end, child_end = ctx.Pipe()
                process = ctx.Process(
                    target=worker_main,
                    args=(w, env_fn_bytes, envs_per_worker, self.buffers, wakes[w], self._ready, child_end,
                          main_module, start_method, batch_threads),
                    name=f"ChildEnv-{w}",
                    daemon=True,
                )
                processes.append(process)
                connections.append(parent_end)
                try:
                    with _main_module_hidden(start_method != "fork"):
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

    def _reset_task(self, tasks: Sequence[Any]) -> None:
        self._broadcast(RESET_TASK, [(r.start, list(tasks[r.start:r.stop]), self.slot_offset) for r in self.ranges])

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
            self._acquire_ready()
        self._collect(workers)

    def _wait_any(self) -> List[int]:
        self._acquire_ready()
        ready = [w for w in range(self.num_workers) if self.views.ready[w]]
        # A worker sets its flag, then releases the semaphore once: take exactly
        # one count per flag taken (the first is ours already). Draining the
        # semaphore instead raced with a worker between the two, leaving a
        # stale count that later woke the main process for a command not done.
        for _ in range(len(ready) - 1):
            self._acquire_ready()
        self._collect(ready)
        return ready

    def _close(self) -> None:
        if self._finalizer.detach() is not None:
            self._workers.shutdown(interruptible=True)

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
        return (
            f"ChildEnv worker {w} (pid {process.pid}) {_describe_exit(process.exitcode)} while starting "
            "(the worker's own traceback, if any, is printed above)."
        )


def _warn_if_oversubscribed(num_workers: int) -> None:
    cpus = usable_cpus()
    if num_workers > WORKERS_PER_CPU_WARNING * cpus:
        warnings.warn(
            f"{num_workers} env worker processes for {cpus} usable CPU{'s' if cpus != 1 else ''}: "
            "with more workers than CPUs they take turns and sampling slows down (64 workers on 2 CPUs "
            f"sampled 11x slower than 2). Use at most num_workers={cpus}.",
            RuntimeWarning,
            stacklevel=_caller_stacklevel(),
        )


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside
    this package (the user's call), wherever the pool was created from."""
    package = os.path.dirname(os.path.abspath(__file__))
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == package:
        level, frame = level + 1, frame.f_back
    return level


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, e.g. under taskset
    or a container's cpuset), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _main_module_reference() -> Optional[Dict[str, str]]:
    """How multiprocessing would have re-imported the main module in a child
    (by module name or by path), for a worker that turns out to need it."""
    data = multiprocessing.spawn.get_preparation_data("ChildEnv")
    reference = {key: data[key] for key in ("init_main_from_name", "init_main_from_path") if key in data}
    return reference or None


_main_module_lock = threading.Lock()


@contextlib.contextmanager
def _main_module_hidden(hide: bool = True):
    """Start a spawn or forkserver child without re-running ``__main__`` in it.

    multiprocessing tells a child to import the main module when
    ``sys.modules["__main__"]`` has a ``__spec__`` name or a ``__file__``
    (``multiprocessing.spawn.get_preparation_data``), and not for an
    interactive session, where it has neither. For the few milliseconds of
    ``Process.start()`` (which also starts the forkserver, if it is not
    running yet, so the server does not preload the main module either),
    ``__main__`` is a bare stand-in; the real one is put back at once.
    """
    if not hide:
        yield
        return
    with _main_module_lock:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker, if it is not running, with
    SIGHUP blocked.

    Under spawn and forkserver the semaphores have names (``/dev/shm/sem.mp-*``)
    until they are freed; the tracker unlinks them if this process dies first.
    It ignores SIGINT and SIGTERM, but a closed terminal sends SIGHUP to the
    whole process group and would kill it too. Its signal mask is inherited
    from the thread that starts it; this thread's own is restored at once.
    """
    tracker = multiprocessing.resource_tracker
    if not hasattr(signal, "pthread_sigmask") or not hasattr(signal, "SIGHUP"):
        tracker.ensure_running()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def _deferred_signals():
    """Hold back SIGINT, SIGTERM and SIGHUP where a Python handler would run.

    Yields the list of ``(signum, handler)`` received meanwhile, for the
    caller to handle once done. Only the main thread can set handlers; in
    another thread (a garbage collection there) the signals, which Python
    handles in the main thread, could not interrupt us anyway.
    """
    received: List[Any] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in _DEFERRED_SIGNALS:
            try:
                handler = signal.getsignal(signum)
                if callable(handler):
                    previous[signum] = handler
                    signal.signal(signum, lambda s, _, h=handler: received.append((s, h)))
            except (ValueError, OSError, TypeError):  # e.g. while the interpreter is shutting down
                pass
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            try:
                signal.signal(signum, handler)
            except (ValueError, OSError, TypeError):
                pass


def _describe_exit(exitcode: int) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"
