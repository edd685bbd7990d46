"""The sampler's env: the factory, its pickled form, the horizon and the info keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import cloudpickle
import gymnasium as gym

from maml_rl.envs.meta_env import check_meta_env

from ..workers.buffers import BufferSpec
from ..workers.child_env import time_limit

# Horizon of an env with no time limit of its own: the buffers need one.
NO_TIME_LIMIT_CAP = 1000


@dataclass(frozen=True)
class Workload:
    """What every backend rolls out (picklable): the env, the buffers' spec and
    the episodes per task.

    :param env_fn_bytes: the env factory, pickled with cloudpickle.
    :param env_name: the env's name, for messages.
    :param horizon_is_cap: the horizon is only the safety cap of an env without
        a time limit, so an episode cut there is an error.
    """

    env_fn_bytes: bytes
    env_name: str
    spec: BufferSpec
    batch_size: int
    horizon_is_cap: bool = False


def describe_workload(env_fn: Callable[[], gym.Env], env: gym.Env, batch_size: int,
                      max_episode_steps: Optional[int] = None, info_keys: Optional[Sequence[str]] = None) -> Workload:
    """The workload of ``env``, one env built by ``env_fn`` (checked to be a meta-learning env)."""
    check_meta_env(env)
    env_fn_bytes = pickle_env_fn(env_fn)
    horizon, horizon_is_cap = resolve_horizon(env, max_episode_steps)
    keys = resolve_info_keys(env, info_keys)
    spec = BufferSpec.for_spaces(env.observation_space, env.action_space, horizon, keys)
    return Workload(env_fn_bytes, env_name_of(env), spec, batch_size, horizon_is_cap)


def resolve_env_fn(env_name, env_kwargs, env_fn) -> Callable[[], gym.Env]:
    if env_fn is not None:
        if env_name is not None:
            raise ValueError("give either env_name (with env_kwargs) or env_fn, not both")
        if isinstance(env_fn, gym.Env):
            raise TypeError(
                f"env_fn must be a factory that builds the env, got the env {env_fn!r} itself: "
                "pass its class or a function (e.g. `lambda: MyEnv(...)`) so each worker builds its own"
            )
        if not callable(env_fn):
            raise TypeError(f"env_fn must be a callable returning a gymnasium env, got {env_fn!r}")
        return env_fn
    if env_name is None:
        raise ValueError("give env_name (a registered gymnasium id) or env_fn (a factory)")
    from maml_rl.envs import make_env

    return make_env(env_name, **(env_kwargs or {}))


def pickle_env_fn(env_fn: Callable[[], gym.Env]) -> bytes:
    try:
        return cloudpickle.dumps(env_fn)
    except Exception as exc:
        raise TypeError(
            f"env_fn {env_fn!r} cannot be pickled for the worker processes ({type(exc).__name__}: {exc}). "
            "It, or something it refers to, holds an object that cannot leave this process "
            "(a lock, a socket, an open file, a live simulator). Pass a factory that creates those "
            "objects when called, e.g. `lambda: MyEnv(...)` or `functools.partial(MyEnv, ...)`."
        ) from exc


def env_name_of(env: gym.Env) -> str:
    return getattr(env.spec, "id", None) or type(env.unwrapped).__name__


def resolve_horizon(env: gym.Env, max_episode_steps: Optional[int]) -> Tuple[int, bool]:
    """The rollout horizon, and whether it is only the safety cap of an env without a time limit."""
    horizon = max_episode_steps
    if horizon is None:
        horizon = getattr(env.spec, "max_episode_steps", None)
    if horizon is None:
        horizon = time_limit(env)
    if horizon is None:
        # gymnasium does not require a TimeLimit: episodes the env ends itself are fine,
        # one that runs past the cap is an error (see the facade's trajectories.check_outputs).
        return NO_TIME_LIMIT_CAP, True
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"max_episode_steps must be a positive int, got {horizon!r}")
    return horizon, False


def resolve_info_keys(env: gym.Env, requested: Optional[Sequence[str]]) -> Tuple[str, ...]:
    """The info keys to carry: those asked for, else the env's own ``info_keys``."""
    keys = getattr(env.unwrapped, "info_keys", ()) if requested is None else requested
    if isinstance(keys, str) or not all(isinstance(key, str) for key in keys):
        raise ValueError(f"info_keys must be a sequence of str keys of step()'s info, e.g. ('success',), got {keys!r}")
    keys = tuple(keys)
    if len(set(keys)) != len(keys):
        raise ValueError(f"info_keys has a key twice: {keys!r}")
    return keys
