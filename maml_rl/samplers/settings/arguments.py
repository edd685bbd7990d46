"""The arguments of a sampler's calls that no layer below checks: the discount, a state to load."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from maml_rl.utils.echo import echo

__all__ = ["STATE_KEYS", "check_gamma", "check_state"]

#: The keys of :meth:`MultiTaskSampler.state_dict`.
STATE_KEYS = ("seed", "num_rollouts", "task_rng")


def check_gamma(gamma: Any) -> None:
    """A discount factor in [0, 1]: beyond it (or nan) the returns are inf or nan, and nothing would say why."""
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
        raise TypeError(f"gamma must be a number in [0, 1], got {echo(gamma)} ({type(gamma).__name__})")
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be a number in [0, 1] (the discount factor), got {gamma!r}")


def check_state(state: Any) -> None:
    """What :meth:`MultiTaskSampler.load_state_dict` needs, checked before any of it is used."""
    if not isinstance(state, Mapping):
        raise TypeError(f"load_state_dict takes the dict of a sampler's state_dict(), got {type(state).__name__}")
    missing = [key for key in STATE_KEYS if key not in state]
    if missing:
        raise ValueError(f"the sampler state lacks {', '.join(map(repr, missing))} (it has "
                         f"{', '.join(map(repr, state)) or 'no key'}): give load_state_dict what the sampler's "
                         f"state_dict() returned, keys {', '.join(map(repr, STATE_KEYS))}")
    for key in ("seed", "num_rollouts"):
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"the sampler state's {key!r} must be an int >= 0, got {echo(value)}")
    if not isinstance(state["task_rng"], Mapping):
        raise ValueError(f"the sampler state's 'task_rng' must be a numpy bit generator's state (a dict), "
                         f"got {type(state['task_rng']).__name__}")
