"""PEARL's networks: the policy the sampler runs (actor and context encoder together, so that
``policy.th`` holds all that evaluation needs) and the critics only training needs."""

from __future__ import annotations

import copy
from typing import Sequence

import torch
import torch.nn as nn

from maml_rl.policies.tanh_gaussian import TanhGaussianPolicy, mlp

from .encoder import ContextEncoder

__all__ = ["Critics", "PEARLPolicy", "context_size"]


def context_size(observation_size: int, action_size: int, next_obs_in_context: bool) -> int:
    """Width of one context transition ``[o, a, r(, o')]``."""
    return observation_size + action_size + 1 + (observation_size if next_obs_in_context else 0)


class PEARLPolicy(nn.Module):
    """The actor ``pi(a | o, z)`` (:class:`TanhGaussianPolicy` on ``[o, z]``) and the encoder ``q(z | c)``.

    Calling it runs the actor on ``[o, z]`` rows: what the sampler does with ``conditioning_size =
    latent_size`` and the z of each slot as its conditioning.
    """

    def __init__(self, observation_size: int, action_size: int, latent_size: int = 5,
                 hidden_sizes: Sequence[int] = (300, 300, 300), context_hidden_sizes: Sequence[int] = (200, 200, 200),
                 nonlinearity: str = "relu", information_bottleneck: bool = True, next_obs_in_context: bool = False):
        super().__init__()
        self.observation_size, self.action_size = int(observation_size), int(action_size)
        self.latent_size, self.next_obs_in_context = int(latent_size), bool(next_obs_in_context)
        self.actor = TanhGaussianPolicy(self.observation_size + self.latent_size, self.action_size, hidden_sizes,
                                        nonlinearity)
        self.encoder = ContextEncoder(context_size(self.observation_size, self.action_size, next_obs_in_context),
                                      self.latent_size, context_hidden_sizes, information_bottleneck, nonlinearity)

    def forward(self, inputs: torch.Tensor):
        return self.actor(inputs)


class Critics(nn.Module):
    """Oyster's twin Q networks ``Q(o, a, z)``, the value network ``V(o, z)`` and its Polyak-averaged copy."""

    def __init__(self, observation_size: int, action_size: int, latent_size: int,
                 hidden_sizes: Sequence[int] = (300, 300, 300), nonlinearity: str = "relu"):
        super().__init__()
        q_inputs = observation_size + action_size + latent_size
        self.qf1 = mlp(q_inputs, hidden_sizes, 1, nonlinearity)
        self.qf2 = mlp(q_inputs, hidden_sizes, 1, nonlinearity)
        self.vf = mlp(observation_size + latent_size, hidden_sizes, 1, nonlinearity)
        self.target_vf = copy.deepcopy(self.vf)
        self.target_vf.requires_grad_(False)

    def q(self, observations: torch.Tensor, actions: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = torch.cat([observations, actions, z], dim=-1)
        return self.qf1(inputs), self.qf2(inputs)

    @torch.no_grad()
    def update_target(self, tau: float) -> None:
        """``target <- (1 - tau) target + tau vf``, rlkit's ``soft_update_from_to``."""
        for target, source in zip(self.target_vf.parameters(), self.vf.parameters()):
            target.mul_(1.0 - tau).add_(source, alpha=tau)
