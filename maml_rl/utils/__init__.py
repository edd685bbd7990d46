"""Small numerical helpers shared by the episodes, losses and meta-learners."""

from maml_rl.utils.optimization import conjugate_gradient
from maml_rl.utils.torch_utils import (
    detach_distribution,
    discounted_cumsum,
    distribution_tensors,
    flatten_tensors,
    length_mask,
    mean_weights,
    rebuild_distribution,
    unflatten_like,
    weighted_normalize,
)

__all__ = [
    "conjugate_gradient",
    "detach_distribution",
    "discounted_cumsum",
    "distribution_tensors",
    "flatten_tensors",
    "length_mask",
    "mean_weights",
    "rebuild_distribution",
    "unflatten_like",
    "weighted_normalize",
]
