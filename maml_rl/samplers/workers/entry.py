"""The entry point of a ChildEnv worker process and its command protocol.

The main process writes a command code into ``command[w]`` (plus, for the
rare commands, a pickled payload into the worker's pipe) and releases the
worker's ``wake`` semaphore. The worker carries the command out, writes
``status[w]``, sets ``ready[w]`` and releases the ``ready`` semaphore shared
by all workers. A step costs one wake-up each way and no pickling: actions,
observations and rewards live in shared buffers. A stepper may answer a
command with a value (the vector env's infos and call results): the worker
then writes ``REPLIED`` and sends the value pickled, after the ready signal.

This module runs inside worker processes. It imports neither torch nor the
layers above, so a spawned worker starts quickly and a forked one holds no
torch state.
"""

from __future__ import annotations

import enum
import multiprocessing
import multiprocessing.spawn
import os
import pickle
import signal
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Optional

from maml_rl.envs.batch_stepping import BatchSteppedEnv

from .buffers import BufferSpec, BufferViews
from .child_env import ChildEnv
from .processes import ignore_worker_signals


class Command(enum.IntEnum):
    """Codes written into ``command[w]``."""

    STEP = 1
    RESET_TASK = 2
    RESET = 3
    CLOSE = 4
    REQUEST = 5  # a pickled request to the stepper, answered by a pickled reply (the vector env's rare calls)


class Status(enum.IntEnum):
    """Codes written into ``status[w]``."""

    OK = 0
    FAILED = 1
    REPLIED = 2  # OK, and a pickled reply follows in the worker's pipe


# Plain ints where they meet numpy. numpy, comparing a scalar with an IntEnum member, looks up
# ``__array_ufunc__`` on the enum class, which on Python 3.11 runs EnumType.__getattr__ (Python
# code), and swallows whatever the lookup raises: a Ctrl-C arriving there was lost, and the
# main process sampled on instead of stopping.
STEP, RESET_TASK, RESET, CLOSE, REQUEST = (int(code) for code in Command)
OK, FAILED, REPLIED = (int(code) for code in Status)

# How often an idle worker checks that the main process is still alive.
PARENT_CHECK_INTERVAL = 1.0
# Sent by the main process to a worker whose command ran past the sampler's step_timeout: the
# worker answers through its pipe with where it is, ("position", (operation, slot, task)), if its
# Python code still runs (an env stuck in C code cannot answer; the main process then names the
# worker's slots). A handler, not a per-step record: the steps cost nothing more.
POSITION_SIGNAL = getattr(signal, "SIGUSR1", None)
# How often a worker waiting for a command's payload checks for CLOSE (and the main process).
PAYLOAD_CHECK_INTERVAL = 0.05


def make_child_env(env_fn: Callable[[], Any], num_envs: int, buffers: BufferViews, index: int,
                   spec: BufferSpec, batch_threads: Optional[int] = None, stepper: Optional[type] = None) -> ChildEnv:
    """A ChildEnv, or with ``batch_threads`` the fast path on that many
    threads: ``StepperChildEnv`` for an env that makes its own stepper
    (``BatchSteppedEnv``), else the MuJoCo fast path's ``BatchedChildEnv``
    (imported only then: it needs ``mujoco.batch``), or a ``stepper`` class
    taking the same arguments (the vector env's ``VectorChildEnv``)."""
    if stepper is not None:
        return stepper(env_fn, num_envs, buffers, index, spec)
    if batch_threads is None:
        return ChildEnv(env_fn, num_envs, buffers, index, spec)
    # The first env says which fast path; it becomes the ChildEnv's first env (no extra env_fn call).
    first = env_fn()
    built = [first]

    def envs() -> Any:
        return built.pop() if built else env_fn()

    if isinstance(first.unwrapped, BatchSteppedEnv):
        from .stepper_child_env import StepperChildEnv as fast
    else:
        from .batched_child_env import BatchedChildEnv as fast
    child = fast(envs, num_envs, buffers, index, spec, nthread=batch_threads)
    for unused in built:  # num_envs == 0
        unused.close()
    return child


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process builds (sent once, at its start).

    :param env_fn_bytes: the env factory, pickled with cloudpickle.
    :param num_envs: envs to build (the most slots the worker is ever given).
    :param spec: the buffers' spec (info keys, the action space's ``start``).
    :param batch_threads: step the envs through the MuJoCo fast path on this
        many threads; ``None`` steps them one at a time.
    :param main_module: under spawn and forkserver, how to import the user's
        main module, which the worker skips (``pools`` explains why) unless
        building the envs fails without it.
    :param start_method: the start method the worker was created with.
    :param stepper: the class the worker builds instead of ChildEnv, with
        ChildEnv's constructor arguments; ``None``: ChildEnv (or the fast path's).
    """

    env_fn_bytes: bytes
    num_envs: int
    spec: BufferSpec
    batch_threads: Optional[int] = None
    main_module: Optional[dict] = None
    start_method: Optional[str] = None
    stepper: Optional[type] = None


class WorkerHandles:
    """What a worker shares with the main process: the trajectory buffers, its ``wake``
    semaphore, the shared ``ready`` semaphore and its end of the pipe.

    Under spawn and forkserver, multiprocessing's bootstrap unpickles a new process's
    arguments before any of its code runs. When the main process had meanwhile given up on
    the worker (interrupted, or killed, while starting its workers) and its semaphores' names
    were gone, that raised ``FileNotFoundError`` in ``SemLock._rebuild`` and printed a
    traceback. So the handles travel as one pickle inside the process's own (while the
    process is being started, where multiprocessing allows it), rebuilt by
    :func:`_rebuild_handles`, which turns a missing semaphore into ``None``.

    Rebuilding them is also where a forkserver worker first ignores Ctrl-C. Its server hands
    it the default SIGINT handler (a user's forkserver processes keep theirs), and until
    ``worker_main`` ran, a Ctrl-C to the process group raised KeyboardInterrupt inside
    multiprocessing's bootstrap, which printed a traceback ("Process ChildEnv-0:"). Before the
    rebuild one is raised inside the unpickling, where the forkserver's child exits without a word.
    """

    def __init__(self, buffers, wake, ready, conn):
        self.buffers, self.wake, self.ready, self.conn = buffers, wake, ready, conn

    def __reduce__(self):
        from multiprocessing.reduction import ForkingPickler

        return _rebuild_handles, (bytes(ForkingPickler.dumps((self.buffers, self.wake, self.ready, self.conn))),)


def _rebuild_handles(data: bytes) -> Optional[WorkerHandles]:
    ignore_worker_signals()  # only a new worker unpickles these (fork and spawn ones are born with them blocked)
    try:
        return WorkerHandles(*pickle.loads(data))
    except FileNotFoundError:  # a semaphore's name: the main process has released it
        return None


# The exit code of a worker that finds the main process gone (or its handles released) while it
# starts or reports: it exits without a traceback, the main process being no longer there to read one.
MAIN_PROCESS_GONE = 3


def worker_main(index: int, config: WorkerConfig, handles: Optional[WorkerHandles]) -> None:
    """Entry point of a ChildEnv process: build the envs, then serve commands.

    The main process owns the lifetime: a worker exits on ``CLOSE``, and on
    its own when the main process has died.
    """
    # Ctrl-C reaches the whole process group, and so does SIGHUP when the
    # terminal closes; the main process shuts the workers down (or they
    # notice it is gone), so they must not die half-way through a step.
    # SIGTERM keeps its default: it is how the main process ends a worker
    # that does not exit on CLOSE.
    ignore_worker_signals()
    if handles is None:
        raise SystemExit(MAIN_PROCESS_GONE)
    try:
        _run(index, config, handles.buffers, handles.wake, handles.ready, handles.conn)
    except (BrokenPipeError, ConnectionResetError):
        # Our end of a pipe the main process has closed: it died, or ended this worker's pool.
        raise SystemExit(MAIN_PROCESS_GONE) from None


def _run(index: int, config: WorkerConfig, buffers, wake, ready, conn) -> None:
    views = buffers.views()
    try:
        child = _build(config, views, index)
    except _StartUpError as error:
        conn.send(("error", str(error)))
        return
    conn.send(("ready", None))
    _answer_position_requests(child, conn)
    try:
        _serve(child, views, index, wake, ready, conn, _main_process_watch(config.start_method))
    finally:
        child.close()


def _answer_position_requests(child: ChildEnv, conn) -> None:
    """Answer :data:`POSITION_SIGNAL` with ``child.position()`` (the task as its repr if it cannot be pickled)."""
    if POSITION_SIGNAL is None:
        return

    def answer(signum, frame) -> None:
        # Never raises: it runs inside whatever the worker was doing.
        try:
            operation, slot, task = child.position()
        except Exception:
            return
        for position in ((operation, slot, task), (operation, slot, repr(task))):
            try:
                conn.send(("position", position))
                return
            except Exception:
                continue

    signal.signal(POSITION_SIGNAL, answer)


class _StartUpError(Exception):
    """The envs could not be built; the message holds the traceback(s)."""


def _build(config: WorkerConfig, views: BufferViews, index: int) -> ChildEnv:
    """The worker's ChildEnv, retried after importing the main module when
    the first attempt fails and the main module was skipped."""
    import cloudpickle

    def build() -> ChildEnv:
        return make_child_env(cloudpickle.loads(config.env_fn_bytes), config.num_envs, views, index,
                              config.spec, config.batch_threads, config.stepper)

    main_module = config.main_module
    try:
        return build()
    except BaseException:
        first = traceback.format_exc()
    if not main_module:
        raise _StartUpError(f"while building the envs:\n{first}")
    where = main_module.get("init_main_from_path") or main_module.get("init_main_from_name")
    try:
        # What multiprocessing would have done first: run the main module as __mp_main__.
        multiprocessing.spawn.prepare(dict(main_module))
    except BaseException:
        raise _StartUpError(
            f"while building the envs:\n{first}\n"
            f"Importing your main module {where} (as __mp_main__) in case the envs need it failed too:\n"
            f"{traceback.format_exc()}\n"
            "The code that creates the sampler must sit under `if __name__ == \"__main__\":`."
        ) from None
    try:
        return build()
    except BaseException:
        raise _StartUpError(
            f"while building the envs (the second time, after importing your main module {where}):\n"
            f"{traceback.format_exc()}"
        ) from None


def _main_process_watch(start_method: Optional[str] = None) -> Callable[[], bool]:
    """A check that the main process is still alive.

    Under fork the main process is our parent, so a change of parent tells
    (its sentinel pipe may be held open by sibling workers). Under forkserver
    our parent is the forkserver, which outlives the main process while any
    worker lives, and may also die before it (SIGHUP to the process group,
    which the main process may survive); there the parent sentinel, a pipe
    from the main process that reads end-of-file once it has died, tells.
    """
    parent = os.getppid()
    main = multiprocessing.parent_process()
    if start_method == "forkserver" and main is not None:
        return main.is_alive
    return lambda: os.getppid() == parent and (main is None or main.is_alive())


class _MainProcessGone(Exception):
    """The main process died, or asked this worker to close, while it waited on a payload."""


def _receive(conn, main_alive: Callable[[], bool], closing: Callable[[], bool]) -> Any:
    """A command's payload. The main process sends it just after the wake-up,
    so it may die in between, or be interrupted and ask this worker to CLOSE
    instead (which must not wait for a payload that never comes); under fork,
    sibling workers keep the pipe open and no end-of-file would ever come. So
    wait in slices and check both."""
    while not conn.poll(PAYLOAD_CHECK_INTERVAL):
        if closing() or not main_alive():
            raise _MainProcessGone
    try:
        payload = conn.recv_bytes()
    except (EOFError, OSError):
        raise _MainProcessGone from None
    # Pickled by cloudpickle, whose output plain pickle reads.
    return pickle.loads(payload)


def _serve(child: ChildEnv, views, index: int, wake, ready, conn, main_alive: Callable[[], bool]) -> None:
    def closing() -> bool:
        return views.command[index] == CLOSE

    while True:
        if not wake.acquire(timeout=PARENT_CHECK_INTERVAL):
            if not main_alive():
                return
            continue
        command = int(views.command[index])
        if command == CLOSE:
            return
        reply = None
        try:
            if command == STEP:
                reply = child.step(int(views.step_index[index]))
            elif command == RESET_TASK:
                child.reset_task(*_receive(conn, main_alive, closing))
            elif command == RESET:
                reply = child.reset(_receive(conn, main_alive, closing))
            elif command == REQUEST:
                reply = child.request(_receive(conn, main_alive, closing))
            else:
                raise ValueError(f"unknown command {command}")
            # Pickled here, so that a reply that cannot be pickled is this command's error.
            reply = None if reply is None else pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except _MainProcessGone:
            return
        except Exception:
            conn.send(("error", f"{child.describe_failure()}:\n{traceback.format_exc()}"))
            views.status[index] = FAILED
        else:
            views.status[index] = OK if reply is None else REPLIED
        views.ready[index] = 1
        ready.release()
        if reply is not None:
            # After the ready signal: the main process is then reading, so a reply larger than the pipe's
            # buffer cannot block this worker while the main process waits for it to be ready.
            conn.send_bytes(reply)
