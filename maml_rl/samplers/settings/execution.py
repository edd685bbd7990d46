"""How a sampler runs, decided once: workers, start method, lockstep or partial,
the MuJoCo fast path, local or Ray.

:func:`resolve_settings` checks the sampler's arguments before anything is
built and :meth:`ExecutionSettings.for_env` decides the fast path from the
env, into one frozen :class:`ExecutionSettings`; :meth:`ExecutionSettings.layout`
turns it into the worker processes and fast-path threads of one machine's
share, the same rule for this process and for a Ray actor on its own CPUs.
"""

from __future__ import annotations

import logging
import math
import multiprocessing as mp
from dataclasses import dataclass, replace
from typing import Optional

import gymnasium as gym

from maml_rl.envs.batch_stepping import BatchSteppedEnv
from maml_rl.envs.vectorised import VectorisedMujocoEnv

from ..workers.processes import usable_cpus

logger = logging.getLogger(__name__)

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class RayOptions:
    """Where and how many Ray sampling actors (see ``backends.ray``)."""

    address: Optional[str] = None
    actors: Optional[int] = None
    cpus_per_actor: Optional[int] = None


@dataclass(frozen=True)
class Layout:
    """One machine's share: ``num_workers`` ChildEnv processes (``0``: this
    process), each stepping its envs through the MuJoCo fast path on
    ``batch_threads`` threads, or one env at a time when ``None``."""

    num_workers: int
    batch_threads: Optional[int]


@dataclass(frozen=True)
class ExecutionSettings:
    """How rollouts run. ``num_workers`` and ``batch_threads`` are as asked
    (``None``: decided by :meth:`layout` for the CPUs at hand); ``fast_path``
    is as asked (``None``: where possible) until :meth:`for_env` decides it."""

    backend: str
    start_method: str
    partial: bool
    fast_path: Optional[bool]
    num_workers: Optional[int] = None
    batch_threads: Optional[int] = None
    ray: Optional[RayOptions] = None
    #: Seconds a worker process may take over one command (``None``: forever; ``workers.pools.ChildEnvPool``).
    step_timeout: Optional[float] = None
    #: Whether the fast path runs best in this process (``BatchSteppedEnv.batch_in_process``; MuJoCo: yes).
    fast_in_process: bool = True

    def for_env(self, env: gym.Env, env_name: str, info_keys) -> "ExecutionSettings":
        """These settings with the fast path decided for ``env`` (``ValueError``
        if it was required and cannot be used)."""
        fast_path = _fast_path(env, env_name, self.fast_path, info_keys)
        unwrapped = env.unwrapped
        in_process = not isinstance(unwrapped, BatchSteppedEnv) or unwrapped.batch_in_process()
        return replace(self, fast_path=fast_path, fast_in_process=in_process)

    def layout(self, cpus: int) -> Layout:
        """Workers and fast-path threads on ``cpus`` CPUs.

        By default the fast path runs its ``Batch`` threads in this process
        (measured faster than as many worker processes, at 40 and at 800
        slots: ``benchmarks/sampler_throughput.py``), unless the env's own
        stepper says it runs best in worker processes (Meta-World's mixes of
        classes), and so does everything on one CPU (a worker process would
        add round trips and no CPU); otherwise one worker process per CPU.
        """
        num_workers = self.num_workers
        if num_workers is None:
            num_workers = 0 if (self.fast_path and self.fast_in_process) or cpus == 1 else cpus
        if not self.fast_path:
            return Layout(num_workers, None)
        threads = self.batch_threads
        if threads is None:
            threads = cpus if num_workers == 0 else 1
        return Layout(num_workers, threads)


def resolve_settings(*, num_workers: Optional[int] = None,
                     start_method: Optional[str] = None, partial: bool = False, mujoco_batch: Optional[bool] = None,
                     batch_threads: Optional[int] = None, backend: str = "local", ray: Optional[RayOptions] = None,
                     step_timeout: Optional[float] = None) -> ExecutionSettings:
    """Check the sampler's execution arguments (the fast path is decided by ``for_env``)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    ray = ray or RayOptions()
    if backend != "ray" and ray != RayOptions():
        raise ValueError("ray_address, ray_actors and ray_cpus_per_actor apply to backend='ray' only")
    for name, value in (("ray_actors", ray.actors), ("ray_cpus_per_actor", ray.cpus_per_actor)):
        if value is not None and not _positive_int(value):
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if num_workers is not None and (isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0):
        raise ValueError(f"num_workers must be an int >= 0 (0 steps the envs in this process), got {num_workers!r}")
    if batch_threads is not None and not _positive_int(batch_threads):
        raise ValueError(f"batch_threads must be a positive int, got {batch_threads!r}")
    step_timeout = checked_step_timeout(step_timeout)
    if mujoco_batch not in (None, True, False):
        raise ValueError(f"mujoco_batch must be None (where possible), True or False, got {mujoco_batch!r}")
    return ExecutionSettings(
        backend=backend,
        start_method=_start_method(start_method),
        partial=bool(partial),
        fast_path=mujoco_batch,
        num_workers=num_workers,
        batch_threads=batch_threads,
        ray=ray if backend == "ray" else None,
        step_timeout=step_timeout,
    )


def checked_step_timeout(step_timeout) -> Optional[float]:
    """``step_timeout`` as seconds (``None``: wait forever); ``ValueError`` unless a positive finite number."""
    if step_timeout is None:
        return None
    if isinstance(step_timeout, bool) or not isinstance(step_timeout, (int, float)) \
            or not math.isfinite(step_timeout) or step_timeout <= 0:
        raise ValueError(f"step_timeout must be a positive number of seconds (or None to wait forever), "
                         f"got {step_timeout!r}")
    return float(step_timeout)


def local_layout(settings: ExecutionSettings) -> Layout:
    """The layout on this machine's usable CPUs."""
    return settings.layout(usable_cpus())


def _positive_int(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= 1


def _start_method(start_method: Optional[str]) -> str:
    available = mp.get_all_start_methods()
    if start_method is None:
        return "forkserver" if "forkserver" in available else "spawn"
    if start_method not in available:
        raise ValueError(f"start_method {start_method!r} is not available here; choose one of {available}")
    return start_method


def _fast_path(env: gym.Env, env_name: str, requested: Optional[bool], info_keys) -> bool:
    """Whether the workers step ``env`` through the fast path (``mujoco.batch``, or the env's own stepper)."""
    if requested is False:
        return False
    if info_keys and isinstance(env.unwrapped, VectorisedMujocoEnv):
        if requested:
            raise ValueError(f"mujoco_batch=True, but info_keys={tuple(info_keys)!r} are asked for: the MuJoCo fast "
                             "path computes no step info; pass info_keys=() or mujoco_batch=None")
        return False
    if not isinstance(env.unwrapped, (VectorisedMujocoEnv, BatchSteppedEnv)):
        if requested:
            raise ValueError(
                f"mujoco_batch=True, but {env_name} implements neither maml_rl.envs.vectorised.VectorisedMujocoEnv "
                "nor maml_rl.envs.batch_stepping.BatchSteppedEnv; leave mujoco_batch at None to step it one env "
                "at a time"
            )
        return False
    from ..workers.batched_child_env import fast_path_support

    reason = fast_path_support(env)
    if reason is None:
        return True
    own = isinstance(env.unwrapped, BatchSteppedEnv)
    path = "the fast path" if own else "the MuJoCo fast path"
    if requested:
        raise ValueError(f"mujoco_batch=True, but {path} cannot step {env_name}: {reason}")
    # An env with its own stepper says why not where that is a choice (Meta-World's fast=False), so not a warning.
    (logger.info if own else logger.warning)("MultiTaskSampler: stepping %s one env at a time, without %s: %s",
                                             env_name, path, reason)
    return False
