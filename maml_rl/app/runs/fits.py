"""Will a run fit in memory? Checked from its configuration before anything is written.

A size that cannot fit (a layer of 10^8 units, 10^12 training tasks, a trial of
10^9 episodes) would otherwise fail minutes in, with a traceback from deep in
an allocation, after the run's folder is written; or take the machine down.
The networks are built on PyTorch's ``meta`` device, which allocates nothing,
to count their parameters; the meta-learner says what its data takes
(:meth:`~maml_rl.metalearners.base.MetaLearner.memory_needs`). Both are lower
bounds, and they are compared with all of the machine's memory (not what is
free now: a replay fills over hours), so the check refuses only what cannot fit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Optional

import torch
from gymnasium import spaces

from maml_rl.app.config_files import ConfigError
from maml_rl.metalearners import make_metalearner, make_policy

__all__ = ["check_run_fits", "machine_memory", "run_memory_needs"]

# Each parameter: its value, its gradient and an optimiser's two moments (Adam), in float32.
BYTES_PER_PARAMETER = 4 * 4


def run_memory_needs(config: Mapping[str, Any], env: Any) -> dict[str, int]:
    """Bytes a run of ``config`` takes at least, by what holds them (its env built once, for its spaces)."""
    observation_size = int(spaces.flatdim(env.observation_space))
    action_size = int(spaces.flatdim(env.action_space))
    horizon = int(getattr(env.spec, "max_episode_steps", None) or 1)
    with torch.device("meta"):
        policy = make_policy(config, env)
        learner = make_metalearner(config, policy, "meta")
    modules = [policy, *(value for value in vars(learner).values() if isinstance(value, torch.nn.Module))]
    parameters = {id(p): p.numel() for module in modules for p in module.parameters()}
    return {"networks": sum(parameters.values()) * BYTES_PER_PARAMETER,
            **learner.memory_needs(config, observation_size, action_size, horizon)}


def machine_memory() -> Optional[int]:
    """Bytes of memory this process could ever use: the machine's, capped by a cgroup (v2) limit; None if unknown."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            memory = min(memory, int(limit))
    except (OSError, ValueError):
        pass
    return memory


def check_run_fits(config: Mapping[str, Any], env: Any, source: str = "the configuration") -> None:
    """Refuse a configuration whose run cannot fit in the machine's memory.

    :raises ConfigError: with what takes the memory, largest first, and how much the machine has.
    """
    available = machine_memory()
    if available is None:
        return
    needs = run_memory_needs(config, env)
    total = sum(needs.values())
    if total <= available:
        return
    parts = ", ".join(f"{name} {_size(size)}" for name, size in sorted(needs.items(), key=lambda item: -item[1])
                      if size)
    raise ConfigError(f"{source}: a run of this configuration needs at least {_size(total)} of memory ({parts}), "
                      f"and this machine has {_size(available)}: lower the sizes that make up the largest part")


def _size(size: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size / 2**10:.1f} KiB"
