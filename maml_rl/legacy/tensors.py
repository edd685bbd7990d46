"""pytorch-maml-rl's tensor helpers of ``maml_rl.utils.torch_utils`` that this package dropped.

:func:`adapt` gives ``maml_rl.utils.torch_utils`` a module ``__getattr__`` that
serves them, each with a warning once, when that module is imported.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from maml_rl.legacy.warn import module_getattr

__all__ = ["MOVED", "adapt"]


def weighted_mean(tensor: Any, lengths: Any = None):
    """``[B, ...]``: each episode's mean over its first ``lengths[b]`` steps of a ``[T, B, ...]`` tensor.

    The reference also zeroed ``tensor`` past the lengths, in place; this one leaves it as it is.
    """
    import torch

    if lengths is None:
        return torch.mean(tensor)
    if tensor.dim() < 2:
        raise ValueError(f"expected a [T, B, ...] tensor, got {tensor.dim()}-D")
    lengths = torch.as_tensor(lengths, dtype=torch.float32, device=tensor.device)
    steps = torch.arange(tensor.shape[0], device=tensor.device).unsqueeze(1)
    mask = (steps < lengths.unsqueeze(0)).to(tensor.dtype).view(*tensor.shape[:2], *(1,) * (tensor.dim() - 2))
    return (tensor * mask).sum(0) / lengths.view(-1, *(1,) * (tensor.dim() - 2))


def to_numpy(value: Any) -> np.ndarray:
    """A tensor, array, or (nested) list of them as one numpy array."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (tuple, list)):
        return np.stack([to_numpy(item) for item in value], axis=0)
    raise TypeError(f"to_numpy() takes tensors, arrays and lists of them, got {type(value).__name__}")


def _vector_to_parameters():
    from torch.nn.utils import vector_to_parameters

    return vector_to_parameters


#: Moved name -> (its value, what to write instead).
MOVED: dict[str, tuple[Callable[[], Any], str]] = {
    "weighted_mean": (lambda: weighted_mean,
                      "use (tensor * episodes.mask).sum(0) / episodes.lengths, or "
                      "maml_rl.data.episodes.loss_weights for a loss"),
    "to_numpy": (lambda: to_numpy, "use tensor.detach().cpu().numpy()"),
    "vector_to_parameters": (_vector_to_parameters, "use torch.nn.utils.vector_to_parameters"),
}


def adapt(torch_utils: Any) -> None:
    """Serve :data:`MOVED`'s names from ``maml_rl.utils.torch_utils`` (which defines no ``__getattr__`` itself)."""
    torch_utils.__getattr__ = module_getattr(torch_utils.__name__, MOVED)
