"""A vector env's caller mistakes, raised as ``SyncVectorEnv`` raises them, with the vector env still usable.

Where the caller's process can tell, it checks before any command reaches an env (:func:`action_rows`,
:func:`check_reset_mask`): an action batch of the wrong shape would otherwise be cut into a worker's slice, and
rows too few or too many silently dropped or stepped with stale actions. Where only an env can tell (an
attribute it lacks, a task it refuses, a render mode it was not made with), the env's exception comes back
as a reply (:class:`EnvRaised`), not as a worker failure, and the caller raises it plain. Torch-free.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import iterate

# Spaces whose batch of n is one array of shape (n, *space.shape), as gymnasium batches them.
_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def _misfit(space: gym.Space, batch: Any, num_envs: int, where: str) -> Optional[str]:
    """What is wrong with ``batch`` as ``num_envs`` envs' values of ``space`` (its array leaves), or ``None``."""
    if isinstance(space, _ARRAY_SPACES):
        expected = (num_envs, *space.shape)
        try:
            shape = tuple(np.shape(batch))
        except ValueError:  # rows of different lengths
            return f"{where} in rows of different shapes, expected shape {expected}"
        return None if shape == expected else f"{where} of shape {shape}, expected {expected}"
    if isinstance(space, gym.spaces.Dict):
        for key, subspace in space.spaces.items():
            if (wrong := _misfit(subspace, batch[key], num_envs, f"{where}[{key!r}]")) is not None:
                return wrong
    elif isinstance(space, gym.spaces.Tuple):
        for i, subspace in enumerate(space.spaces):
            if (wrong := _misfit(subspace, batch[i], num_envs, f"{where}[{i}]")) is not None:
                return wrong
    return None


def action_rows(single_space: gym.Space, batched_space: gym.Space, num_envs: int, actions: Any) -> List[Any]:
    """Each env's action from the caller's batch, after checking it holds one action per env.

    ``SyncVectorEnv`` pairs actions and envs with a strict ``zip`` and lets the envs refuse a row of the wrong
    shape; here the whole batch is checked against the batched space's shapes first. A batch gymnasium cannot
    iterate raises gymnasium's own error (a ``TypeError`` for a scalar, a ``KeyError`` for a missing key)."""
    try:
        rows = list(iterate(batched_space, actions))
    except ValueError as error:  # gymnasium's strict zip over a Dict's or Tuple's parts: say which part
        wrong, cause = _misfit(single_space, actions, num_envs, "actions"), error
        if wrong is None:
            raise
    else:
        wrong, cause = _misfit(single_space, actions, num_envs, "actions"), None
        if wrong is None and len(rows) != num_envs:
            wrong = f"{len(rows)} actions"
    if wrong is not None:
        raise ValueError(f"step() got {wrong} for {num_envs} envs: pass one action per env, as the vector env's "
                         f"action_space {batched_space} batches them") from cause
    return rows


def check_reset_mask(mask: Any, num_envs: int) -> None:
    """``options['reset_mask']`` as ``SyncVectorEnv.reset`` checks it."""
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
    if mask.shape != (num_envs,):
        raise ValueError(f"`options['reset_mask']` must have shape `({num_envs},)`, got {mask.shape}")
    if mask.dtype != np.bool_:
        raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
    if not np.any(mask):
        raise ValueError("`options['reset_mask']` must contain a boolean array with at least one True value, "
                         f"got reset_mask={mask}")


class EnvTraceback(Exception):
    """The traceback, in a worker process, of an env's exception raised again in the caller's (its cause)."""

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class EnvRaised:
    """The reply of a request (``call``, ``set_attr``, ``reset_task``) during which an env raised ``error``:
    ``where`` names the env and the operation, ``traceback`` is the env's."""

    error: BaseException
    where: str
    traceback: str

    @staticmethod
    def crosses_processes(error: BaseException) -> bool:
        """Whether ``error`` survives a pickle round trip (else it is reported as the env's failure)."""
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:
            return False
        return True


def raise_from_envs(replies: Dict[int, Any]) -> None:
    """Raise the exception of the first env (in env order) that raised on the request, if any."""
    for w in sorted(replies):
        reply = replies[w]
        if isinstance(reply, EnvRaised):
            error = reply.error
            if error.__traceback__ is not None:  # raised in this process: its own traceback says where
                raise error
            raise error from EnvTraceback(f"raised {reply.where} (in worker {w}):\n{reply.traceback}")
