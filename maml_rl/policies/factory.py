"""Pick a policy class from an environment's spaces."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch
from gymnasium import spaces

from maml_rl.policies.categorical_mlp import CategoricalMLPPolicy
from maml_rl.policies.normal_mlp import NormalMLPPolicy
from maml_rl.policies.policy import Policy, get_nonlinearity


def get_policy_for_env(
    env: Any,
    hidden_sizes: Sequence[int] = (100, 100),
    nonlinearity: str | Callable[[torch.Tensor], torch.Tensor] = "tanh",
) -> Policy:
    """Gaussian policy for ``Box`` actions, categorical policy for ``Discrete`` actions.

    Vector environments are handled through their ``single_*_space`` attributes.

    :param env: environment (or vector environment) exposing observation/action spaces.
    :param hidden_sizes: widths of the hidden layers.
    :param nonlinearity: activation name (case-insensitive) or callable.
    :raises ValueError: for an unknown nonlinearity name or an unsupported action space.
    """
    activation = get_nonlinearity(nonlinearity)
    observation_space = getattr(env, "single_observation_space", None)
    if observation_space is None:
        observation_space = env.observation_space
    action_space = getattr(env, "single_action_space", None)
    if action_space is None:
        action_space = env.action_space
    input_size = int(spaces.flatdim(observation_space))
    if isinstance(action_space, spaces.Box):
        output_size = int(np.prod(action_space.shape))
        return NormalMLPPolicy(input_size, output_size, hidden_sizes=tuple(hidden_sizes), nonlinearity=activation)
    if isinstance(action_space, spaces.Discrete):
        return CategoricalMLPPolicy(
            input_size, int(action_space.n), hidden_sizes=tuple(hidden_sizes), nonlinearity=activation
        )
    raise ValueError(f"unsupported action space {action_space!r}: expected gymnasium Box or Discrete")
