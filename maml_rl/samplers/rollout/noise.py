"""Everything random in a rollout: reset seeds, action noise, and actions from noise.

Every seed and every noise value is a function of (seed, call, slot) only,
and all the noise of a call is drawn up front, indexed by (time step, slot):
so every action depends on the seed, the call, the step and the slot, not
on how many workers there are, which of them answered first, or which device
the policy runs on.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch
from torch.distributions import Categorical, Distribution, Independent, Normal, TransformedDistribution

from ..errors import PolicyOutputError
from .request import ActionMode


def slot_seeds(seed: int, call: int, num_slots: int) -> np.ndarray:
    """The reset seed of every slot of rollout ``call``."""
    return np.random.SeedSequence([seed, call]).generate_state(num_slots)


def trial_seeds(seed: int, call: int, num_slots: int, episodes: int) -> np.ndarray:
    """The reset seeds ``[S, episodes]`` of trials of ``episodes`` episodes:
    each slot's first is its :func:`slot_seeds` seed (so a trial of one
    episode is today's episode), the later ones a separate stream."""
    first = slot_seeds(seed, call, num_slots).astype(np.uint64)
    if episodes == 1:
        return first[:, None]
    later = np.random.SeedSequence([seed, call, 3]).generate_state(num_slots * (episodes - 1))
    return np.concatenate([first[:, None], later.reshape(num_slots, episodes - 1).astype(np.uint64)], axis=1)


def call_noise(seed: int, call: int, horizon: int, num_slots: int, action_shape: Sequence[int], discrete: bool) -> torch.Tensor:
    """The action noise ``[T, S, ...]`` of every slot of rollout ``call``."""
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, call, 1]).generate_state(1)[0]))
    return draw_noise(horizon, num_slots, action_shape, discrete, generator)


def fallback_seed(seed: int, call: int) -> int:
    """Seed of ``sample()`` for distributions other than Normal and Categorical."""
    return int(np.random.SeedSequence([seed, call, 2]).generate_state(1)[0])


def draw_noise(horizon: int, num_slots: int, action_shape: Sequence[int], discrete: bool, generator: torch.Generator) -> torch.Tensor:
    """Standard normal noise ``[T, S, *act]`` for continuous actions, or
    uniform noise ``[T, S]`` in [0, 1) for discrete ones."""
    if discrete:
        return torch.rand((horizon, num_slots), generator=generator)
    return torch.randn((horizon, num_slots, *action_shape), generator=generator)


def actions_from_noise(distribution: Distribution, noise: torch.Tensor, fallback_seed: Optional[int],
                       mode: ActionMode = ActionMode.SAMPLE) -> torch.Tensor:
    """Sample ``distribution`` (batch shape ``[N]`` or ``[K, B]``) with ``noise``.

    Normal policies use ``mean + std * noise``; categorical ones invert the
    CDF at the uniform noise (``-1`` for a row whose probabilities are not a
    distribution: non-finite, negative or all zero). The result is on the CPU, flattened to
    ``[N, *event_shape]``. Other distributions fall back to ``sample()``
    under the torch RNG seeded with ``fallback_seed``, whose draws depend on
    the rows of the call; ``fallback_seed=None`` (partial mode) refuses
    them with :class:`~maml_rl.samplers.errors.PolicyOutputError`. With ``mode="mean"`` the noise is ignored:
    the Normal's mean, the categorical's most probable action (the lowest
    index among ties), or another distribution's ``mean``.
    """
    base = distribution.base_dist if isinstance(distribution, Independent) else distribution
    mean = ActionMode(mode) is ActionMode.MEAN
    squashed = _squashed_normal(base)
    if squashed is not None:
        # A Normal through fixed transforms (SAC's tanh): the transforms of ``mean + std * noise``, or of the mean.
        normal, transforms = squashed
        loc = normal.loc.detach().cpu()
        actions = loc if mean else loc + normal.scale.detach().cpu() * noise.reshape(loc.shape)
        for transform in transforms:
            actions = transform(actions)
        return actions.reshape(-1, *distribution.event_shape)
    if isinstance(base, Normal):
        loc = base.loc.detach().cpu()
        event = loc.shape[-1:] if isinstance(distribution, Independent) else ()
        actions = loc if mean else loc + base.scale.detach().cpu() * noise.reshape(loc.shape)
        return actions.reshape(-1, *event)
    if isinstance(base, Categorical):
        probs = base.probs.detach().cpu()
        probs = probs.reshape(-1, probs.shape[-1])
        if mean:
            actions = probs.argmax(-1)
        else:
            # Divided by its last entry, the CDF ends at exactly 1 (x / x is exact): a
            # uniform draw in [0, 1) then never selects a category of probability 0,
            # as a float32 sum stopping just short of 1 could.
            cdf = probs.cumsum(-1)
            actions = (noise.reshape(-1, 1) >= cdf / cdf[:, -1:]).sum(-1)
        # Rows without a distribution get -1, which the rollout refuses before any env sees it.
        valid = torch.isfinite(probs).all(-1) & (probs >= 0).all(-1) & (probs.sum(-1) > 0)
        return actions if bool(valid.all()) else actions.masked_fill_(~valid, -1)
    if mean:
        try:
            actions = distribution.mean.detach().cpu()
        except NotImplementedError:
            raise ValueError(f"actions='mean': {type(distribution).__name__} has no mean; use actions='sample'") from None
        return actions.reshape(-1, *distribution.event_shape)
    if fallback_seed is None:
        raise PolicyOutputError(
            f"partial=True draws actions from the sampler's per-slot noise, which needs a Normal or Categorical "
            f"distribution (or actions='mean'); the policy returned {type(distribution).__name__}"
            f"({type(base).__name__}), which would be drawn with sample() over all slots at once, and those draws "
            "would depend on which workers happen to be ready. Use partial=False (lockstep), where the draws of a "
            "seed are the same on every run; no env was stepped with these actions")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fallback_seed)
        actions = distribution.sample().detach().cpu()
    return actions.reshape(-1, *distribution.event_shape)


def _squashed_normal(distribution: Distribution):
    """``(normal, transforms)`` for a ``TransformedDistribution`` of a Normal (or an ``Independent``
    Normal) through element-wise transforms, e.g. tanh; ``None`` for anything else."""
    if not isinstance(distribution, TransformedDistribution):
        return None
    inner = distribution.base_dist
    inner = inner.base_dist if isinstance(inner, Independent) else inner
    if not isinstance(inner, Normal) or any(t.domain.event_dim or t.codomain.event_dim
                                            for t in distribution.transforms):
        return None
    return inner, distribution.transforms
