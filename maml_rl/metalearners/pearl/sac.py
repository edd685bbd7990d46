"""The soft actor-critic losses of PEARL's update (oyster's ``_take_step``), as plain functions of tensors."""

from __future__ import annotations

import torch

__all__ = ["policy_loss", "q_target", "qf_loss", "vf_loss"]


def q_target(rewards: torch.Tensor, terminated: torch.Tensor, target_v: torch.Tensor, reward_scale: float,
             discount: float) -> torch.Tensor:
    """``scale * r + (1 - terminated) * discount * V_target(o', z)``: a truncated episode bootstraps
    from its final observation; only a terminated one does not."""
    return rewards * reward_scale + (1.0 - terminated.to(rewards.dtype)) * discount * target_v


def qf_loss(q1: torch.Tensor, q2: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The two Q networks' mean squared Bellman errors, summed (``target`` carries no gradient)."""
    target = target.detach()
    return torch.mean((q1 - target) ** 2) + torch.mean((q2 - target) ** 2)


def vf_loss(v: torch.Tensor, min_q_new: torch.Tensor, log_pi: torch.Tensor) -> torch.Tensor:
    """``V(o, z)`` towards ``min Q(o, a~pi, z) - log pi(a|o, z)``, the soft value (target detached)."""
    return torch.mean((v - (min_q_new - log_pi).detach()) ** 2)


def policy_loss(log_pi: torch.Tensor, min_q_new: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor,
                mean_reg: float, std_reg: float) -> torch.Tensor:
    """``E[log pi - min Q]`` plus rlkit's penalties on the Gaussian's mean and log-std."""
    return torch.mean(log_pi - min_q_new) + mean_reg * torch.mean(mean ** 2) + std_reg * torch.mean(log_std ** 2)
