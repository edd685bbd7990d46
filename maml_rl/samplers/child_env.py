"""The ChildEnv worker: steps a contiguous range of env slots serially.

This module runs inside worker processes. It imports neither torch nor the
rest of the sampler, so a spawned worker starts quickly and a forked one
holds no torch state.

Protocol. The main process writes a command code into ``command[w]`` (plus,
for the rare commands, a pickled payload into the worker's pipe) and
releases the worker's ``wake`` semaphore. The worker carries the command
out, writes ``status[w]``, sets ``ready[w]`` and releases the ``ready``
semaphore shared by all workers. A step costs one wake-up each way and no
pickling: actions, observations and rewards live in shared buffers.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.spawn
import os
import pickle
import signal
import traceback
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

# Command codes written into ``command[w]``.
STEP = 1
RESET_TASK = 2
RESET = 3
CLOSE = 4

# Why an episode ended, written into ``end_reason[slot]``.
HORIZON = 0  # cut by the sampler at its horizon
TERMINATED = 1
TRUNCATED = 2

# Status codes written into ``status[w]``.
OK = 0
FAILED = 1

# How often an idle worker checks that the main process is still alive.
PARENT_CHECK_INTERVAL = 1.0


class ChildEnv:
    """The envs of one worker and the stepping of the slots assigned to them.

    Used inside a worker process, and directly by the in-process mode
    (``num_workers=0``), so both run exactly the same code.

    :param env_fn: callable returning a meta-learning gymnasium env.
    :param num_envs: how many envs to build (the most slots this worker is
        ever given in one call).
    :param buffers: numpy views of the trajectory buffers.
    :param index: the worker's index into the per-worker arrays.
    """

    def __init__(self, env_fn: Callable[[], Any], num_envs: int, buffers, index: int):
        self.buffers = buffers
        self.index = index
        self.envs: List[Any] = [env_fn() for _ in range(num_envs)]
        self.first_slot = 0
        self.tasks: List[Any] = []
        self.active: List[int] = []
        # Where the worker is, so an error can name the slot and task.
        self.current_slot: Optional[int] = None
        self.current_operation = "start-up"
        # Added to slot numbers in messages (a Ray actor's slots are part of a larger call).
        self.slot_offset = 0

    def reset_task(self, first_slot: int, tasks: Sequence[Any], slot_offset: int = 0) -> None:
        """Give this worker slots ``first_slot .. first_slot + len(tasks)``
        and set each slot's env to its task; messages name slot ``s`` as
        ``s + slot_offset``."""
        if len(tasks) > len(self.envs):
            raise ValueError(f"{len(tasks)} slots assigned to a worker with {len(self.envs)} envs")
        self.first_slot = first_slot
        self.slot_offset = slot_offset
        self.tasks = list(tasks)
        self.current_operation = "reset_task"
        for i, task in enumerate(self.tasks):
            self.current_slot = first_slot + i
            self.envs[i].unwrapped.reset_task(task)
        self.current_slot = None
        self.active = []
        self.buffers.active[self.index] = 0

    def reset(self, seeds: Sequence[int]) -> None:
        """Reset every assigned slot with its seed and write the first observations."""
        observations = self.buffers.observations[0]
        shape = observations.shape[1:]
        self.current_operation = "reset"
        for i, seed in enumerate(seeds):
            slot = self.first_slot + i
            self.current_slot = slot
            observation, _ = self.envs[i].reset(seed=int(seed))
            if getattr(observation, "shape", None) != shape:
                raise ValueError(_bad_observation(self.envs[i], observation, shape, "reset"))
            observations[slot] = observation
        self.current_slot = None
        self.active = list(range(self.first_slot, self.first_slot + len(seeds)))
        self.buffers.active[self.index] = len(self.active)

    def step(self, t: int) -> None:
        """Step every slot whose episode is still running, with ``actions[t]``."""
        b = self.buffers
        actions, rewards, next_observations = b.actions[t], b.rewards[t], b.observations[t + 1]
        infos, info_keys = b.infos[t], b.info_keys
        shape = next_observations.shape[1:]
        last_step = t + 1 == b.actions.shape[0]
        envs, first_slot = self.envs, self.first_slot
        self.current_operation = f"step {t}"
        running = []
        for slot in self.active:
            self.current_slot = slot
            env = envs[slot - first_slot]
            observation, reward, terminated, truncated, info = env.step(actions[slot])
            # numpy would silently broadcast a scalar or a wrong shape into the row.
            # (Attribute and isinstance checks: np.shape/np.ndim cost ~4 us a step.)
            if getattr(observation, "shape", None) != shape:
                raise ValueError(_bad_observation(env, observation, shape, "step"))
            if not isinstance(reward, _SCALARS) and np.ndim(reward) != 0:
                raise ValueError(f"{_env_name(env)}.step() returned a reward of shape {np.shape(reward)}; "
                                 "a reward must be a scalar")
            rewards[slot] = reward
            if info_keys:
                _write_info(env, info, info_keys, infos[slot])
            if terminated or truncated or last_step:
                b.lengths[slot] = t + 1
                b.end_reason[slot] = TERMINATED if terminated else TRUNCATED if truncated else HORIZON
            else:
                next_observations[slot] = observation
                running.append(slot)
        self.current_slot = None
        self.active = running
        b.active[self.index] = len(running)

    def describe_failure(self) -> str:
        """Where the last exception happened: operation, slot and task."""
        where = f"during {self.current_operation}"
        if self.current_slot is not None:
            i = self.current_slot - self.first_slot
            task = self.tasks[i] if 0 <= i < len(self.tasks) else None
            where += f" in env slot {self.current_slot + self.slot_offset} (task {task!r})"
        return where

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


# Rewards that need no shape check.
_SCALARS = (float, int, np.number)


def _write_info(env: Any, info: Any, keys: Sequence[str], row: np.ndarray) -> None:
    """``info[key]`` of each carried key into ``row``, as float64; a clear error for a missing or non-scalar value."""
    for i, key in enumerate(keys):
        try:
            row[i] = info[key]
        except (KeyError, TypeError, ValueError) as exc:
            present = sorted(info) if isinstance(info, dict) else type(info).__name__
            value = info.get(key, "<missing>") if isinstance(info, dict) else "<missing>"
            raise ValueError(
                f"{_env_name(env)}.step() returned info[{key!r}] = {value!r}, but the sampler carries "
                f"info_keys={tuple(keys)!r}, which need a number (or bool) under each key at every step "
                f"(the info has keys {present}); pass info_keys= with keys the env provides"
            ) from exc


def _env_name(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None and getattr(spec, "id", None) else type(getattr(env, "unwrapped", env)).__name__


def _bad_observation(env: Any, observation: Any, shape: tuple, call: str) -> str:
    return (
        f"{_env_name(env)}.{call}() returned an observation of shape {np.shape(observation)} "
        f"({type(observation).__name__}), but its observation_space needs a numpy array of shape {shape}"
    )


def make_child_env(env_fn: Callable[[], Any], num_envs: int, buffers, index: int,
                   batch_threads: Optional[int] = None) -> ChildEnv:
    """A ChildEnv, or with ``batch_threads`` the MuJoCo fast path's
    ``BatchedChildEnv`` on that many threads (imported only then: it needs
    MuJoCo, which other envs may not)."""
    if batch_threads is None:
        return ChildEnv(env_fn, num_envs, buffers, index)
    from .batched_child_env import BatchedChildEnv

    return BatchedChildEnv(env_fn, num_envs, buffers, index, nthread=batch_threads)


def worker_main(index: int, env_fn_bytes: bytes, num_envs: int, buffers, wake, ready, conn,
                main_module: Optional[dict] = None, start_method: Optional[str] = None,
                batch_threads: Optional[int] = None) -> None:
    """Entry point of a ChildEnv process: build the envs, then serve commands.

    The main process owns the lifetime: a worker exits on ``CLOSE``, and on
    its own when the main process has died.

    :param main_module: under spawn and forkserver, how to import the user's
        main module, which the worker skips (``vector_env`` explains why)
        unless building the envs fails without it.
    :param start_method: the start method this worker was created with.
    :param batch_threads: step the envs through the MuJoCo fast path, on
        this many threads; ``None`` steps them one at a time.
    """
    # Ctrl-C reaches the whole process group, and so does SIGHUP when the
    # terminal closes; the main process shuts the workers down (or they
    # notice it is gone), so they must not die half-way through a step.
    # SIGTERM keeps its default: it is how the main process ends a worker
    # that does not exit on CLOSE.
    for name in ("SIGINT", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    views = buffers.views()
    try:
        child = _build(env_fn_bytes, num_envs, views, index, main_module, batch_threads)
    except _StartUpError as error:
        conn.send(("error", str(error)))
        return
    conn.send(("ready", None))
    try:
        _serve(child, views, index, wake, ready, conn, _main_process_watch(start_method))
    finally:
        child.close()


class _StartUpError(Exception):
    """The envs could not be built; the message holds the traceback(s)."""


def _build(env_fn_bytes: bytes, num_envs: int, views, index: int, main_module: Optional[dict],
           batch_threads: Optional[int] = None) -> "ChildEnv":
    """The worker's ChildEnv, retried after importing the main module when
    the first attempt fails and the main module was skipped."""
    import cloudpickle

    try:
        return make_child_env(cloudpickle.loads(env_fn_bytes), num_envs, views, index, batch_threads)
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
        return make_child_env(cloudpickle.loads(env_fn_bytes), num_envs, views, index, batch_threads)
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
    """The main process died while this worker waited on it."""


def _receive(conn, main_alive: Callable[[], bool]) -> Any:
    """A command's payload. The main process sends it just after the wake-up,
    so it may die in between; under fork, sibling workers keep the pipe open
    and no end-of-file would ever come, so wait in slices and check."""
    while not conn.poll(PARENT_CHECK_INTERVAL):
        if not main_alive():
            raise _MainProcessGone
    try:
        payload = conn.recv_bytes()
    except (EOFError, OSError):
        raise _MainProcessGone from None
    # Pickled by cloudpickle, whose output plain pickle reads.
    return pickle.loads(payload)


def _serve(child: ChildEnv, views, index: int, wake, ready, conn, main_alive: Callable[[], bool]) -> None:
    while True:
        if not wake.acquire(timeout=PARENT_CHECK_INTERVAL):
            if not main_alive():
                return
            continue
        command = int(views.command[index])
        if command == CLOSE:
            return
        try:
            if command == STEP:
                child.step(int(views.step_index[index]))
            elif command == RESET_TASK:
                child.reset_task(*_receive(conn, main_alive))
            elif command == RESET:
                child.reset(_receive(conn, main_alive))
            else:
                raise ValueError(f"unknown command {command}")
        except _MainProcessGone:
            return
        except Exception:
            conn.send(("error", f"{child.describe_failure()}:\n{traceback.format_exc()}"))
            views.status[index] = FAILED
        else:
            views.status[index] = OK
        views.ready[index] = 1
        ready.release()


def assign_slots(num_slots: int, num_workers: int) -> List[range]:
    """Split ``num_slots`` into ``num_workers`` contiguous ranges of near-equal size."""
    bounds = np.linspace(0, num_slots, max(1, num_workers) + 1).round().astype(int)
    return [range(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]
