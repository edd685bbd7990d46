"""Will a rollout fit in memory? An estimate made before any worker starts.

Every env slot holds one live env, and the trajectory buffers grow with
slots x horizon; a request far too large would otherwise fail minutes later,
deep in a worker, or take the machine down. The estimate has two tiers so
that ordinary requests cost nothing:

1. a cheap upper bound from the env in the main process (its MuJoCo model
   and data buffers, which it may not all touch, plus its Python objects);
   a request within half the available memory by that bound goes ahead;
2. otherwise the resident memory of a few envs is measured in a fresh
   process (the only place where freed memory of other objects cannot
   hide it), and a request whose estimate exceeds 90% of the available
   memory is refused with the figures and what to reduce.

This module imports no torch: its measuring function runs in a child process.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any, Callable, Optional

from ..errors import SamplerError

# Envs built by the measuring process after a first one (which pays for imports and caches).
MEASURED_ENVS = 8
# How long the measuring process may take before the estimate is skipped.
MEASURE_TIMEOUT = 120.0
# An upper bound below this fraction of the available memory needs no measurement.
SAFE_FRACTION = 0.5
# Refuse an estimate above this fraction: the estimate is not exact, and the
# process needs memory besides the rollout (the meta-learner's step, above all).
MAX_FRACTION = 0.9


class InsufficientMemoryError(SamplerError, MemoryError):
    """A rollout would need more memory than the machine has available."""


def available_memory() -> Optional[int]:
    """Bytes this process can still use: ``MemAvailable``, capped by a cgroup (v2) limit; ``None`` if unknown."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except OSError:
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        usage = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            room = int(limit) - usage
            available = room if available is None else min(available, room)
    except (OSError, ValueError):
        pass
    return available


def env_upper_bound(env_fn: Callable[[], Any]) -> int:
    """Bytes one more env may take at most (Python objects plus MuJoCo buffers), from building one here."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        env = env_fn()
        python = max(0, tracemalloc.get_traced_memory()[0] - before)
    finally:
        if not tracing:
            tracemalloc.stop()
    try:
        return python + _mujoco_bytes(getattr(env, "unwrapped", env))
    finally:
        env.close()


def _mujoco_bytes(env: Any) -> int:
    model, data = getattr(env, "model", None), getattr(env, "data", None)
    total = 0
    for obj, fields in ((model, ("nbuffer",)), (data, ("nbuffer", "narena"))):
        for field in fields:
            value = getattr(obj, field, None)
            if isinstance(value, int):
                total += value
    return total


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _proportional_bytes() -> int:
    """This process's share of memory (PSS): a forked child's pages shared with its parent count in part."""
    try:
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _resident_bytes()


def measure_env_memory(env_fn_bytes: bytes, count: int, conn) -> None:
    """Child process: send ``(process_bytes, bytes_per_env)`` measured by building ``count`` envs, or ``None``."""
    try:
        import cloudpickle

        env_fn = cloudpickle.loads(env_fn_bytes)
        first = env_fn()
        first.reset(seed=0)
        base = _resident_bytes()
        envs = [env_fn() for _ in range(count)]
        for i, env in enumerate(envs):
            env.reset(seed=i)
        per_env = max(0, _resident_bytes() - base) / count
        conn.send((_proportional_bytes() - per_env * count, per_env))
    except BaseException:
        conn.send(None)


def _measure(ctx, env_fn_bytes: bytes) -> Optional[tuple]:
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=measure_env_memory, args=(env_fn_bytes, MEASURED_ENVS, child),
                          name="ChildEnv-memory-probe", daemon=True)
    process.start()
    child.close()
    try:
        return parent.recv() if parent.poll(MEASURE_TIMEOUT) else None
    except EOFError:
        return None
    finally:
        parent.close()
        if process.is_alive():
            process.kill()
        process.join()


def _gb(num_bytes: float) -> str:
    return f"{num_bytes / 1e9:.1f} GB"


def check_memory(
    *,
    env_fn: Callable[[], Any],
    env_fn_bytes: bytes,
    ctx,
    num_slots: int,
    num_processes: int,
    buffer_bytes: int,
    what: str,
) -> None:
    """Refuse, with :class:`InsufficientMemoryError`, a pool that cannot fit in memory.

    :param ctx: multiprocessing context for the measuring process.
    :param num_processes: worker processes the pool will start (0 in process).
    :param buffer_bytes: size of the rollout's arrays (buffers, noise, the episodes' copy).
    :param what: the request in words, for the message.
    """
    available = available_memory()
    if available is None:
        return
    upper = buffer_bytes + num_slots * env_upper_bound(env_fn)
    if upper <= SAFE_FRACTION * available:
        return
    measured = _measure(ctx, env_fn_bytes)
    if measured is None:
        return  # the env fails to build or reset: the pool reports that with its traceback
    process_bytes, per_env = measured
    envs = num_slots * per_env
    estimate = buffer_bytes + envs + num_processes * process_bytes
    if estimate > MAX_FRACTION * available:
        raise InsufficientMemoryError(
            f"{what} needs about {_gb(estimate)} of memory ({num_slots} envs x {per_env / 1e6:.2f} MB = "
            f"{_gb(envs)}, {_gb(buffer_bytes)} of trajectories and action noise, {num_processes} worker processes x "
            f"{process_bytes / 1e6:.0f} MB), but only {_gb(available)} is available (at most 90% of it is used for a "
            "rollout). Sample fewer tasks per call "
            "(meta-batch-size), fewer episodes per task (fast-batch-size / batch_size) or shorter episodes "
            "(max_episode_steps)."
        )
