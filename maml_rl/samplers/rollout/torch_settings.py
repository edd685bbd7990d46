"""Torch settings of the per-step policy calls of a rollout."""

from __future__ import annotations

import contextlib

import torch
from torch.distributions import Distribution

__all__ = ["rollout_torch_settings"]


@contextlib.contextmanager
def rollout_torch_settings():
    """Torch settings for the per-step policy calls, restored afterwards.

    The workers keep the other cores busy, so torch's intra-op threads would
    wait on each other far longer than the small per-step matmuls take (a
    4x5x64 bmm: 7.8 ms with 2 threads under load, 9 us with one). And the
    distributions are only read for their parameters, so validating their
    arguments at every step (half the cost of a policy call at 40 slots)
    buys nothing.
    """
    threads, validate = torch.get_num_threads(), Distribution._validate_args
    torch.set_num_threads(1)
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        Distribution.set_default_validate_args(validate)
