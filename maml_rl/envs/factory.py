"""Picklable environment factories for worker processes."""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium

from maml_rl.envs.errors import RetiredEnvError, UnknownEnvError
from maml_rl.envs.registration import ENV_IDS, register_envs
from maml_rl.envs.retired import RETIRED_ENV_IDS, retired_message

__all__ = ["EnvFactory", "UnknownEnvError", "make_env"]


class EnvFactory:
    """Callable building ``gymnasium.make(env_id, **kwargs)``.

    Holds only the id and the keyword arguments, so it pickles cheaply and
    can be sent to worker processes (including ``spawn``-ed ones: calling it
    registers the environments first).
    """

    def __init__(self, env_id: str, kwargs: dict[str, Any] | None = None):
        self.env_id = env_id
        self.kwargs = dict(kwargs or {})

    def __call__(self) -> gymnasium.Env:
        register_envs()
        return gymnasium.make(self.env_id, **self.kwargs)

    def __repr__(self) -> str:
        args = [repr(self.env_id)] + [f"{key}={value!r}" for key, value in self.kwargs.items()]
        return f"{type(self).__name__}({', '.join(args)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EnvFactory):
            return NotImplemented
        return self.env_id == other.env_id and self.kwargs == other.kwargs

    __hash__ = None  # mutable kwargs


def make_env(env_id: str, **kwargs: Any) -> EnvFactory:
    """Return a factory for ``gymnasium.make(env_id, **kwargs)``.

    ``kwargs`` go to :func:`gymnasium.make`, so ``max_episode_steps`` sets the
    horizon and the others reach the environment's constructor.

    Raises:
        UnknownEnvError: ``env_id`` is not registered; the message lists close
            registered ids and the ids of maml_rl.
        RetiredEnvError: ``env_id`` is one of pytorch-maml-rl's MuJoCo ids
            (``HalfCheetahVel-v2`` ...); the message names the -v5 env to use.
    """
    if env_id in RETIRED_ENV_IDS:
        raise RetiredEnvError(retired_message(env_id))
    try:
        gymnasium.spec(env_id)
    except gymnasium.error.Error as exc:
        close = difflib.get_close_matches(str(env_id), list(gymnasium.registry), n=5, cutoff=0.5)
        hint = f" Did you mean one of {close}?" if close else ""
        raise UnknownEnvError(
            f"Unknown environment id {env_id!r} ({exc}).{hint} "
            f"maml_rl provides: {', '.join(ENV_IDS)}; and with the metaworld extra "
            "MetaWorld-ML1-<task>-v3 (e.g. MetaWorld-ML1-push-v3), MetaWorld-ML10-v3, MetaWorld-ML45-v3."
        ) from exc
    return EnvFactory(env_id, kwargs)
