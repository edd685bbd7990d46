"""PPO's clipped objective, the one piece of an update that two families share (ProMP's outer step and
RL²-PPO's update); each reduces it over its own steps and weights."""

from __future__ import annotations

import torch

__all__ = ["clipped_objective"]


def clipped_objective(ratio: torch.Tensor, advantages: torch.Tensor, clip: float) -> torch.Tensor:
    """``min(r A, clip(r, 1 - clip, 1 + clip) A)`` per step (to be maximised), for likelihood ratios ``r``."""
    return torch.minimum(ratio * advantages, torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * advantages)
