"""Tensor helpers: masked means, discounted sums, distributions, flat vectors."""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Iterable, Mapping, Sequence

import numpy as np
import torch
from torch.distributions import Categorical, Distribution, Independent, Normal

# Above this horizon the discount matrix (T x T) would get large; fall back to a
# loop over time steps instead.
_MAX_MATRIX_HORIZON = 1024


def length_mask(lengths: torch.Tensor, horizon: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Time-major validity mask from episode lengths.

    :param lengths: integer tensor of any shape ``S`` (one length per episode).
    :param horizon: number of time steps ``T``.
    :param dtype: dtype of the returned mask.
    :return: tensor ``[T, *S]`` equal to 1 where ``t < length`` and 0 elsewhere.
    """
    steps = torch.arange(horizon, device=lengths.device).view(-1, *([1] * lengths.dim()))
    return (steps < lengths.unsqueeze(0)).to(dtype)


def mean_weights(
    mask: torch.Tensor,
    lengths: torch.Tensor | None = None,
    per_step: bool = False,
    dim: int | Sequence[int] | None = None,
) -> torch.Tensor:
    """Weights ``w`` such that ``(x * w).sum(dim)`` is a mean of ``x`` over the valid steps.

    With ``per_step`` every valid step weighs the same (rllab's and the MAML
    paper's code); otherwise every episode does, whatever its length: the mean
    of per-episode means (pytorch-maml-rl). They differ only when episodes have
    different lengths.

    :param mask: time-major validity mask ``[T, *S]``.
    :param lengths: episode lengths ``[*S]`` (default: ``mask.sum(0)``).
    :param per_step: weigh every valid step the same instead of every episode.
    :param dim: the time axis 0 and the episode axes averaged over (default: all);
        the weights sum to 1 over them for every index of the other axes.
    :return: tensor shaped like ``mask``.
    """
    dims = tuple(range(mask.dim())) if dim is None else tuple(d % mask.dim() for d in np.atleast_1d(dim))
    if 0 not in dims:
        raise ValueError(f"mean_weights averages over the time axis 0, got dim={dim!r}")
    if per_step:
        return mask / mask.sum(dim=dims, keepdim=True).clamp(min=1.0)
    counts = mask.sum(0) if lengths is None else lengths.to(mask.dtype)
    episodes = int(np.prod([mask.shape[d] for d in dims if d != 0]))
    return mask / (counts.clamp(min=1.0).unsqueeze(0) * episodes)


def weighted_normalize(
    tensor: torch.Tensor,
    lengths: torch.Tensor | Sequence[int] | None = None,
    mask: torch.Tensor | None = None,
    epsilon: float = 1e-8,
    per_step: bool = False,
) -> torch.Tensor:
    """Centre and scale a time-major tensor using only its valid entries.

    Mean and variance are weighted by :func:`mean_weights`: by default every
    episode weighs the same, whatever its length (pytorch-maml-rl); with
    ``per_step`` every valid step does (rllab's ``center_advantages``). Padded
    entries of the result are zero.

    :param tensor: time-major tensor ``[T, *S]``.
    :param lengths: episode lengths ``[*S]``.
    :param mask: validity mask ``[T, *S]`` (alternative to ``lengths``).
    :param epsilon: added to the standard deviation to avoid dividing by zero.
    :param per_step: weigh every valid step the same instead of every episode.
    :return: normalised tensor with the same shape.
    """
    if lengths is None and mask is None:
        return (tensor - tensor.mean()) / (tensor.std(unbiased=False) + epsilon)
    if lengths is not None:
        lengths = torch.as_tensor(lengths, device=tensor.device)
    if mask is None:
        mask = length_mask(lengths, tensor.shape[0], dtype=tensor.dtype)
    weights = mean_weights(mask, lengths, per_step=per_step)
    mean = (tensor * weights).sum()
    centred = (tensor - mean) * mask
    std = torch.sqrt((centred**2 * weights).sum())
    return centred / (std + epsilon)


@functools.lru_cache(maxsize=32)
def _discount_matrix(horizon: int, discount: float, dtype: torch.dtype, device: str) -> torch.Tensor:
    # D[t, s] = discount ** (s - t) for s >= t: row t of D @ x is the discounted
    # sum of x from t onwards. Powers are taken in float64 for accuracy.
    steps = torch.arange(horizon, dtype=torch.float64)
    exponents = (steps.view(1, -1) - steps.view(-1, 1)).clamp(min=0)
    matrix = torch.triu(torch.full_like(exponents, discount).pow(exponents))
    return matrix.to(dtype=dtype, device=device)


def discounted_cumsum(tensor: torch.Tensor, discount: float) -> torch.Tensor:
    """Discounted reward-to-go along the leading axis: ``y_t = x_t + discount * y_{t+1}``.

    Padded entries must already be zero so that sums do not leak across episodes.

    :param tensor: time-major tensor ``[T, ...]``.
    :param discount: per-step discount factor.
    :return: tensor of the same shape and dtype.
    """
    horizon = tensor.shape[0]
    if horizon == 0:
        return tensor.clone()
    if horizon <= _MAX_MATRIX_HORIZON:
        # One matrix product instead of T small tensor operations.
        matrix = _discount_matrix(horizon, float(discount), tensor.dtype, str(tensor.device))
        return (matrix @ tensor.reshape(horizon, -1)).view_as(tensor)
    out = torch.empty_like(tensor)
    running = torch.zeros_like(tensor[0])
    for t in range(horizon - 1, -1, -1):
        running = tensor[t] + discount * running
        out[t] = running
    return out


def gradient_step(
    loss: torch.Tensor,
    params: "Mapping[str, torch.Tensor]",
    step_size: float,
    first_order: bool = False,
) -> "OrderedDict[str, torch.Tensor]":
    """``p - step_size * d loss / d p`` for every tensor of ``params``.

    :param loss: scalar computed from ``params``.
    :param first_order: keep no graph through the gradient (no second derivatives later).
    :return: the stepped tensors, by name.
    """
    names = list(params.keys())
    tensors = [params[name] for name in names]
    grads = torch.autograd.grad(loss, tensors, create_graph=not first_order)
    return OrderedDict((name, p - step_size * g) for name, p, g in zip(names, tensors, grads))


def detach_distribution(pi: Distribution) -> Distribution:
    """Copy of a distribution whose parameters are cut from the autograd graph.

    :param pi: an ``Independent``, ``Normal`` or ``Categorical`` distribution.
    :return: the same distribution with detached parameters.
    """
    if isinstance(pi, Independent):
        return Independent(detach_distribution(pi.base_dist), pi.reinterpreted_batch_ndims)
    if isinstance(pi, Normal):
        return Normal(loc=pi.loc.detach(), scale=pi.scale.detach(), validate_args=False)
    if isinstance(pi, Categorical):
        return Categorical(logits=pi.logits.detach(), validate_args=False)
    raise NotImplementedError(
        f"detach_distribution supports Independent, Normal and Categorical, not {type(pi).__name__}"
    )


def distribution_tensors(pi: Distribution) -> list[torch.Tensor]:
    """The tensors a distribution is built from (``loc``/``scale`` or ``logits``).

    :param pi: an ``Independent``, ``Normal`` or ``Categorical`` distribution.
    """
    if isinstance(pi, Independent):
        return distribution_tensors(pi.base_dist)
    if isinstance(pi, Normal):
        return [pi.loc, pi.scale]
    if isinstance(pi, Categorical):
        return [pi.logits]
    raise NotImplementedError(
        f"distribution_tensors supports Independent, Normal and Categorical, not {type(pi).__name__}"
    )


def rebuild_distribution(pi: Distribution, tensors: Sequence[torch.Tensor]) -> Distribution:
    """A distribution of the same kind as ``pi`` built from new :func:`distribution_tensors`.

    :param pi: template distribution.
    :param tensors: replacement tensors, in the order :func:`distribution_tensors` gives them.
    """
    if isinstance(pi, Independent):
        return Independent(rebuild_distribution(pi.base_dist, tensors), pi.reinterpreted_batch_ndims)
    if isinstance(pi, Normal):
        return Normal(loc=tensors[0], scale=tensors[1], validate_args=False)
    if isinstance(pi, Categorical):
        return Categorical(logits=tensors[0], validate_args=False)
    raise NotImplementedError(
        f"rebuild_distribution supports Independent, Normal and Categorical, not {type(pi).__name__}"
    )


def flatten_tensors(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """Concatenate tensors into one flat vector (like ``parameters_to_vector``).

    :param tensors: tensors to flatten, in order.
    :return: 1-D tensor.
    """
    return torch.cat([t.reshape(-1) for t in tensors])


def unflatten_like(vector: torch.Tensor, like: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    """Split a flat vector back into views shaped like ``like``.

    :param vector: 1-D tensor with as many elements as ``like`` in total.
    :param like: tensors giving the target shapes, in order.
    :return: list of tensors (views of ``vector``).
    """
    out = []
    offset = 0
    for ref in like:
        n = ref.numel()
        out.append(vector[offset : offset + n].view_as(ref))
        offset += n
    if offset != vector.numel():
        raise ValueError(f"vector has {vector.numel()} elements, the shapes need {offset}")
    return out
