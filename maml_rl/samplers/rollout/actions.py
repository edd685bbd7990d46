"""The policy on every slot of a rollout, under each task's parameters."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import List, Optional

import numpy as np
import torch
from torch.distributions import Distribution

from maml_rl.policies.policy import expand_params, stack_params

from .noise import actions_from_noise
from .request import Params, RolloutRequest


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


class ActionFunction:
    """The policy, evaluated on every slot under each task's parameters.

    A task's actions never depend on which other tasks share the call (so a
    group of tasks on a Ray actor gets exactly the numbers of the whole call
    here): a policy that takes stacked parameters is always evaluated with
    one ``[K, B]`` batched product, each task its own matrix product of the
    same shape, even when all tasks share parameters. (One ``[K * B]``
    product would not do: torch computes a single row, ``K * B == 1``, with
    other arithmetic than the same row among others.) A policy that cannot
    take stacked parameters runs once over all slots when they share
    parameters, else once per task; with ``split_invariant`` always per task.

    :param request: the tasks' parameters, the action mode (with
        ``"mean"`` the noise is unused) and the index of the first task in
        the whole call (for the per-task fallback seeds).
    :param noise: ``[T, S, ...]`` noise of these tasks' slots.
    :param fallback: seed of ``sample()`` for other distributions.
    """

    def __init__(self, policy, request: RolloutRequest, device, noise: torch.Tensor, fallback: int,
                 split_invariant: bool = False):
        per_task: List[Optional[Params]] = list(request.per_task)
        self.policy = policy
        self.mode = request.actions
        self.device = torch.device(device)
        self.noise = noise
        self.fallback_seed = fallback
        self.first_task = request.first_task
        self.num_tasks, self.batch_size = len(per_task), request.batch_size
        # One of three ways to run the policy: the same parameters for every
        # slot in one call, stacked per-task parameters in one batched call,
        # or a loop over tasks for policies that cannot batch them.
        self.shared: Optional[Params] = None
        self.batched: Optional[Params] = None
        self.per_task: Optional[List[Optional[Params]]] = None
        same = all(p is per_task[0] for p in per_task)
        if getattr(policy, "supports_batched_params", False):
            own = None
            if any(p is None for p in per_task):
                own = OrderedDict((name, p.detach()) for name, p in policy.named_parameters())
            if same:
                self.batched = expand_params(own if per_task[0] is None else per_task[0], self.num_tasks)
            else:
                self.batched = stack_params([own if p is None else p for p in per_task])
        elif same and not split_invariant:
            self.shared = per_task[0]
        else:
            self.per_task = list(per_task)

    @torch.no_grad()
    def __call__(self, observations: np.ndarray, noise: torch.Tensor, t: int) -> np.ndarray:
        """Actions ``[S, *act]`` for ``observations`` ``[S, *obs]`` and ``noise`` ``[S, ...]``."""
        obs = torch.from_numpy(observations).to(self.device, torch.float32)
        seed = self.fallback_seed + t
        if self.batched is not None:
            obs = obs.view(self.num_tasks, self.batch_size, *obs.shape[1:])
            return actions_from_noise(self.policy(obs, params=self.batched), noise, seed, self.mode).numpy()
        if self.per_task is not None:
            B = self.batch_size
            parts = []
            for k, p in enumerate(self.per_task):
                distribution = self.policy(obs[k * B:(k + 1) * B]) if p is None else self.policy(obs[k * B:(k + 1) * B], params=p)
                parts.append(actions_from_noise(distribution, noise[k * B:(k + 1) * B], seed + self.first_task + k,
                                                self.mode))
            return torch.cat(parts).numpy()
        distribution = self.policy(obs) if self.shared is None else self.policy(obs, params=self.shared)
        return actions_from_noise(distribution, noise, seed, self.mode).numpy()


