"""The conditioning input of a rollout: numbers per task (or per slot) that the policy reads
after each observation, e.g. PEARL's latent z (``docs/sampler.md``, "Conditioning")."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from maml_rl.policies.recurrent import is_recurrent

from .workers.buffers import BufferSpec


def check_conditioning_size(size: Any, policy, spec: BufferSpec) -> int:
    """The sampler's ``conditioning_size`` argument, checked against the policy and the observations."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"conditioning_size must be an int >= 0, got {size!r}")
    if size and is_recurrent(policy):
        raise ValueError("conditioning_size: a recurrent policy carries what it has seen in its state; "
                         "conditioning inputs are for feed-forward policies")
    if size and len(spec.observation_shape) != 1:
        raise ValueError(f"conditioning_size: the conditioning is appended to flat observations, but this env's "
                         f"are of shape {spec.observation_shape}; flatten them (gymnasium's FlattenObservation)")
    return int(size)


def checked_conditioning(conditioning: Any, size: int, num_tasks: int, batch_size: int) -> Optional[np.ndarray]:
    """``conditioning`` as ``[K, B, size]`` float32: one row per task (``[K, size]``, the same for its
    slots) or per slot (``[K, B, size]``); ``None`` when the sampler has no conditioning."""
    if size == 0:
        if conditioning is not None:
            raise ValueError("conditioning= was given, but the sampler was built without conditioning_size: "
                             "build it with MultiTaskSampler(..., conditioning_size=d) for a policy that reads "
                             "d numbers after each observation")
        return None
    if conditioning is None:
        raise ValueError(f"this sampler's policy reads {size} conditioning numbers after each observation "
                         f"(conditioning_size={size}): pass conditioning= of shape [tasks, {size}] or "
                         f"[tasks, {batch_size}, {size}]")
    array = conditioning.detach().cpu().numpy() if torch.is_tensor(conditioning) else np.asarray(conditioning)
    if array.shape == (num_tasks, size):
        array = np.repeat(array[:, None, :], batch_size, axis=1)
    if array.shape != (num_tasks, batch_size, size):
        raise ValueError(f"conditioning has shape {array.shape}; {num_tasks} task(s) of {batch_size} slot(s) need "
                         f"[{num_tasks}, {size}] (one row per task) or [{num_tasks}, {batch_size}, {size}] (per slot)")
    if not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all():
        raise ValueError("conditioning must hold finite numbers")
    return np.ascontiguousarray(array, dtype=np.float32)
