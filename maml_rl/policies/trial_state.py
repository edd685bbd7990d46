"""The state a trial policy owns, handled through the policy so that its holder never knows its shape.

The sampler keeps one state for all the slots of a rollout, from ``policy.initial_state(n, device)`` on,
across the episodes of each trial, and hands each ``policy.step`` what the previous one returned. Beside
``step``, it needs three things of the state, which a policy may define as methods (a KV cache, a window of
inputs) and which otherwise work on a tensor ``[n, *state_shape]`` or on a tuple of such tensors:

* ``select_state(mask, new, old)``: rows ``mask`` from ``new``, the others from ``old`` (the slots that did
  not step keep their state; a reset slot takes the initial one);
* ``state_rows(state, rows, copy)``: the rows ``rows`` (a slice) alone, as one policy call on them needs;
* ``cat_states(states)``: those parts together again, in order.

A policy whose state is a function of the inputs it has seen sets ``state_is_inputs = True``: the sampler
then records no state (the learner rebuilds the whole trial from its inputs), a trial cannot continue from
another's recorded end, and ``state_bytes(n, steps)`` says what ``n`` rows' state holds after ``steps`` steps
(for the memory check). A tensor state's size is ``state_shape``'s.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

__all__ = ["cat_states", "records_state", "select_state", "state_bytes", "state_rows"]


def records_state(policy: Any) -> bool:
    """Whether the sampler records the policy's state (chunk starts, the end of a trial)."""
    return not bool(getattr(policy, "state_is_inputs", False))


def select_state(policy: Any, mask: torch.Tensor, new: Any, old: Any) -> Any:
    """Rows ``mask`` (``[n]`` bool) of ``new``, the others of ``old``; a tensor is taken as float32."""
    if hasattr(policy, "select_state"):
        return policy.select_state(mask, new, old)
    return _map2(lambda a, b: torch.where(mask.view(-1, *([1] * (b.dim() - 1))), a.to(torch.float32), b), new, old)


def state_rows(policy: Any, state: Any, rows: slice, copy: bool) -> Any:
    """Rows ``rows`` of ``state``; with ``copy`` in freshly allocated memory (a task's rows then sit as every
    other task's do, which the bits of a product may depend on)."""
    if hasattr(policy, "state_rows"):
        return policy.state_rows(state, rows, copy)
    return _map(lambda a: a[rows].clone() if copy else a[rows], state)


def cat_states(policy: Any, states: Sequence[Any]) -> Any:
    """The parts of :func:`state_rows` together again."""
    if hasattr(policy, "cat_states"):
        return policy.cat_states(states)
    first = states[0]
    if torch.is_tensor(first):
        return torch.cat(list(states))
    return type(first)(torch.cat(list(parts)) for parts in zip(*states))


def state_bytes(policy: Any, n: int, steps: int) -> int:
    """Bytes of ``n`` rows' state after ``steps`` steps: the policy's ``state_bytes`` or its ``state_shape``."""
    if hasattr(policy, "state_bytes"):
        return int(policy.state_bytes(n, steps))
    return 4 * n * int(math.prod(getattr(policy, "state_shape", ())))


def _map(fn, state):
    return fn(state) if torch.is_tensor(state) else type(state)(fn(a) for a in state)


def _map2(fn, a, b):
    return fn(a, b) if torch.is_tensor(a) else type(a)(fn(x, y) for x, y in zip(a, b))
