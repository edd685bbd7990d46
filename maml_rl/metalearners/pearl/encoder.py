"""PEARL's context encoder: each transition's Gaussian factor over z, multiplied across the context.

``q(z | c) = prod_n N(mu_n, sigma_n^2)``: a product of Gaussians does not depend
on the order of the transitions (permutation-invariant), and its variance
shrinks as evidence accumulates. Oyster's ``_product_of_gaussians`` and
``compute_kl_div`` (katerakelly/oyster 44e20fd, rlkit/torch/sac/agent.py).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from maml_rl.policies.tanh_gaussian import mlp

__all__ = ["ContextEncoder", "Posterior", "kl_to_standard_normal", "product_of_gaussians"]


class Posterior(NamedTuple):
    """``q(z | c)`` per task: means and variances ``[K, latent]``."""

    means: torch.Tensor
    variances: torch.Tensor

    def sample(self, generator: torch.Generator | None = None, per_task: int | None = None) -> torch.Tensor:
        """A reparameterised draw ``[K, latent]`` (or ``[K, per_task, latent]``); the noise from ``generator``."""
        shape = self.means.shape if per_task is None else (self.means.shape[0], per_task, self.means.shape[1])
        noise = torch.randn(shape, generator=generator).to(self.means.device)
        means, std = self.means, self.variances.sqrt()
        if per_task is not None:
            means, std = means.unsqueeze(1), std.unsqueeze(1)
        return means + std * noise

    @staticmethod
    def prior(num_tasks: int, latent_size: int, device: str | torch.device = "cpu") -> "Posterior":
        """``N(0, I)`` for every task."""
        return Posterior(torch.zeros(num_tasks, latent_size, device=device),
                         torch.ones(num_tasks, latent_size, device=device))


def product_of_gaussians(means: torch.Tensor, variances: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalised product of ``N`` Gaussian factors along dimension ``-2`` (``[..., N, d]`` ->
    ``[..., d]``): precision the sum of precisions, mean the precision-weighted mean. Variances are
    clamped at 1e-7, as oyster's."""
    variances = variances.clamp(min=1e-7)
    variance = 1.0 / torch.reciprocal(variances).sum(-2)
    return variance * (means / variances).sum(-2), variance


def kl_to_standard_normal(means: torch.Tensor, variances: torch.Tensor) -> torch.Tensor:
    """``sum KL(N(mu, var) || N(0, 1))`` over every task and dimension (oyster sums over tasks too)."""
    return 0.5 * (variances + means * means - 1.0 - torch.log(variances)).sum()


class ContextEncoder(nn.Module):
    """An MLP from one transition ``[o, a, r(, o')]`` to its factor's mean and (softplus) variance.

    :param information_bottleneck: ``True``: a product of Gaussians with a KL to the prior (PEARL);
        ``False``: a deterministic z, the mean of the per-transition outputs (oyster's option).
    """

    def __init__(self, input_size: int, latent_size: int, hidden_sizes: Sequence[int] = (200, 200, 200),
                 information_bottleneck: bool = True, nonlinearity: str = "relu"):
        super().__init__()
        self.latent_size = int(latent_size)
        self.information_bottleneck = bool(information_bottleneck)
        outputs = 2 * self.latent_size if self.information_bottleneck else self.latent_size
        self.network = mlp(input_size, hidden_sizes, outputs, nonlinearity)

    def forward(self, context: torch.Tensor) -> Posterior:
        """``context`` ``[K, N, input]`` (``N`` transitions of each of ``K`` tasks) -> ``q(z | c)`` ``[K, latent]``."""
        out = self.network(context)
        if not self.information_bottleneck:
            return Posterior(out.mean(-2), torch.zeros_like(out[..., 0, :]))
        means, variances = out[..., :self.latent_size], F.softplus(out[..., self.latent_size:])
        return Posterior(*product_of_gaussians(means, variances))
