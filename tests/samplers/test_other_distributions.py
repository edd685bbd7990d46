"""A policy whose distribution is neither Normal nor Categorical (here ``Independent(Beta)``).

Its actions cannot come from the sampler's per-slot noise, so they are drawn
with ``sample()`` under a seed of (seed, call, step), over the rows of each
policy call. What is promised, and checked here on real worker processes:
in lockstep the same seed gives the same episodes on every run and with any
number of local workers; partial mode refuses such a policy (its draws would
depend on which workers are ready) before any env is stepped, unless the
actions are the distribution's mean.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributions import Beta, Independent

from maml_rl.samplers import MultiTaskSampler
from maml_rl.samplers.errors import PolicyOutputError

from helpers.differential_envs import factory
from helpers.samplers import drift_sampler

TASKS = [{"offset": 0.3, "length": None}, {"offset": -0.6, "length": 4}, {"offset": 0.1, "length": 9}]


class BetaPolicy(torch.nn.Module):
    """Actions in (0, 1)^2 whose concentrations depend on the observation."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(3, 4)

    def forward(self, observations, params=None):
        out = torch.nn.functional.softplus(self.linear(observations.reshape(-1, 3))) + 1.0
        return Independent(Beta(out[:, :2], out[:, 2:]), 1)


def actions(num_workers=0, partial=False, seed=5, mode="sample"):
    sampler = drift_sampler(False, 10, 4, policy=BetaPolicy(), seed=seed, num_workers=num_workers, partial=partial,
                            start_method="spawn")
    with sampler:
        # The steps each episode took (padding after its end is zero).
        return [batch.actions[batch.mask.bool()].numpy().copy() for batch in sampler.rollout(TASKS, actions=mode)]


def test_lockstep_draws_are_the_same_on_every_run_and_worker_count():
    first = actions(0)
    for again in (actions(0), actions(2)):
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a, b)
    # The draws are really random and seeded: another seed gives other actions, inside (0, 1).
    assert all((a > 0).all() and (a < 1).all() for a in first)
    assert not np.array_equal(first[0], actions(0, seed=6)[0])


def test_partial_mode_refuses_sampling_before_any_step():
    stepped = []

    def counting_env():
        env = factory(False, 10)()
        step = env.step
        env.step = lambda action: stepped.append(1) or step(action)
        return env

    sampler = MultiTaskSampler(None, None, 4, BetaPolicy(), None, env_fn=counting_env, seed=5, num_workers=0,
                               partial=True)
    with sampler, pytest.raises(PolicyOutputError, match=r"partial=True .* Independent\(Beta\).* partial=False"):
        sampler.rollout(TASKS)
    assert stepped == []


def test_partial_mode_takes_the_mean_of_any_distribution():
    for a, b in zip(actions(2, partial=True, mode="mean"), actions(0, mode="mean")):
        np.testing.assert_array_equal(a, b)
