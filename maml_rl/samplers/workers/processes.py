"""Starting and ending worker processes safely: CPUs, the main module, signals.

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
import gc
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import multiprocessing.spawn
import os
import signal
import sys
import threading
import types
import warnings
from typing import Any, Dict, List, Optional

# More workers than this many per usable CPU draws a warning.
WORKERS_PER_CPU_WARNING = 2
# Signals held back while the workers are shut down (see deferred_signals).
_DEFERRED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
# Signals a worker ignores (Ctrl-C and a closed terminal reach the whole process group; the main
# process ends the workers), and which it is born with blocked (see worker_start_signals_blocked).
WORKER_IGNORED_SIGNALS = frozenset(getattr(signal, name) for name in ("SIGINT", "SIGHUP") if hasattr(signal, name))


def warn_if_oversubscribed(num_workers: int) -> None:
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
    # Any frame of maml_rl.samplers (this file is two folders down in it).
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        level, frame = level + 1, frame.f_back
    return level


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, e.g. under taskset
    or a container's cpuset), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def main_module_reference() -> Optional[Dict[str, str]]:
    """How multiprocessing would have re-imported the main module in a child
    (by module name or by path), for a worker that turns out to need it."""
    data = multiprocessing.spawn.get_preparation_data("ChildEnv")
    reference = {key: data[key] for key in ("init_main_from_name", "init_main_from_path") if key in data}
    return reference or None


_main_module_lock = threading.Lock()


@contextlib.contextmanager
def main_module_hidden(hide: bool = True):
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


#: What the forkserver preloads for the workers (see ``forkserver_preload``'s docstring).
WORKER_MODULES = ("maml_rl.samplers.workers.forkserver_preload",)


def preload_worker_modules() -> None:
    """Have multiprocessing's forkserver import the workers' modules once, when it starts, so that each worker
    it forks inherits them instead of importing them again (about 0.4 CPU-s a worker on a 2-core machine).

    Added to the preload list already set (by the user's own ``set_forkserver_preload`` too), never removed from
    it. A forkserver already running keeps what it loaded: this only speeds up workers, it changes nothing they
    do."""
    server = multiprocessing.forkserver._forkserver
    current = list(getattr(server, "_preload_modules", None) or ["__main__"])
    if not all(name in current for name in WORKER_MODULES):
        multiprocessing.forkserver.set_forkserver_preload(current + [n for n in WORKER_MODULES if n not in current])


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker, if it is not running, with
    SIGHUP, SIGINT and SIGTERM blocked.

    Under spawn and forkserver the semaphores have names (``/dev/shm/sem.mp-*``)
    until they are freed; the tracker unlinks them if this process dies first.
    It ignores SIGINT and SIGTERM, but only once its interpreter has started: a
    Ctrl-C to the process group before then printed "Fatal Python error:
    init_import_site" and a KeyboardInterrupt traceback from it. A closed terminal
    sends SIGHUP to the whole process group and would kill it too. Its signal mask
    is inherited from the thread that starts it (it never changes it); this
    thread's own is restored at once.
    """
    with signals_blocked({getattr(signal, name, None) for name in ("SIGHUP", "SIGINT", "SIGTERM")} - {None}):
        multiprocessing.resource_tracker.ensure_running()


def start_forkserver() -> None:
    """Start multiprocessing's forkserver, if it is not running, with SIGINT blocked.

    The server ignores SIGINT, but only once its interpreter has started and imported its preload list: a Ctrl-C
    to the process group before then printed "Fatal Python error: init_import_site" and a KeyboardInterrupt
    traceback from it. It inherits the mask of the thread that starts it (this thread's own is restored at once);
    the preloaded ``forkserver_preload`` ignores SIGINT and unblocks it, dropping one that came meanwhile, so that
    the server and the processes it forks keep the signal handling they had before (Ctrl-C reaches a user's
    forkserver processes as ever).
    """
    preloaded = WORKER_MODULES[0] in (getattr(multiprocessing.forkserver._forkserver, "_preload_modules", None) or ())
    with signals_blocked({signal.SIGINT} if preloaded else set()):  # only the preload module unblocks it
        multiprocessing.forkserver.ensure_running()


@contextlib.contextmanager
def signals_blocked(signals):
    """Block ``signals`` in this thread for the ``with`` body (a process started meanwhile inherits the mask)."""
    if not signals or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def starting_worker(start_method: str):
    """Around ``Process.start()`` of a worker: the forkserver's preload, the main module hidden (not under fork),
    the signals blocked and the inherited garbage frozen (each function's docstring says why)."""
    if start_method == "forkserver":
        preload_worker_modules()
        start_forkserver()
    with main_module_hidden(start_method != "fork"), worker_start_signals_blocked(start_method), \
            inherited_garbage_frozen(start_method):
        yield


@contextlib.contextmanager
def inherited_garbage_frozen(start_method: str):
    """Fork a worker with the garbage collector's objects frozen (``gc.freeze``), so that the worker never
    collects what it inherited.

    Cyclic garbage of this process not yet collected when it forks would otherwise be collected in the worker,
    running its destructors there: a MuJoCo thread pool's (from ``mujoco.batch``, say) then waited forever in
    ``pthread_cond_destroy`` for pool threads that exist only in this process, and the worker hung in the middle
    of a step. Here the objects are unfrozen at once, to be collected as before.
    """
    if start_method != "fork":
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def worker_start_signals_blocked(start_method: str):
    """Create a worker process with :data:`WORKER_IGNORED_SIGNALS` blocked in this thread, so that
    it is born with them blocked until ``entry.worker_main`` ignores them: a Ctrl-C while it
    started (importing, unpickling its arguments) printed a KeyboardInterrupt traceback from it.
    A signal for this process meanwhile waits, and is handled as soon as the worker exists.

    Under fork and spawn the new process inherits this thread's mask. Not under forkserver:
    its children inherit the server's mask, and the server, shared with every forkserver
    process of the program, must not be started with signals blocked.
    """
    with signals_blocked(set() if start_method == "forkserver" else set(WORKER_IGNORED_SIGNALS)):
        yield


def ignore_worker_signals() -> None:
    """In a worker: ignore :data:`WORKER_IGNORED_SIGNALS`, then unblock them (any that came while
    they were blocked is dropped)."""
    for signum in WORKER_IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, WORKER_IGNORED_SIGNALS)


@contextlib.contextmanager
def deferred_signals():
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


def describe_exit(exitcode: int) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"
