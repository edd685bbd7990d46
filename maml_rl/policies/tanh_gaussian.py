"""SAC's policy: a Gaussian squashed by tanh, with a state-dependent standard deviation."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import torch
import torch.nn as nn
from torch.distributions import Independent, Normal, TanhTransform, TransformedDistribution

from maml_rl.policies.policy import get_nonlinearity

__all__ = ["LOG_STD_MAX", "LOG_STD_MIN", "SquashedSample", "TanhGaussianPolicy", "mlp"]

# rlkit's (oyster's) bounds on the log standard deviation.
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def mlp(input_size: int, hidden_sizes: Sequence[int], output_size: int,
        nonlinearity: Callable[[torch.Tensor], torch.Tensor] | str = "relu") -> nn.Sequential:
    """Linear layers with ``nonlinearity`` between them, none after the last."""
    activation = get_nonlinearity(nonlinearity)
    layers: list[nn.Module] = []
    sizes = (int(input_size), *map(int, hidden_sizes))
    for lo, hi in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(lo, hi), _Activation(activation)]
    layers.append(nn.Linear(sizes[-1], int(output_size)))
    return nn.Sequential(*layers)


class _Activation(nn.Module):
    def __init__(self, function: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)


class SquashedSample(NamedTuple):
    """A reparameterised draw of :meth:`TanhGaussianPolicy.rsample`."""

    actions: torch.Tensor  # tanh(pre_tanh)
    log_prob: torch.Tensor  # [N, 1], with tanh's change of variables
    mean: torch.Tensor  # the Gaussian's mean (before tanh)
    log_std: torch.Tensor
    pre_tanh: torch.Tensor


class TanhGaussianPolicy(nn.Module):
    """``tanh(u)``, ``u ~ N(mu(x), sigma(x)^2)``: an MLP giving the mean and the log-std (clamped to
    ``[LOG_STD_MIN, LOG_STD_MAX]``), as rlkit's ``TanhGaussianPolicy`` (oyster's SAC actor).

    ``forward`` returns the distribution the sampler draws from (``tanh(mean + std * noise)``, and
    ``tanh(mean)`` for ``actions="mean"``); :meth:`rsample` the reparameterised draw SAC trains with.
    """

    def __init__(self, input_size: int, output_size: int, hidden_sizes: Sequence[int] = (300, 300, 300),
                 nonlinearity: Callable[[torch.Tensor], torch.Tensor] | str = "relu"):
        super().__init__()
        self.input_size, self.output_size = int(input_size), int(output_size)
        activation = get_nonlinearity(nonlinearity)
        layers: list[nn.Module] = []
        sizes = (self.input_size, *map(int, hidden_sizes))
        for lo, hi in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(lo, hi), _Activation(activation)]
        self.trunk = nn.Sequential(*layers)
        width = sizes[-1]
        self.mean = nn.Linear(width, self.output_size)
        self.log_std = nn.Linear(width, self.output_size)
        # rlkit's last-layer initialisation: small uniform weights and biases.
        for layer in (self.mean, self.log_std):
            nn.init.uniform_(layer.weight, -1e-3, 1e-3)
            nn.init.uniform_(layer.bias, -1e-3, 1e-3)

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(x)
        return self.mean(h), self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def forward(self, x: torch.Tensor) -> Independent:
        mean, log_std = self._heads(x)
        return Independent(TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform()]), 1)

    def rsample(self, x: torch.Tensor, noise: torch.Tensor | None = None) -> SquashedSample:
        """A reparameterised draw and its log-probability, rlkit's formula:
        ``log N(u) - sum log(1 - tanh(u)^2 + 1e-6)``."""
        mean, log_std = self._heads(x)
        std = log_std.exp()
        if noise is None:
            noise = torch.randn_like(mean)
        pre_tanh = mean + std * noise
        actions = torch.tanh(pre_tanh)
        log_prob = Normal(mean, std).log_prob(pre_tanh) - torch.log(1 - actions * actions + 1e-6)
        return SquashedSample(actions, log_prob.sum(-1, keepdim=True), mean, log_std, pre_tanh)

    def deterministic(self, x: torch.Tensor) -> torch.Tensor:
        """``tanh(mean)``: rlkit's deterministic action."""
        return torch.tanh(self._heads(x)[0])


def squashed_log_prob_reference(mean: torch.Tensor, log_std: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
    """The log-density of ``tanh(u)`` at ``u = pre_tanh`` without rlkit's epsilon (tests compare against it)."""
    var = torch.exp(2 * log_std)
    gauss = -((pre_tanh - mean) ** 2) / (2 * var) - log_std - 0.5 * math.log(2 * math.pi)
    return (gauss - torch.log(1 - torch.tanh(pre_tanh) ** 2)).sum(-1, keepdim=True)
