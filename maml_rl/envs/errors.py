"""Errors of the environment factory."""

from __future__ import annotations

import gymnasium

__all__ = ["RetiredEnvError", "UnknownEnvError"]


class UnknownEnvError(gymnasium.error.UnregisteredEnv, ValueError):
    """The environment id is not registered with gymnasium."""


class RetiredEnvError(UnknownEnvError, gymnasium.error.DeprecatedEnv):
    """An env id of pytorch-maml-rl whose dynamics this package does not reproduce (:mod:`maml_rl.envs.retired`)."""
