"""The sampler's own arguments are checked where they enter, with a message that says what is wrong: a
discount outside [0, 1], parameters that do not fit the policy, a state that is not the sampler's.

A refused call spends no seed: the next call gives what it would have given."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from maml_rl.policies import NormalMLPPolicy

from helpers.samplers import probe_sampler

TASKS = [{"value": 1.0, "length": 3}, {"value": -2.0, "length": 2}]


@pytest.fixture
def sampler():
    with probe_sampler(num_workers=0) as sampler:
        yield sampler


def rewards_and_actions(batches):
    return [(b.rewards.clone(), b.actions.clone()) for b in batches]


def twin_samplers(**kwargs):
    """Two samplers alike: the same seed, the same policy."""
    policy = NormalMLPPolicy(3, 1)
    return probe_sampler(policy=policy, num_workers=0, **kwargs), probe_sampler(policy=policy, num_workers=0, **kwargs)


def assert_same(a, b):
    assert all(torch.equal(x, y) for pair_a, pair_b in zip(a, b) for x, y in zip(pair_a, pair_b))


# ------------------------------------------------------------------------------------------------ gamma
@pytest.mark.parametrize("gamma, error", [(math.nan, ValueError), (5.0, ValueError), (-0.1, ValueError),
                                          (1.0 + 1e-9, ValueError), (math.inf, ValueError), ("0.9", TypeError),
                                          (True, TypeError), (None, TypeError), (torch.tensor(0.9), TypeError)])
def test_a_discount_outside_0_1_is_refused(sampler, gamma, error):
    """gamma=nan gave nan returns, gamma=5.0 returns of 1e308 and -inf, without a word."""
    with pytest.raises(error, match=r"gamma must be a number in \[0, 1\]"):
        sampler.rollout(TASKS, gamma=gamma)
    with pytest.raises(error, match=r"gamma must be a number in \[0, 1\]"):
        sampler.rollout_trials(TASKS, 2, gamma=gamma)


@pytest.mark.parametrize("gamma", [0, 0.0, 0.5, 1, 1.0, np.float32(0.9)])
def test_a_discount_in_0_1_gives_the_returns_by_hand(sampler, gamma):
    batch = sampler.rollout(TASKS, gamma=gamma)[0]
    rewards, lengths = batch.rewards[:, 0].double(), int(batch.lengths[0])
    expected = [sum(float(gamma) ** (j - t) * float(rewards[j]) for j in range(t, lengths)) for t in range(lengths)]
    assert batch.returns[:lengths, 0].double().tolist() == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_a_refused_discount_spends_no_seed():
    refused, plain = twin_samplers()
    with refused, plain:
        with pytest.raises(ValueError):
            refused.rollout(TASKS, gamma=math.nan)
        assert_same(rewards_and_actions(refused.rollout(TASKS)), rewards_and_actions(plain.rollout(TASKS)))


# ------------------------------------------------------------------------------------------------ params
def test_params_of_the_wrong_shape_are_named_with_the_expected_shape(sampler):
    """A raw torch RuntimeError ('The expanded size of the tensor (1) must match ...') before."""
    with pytest.raises(ValueError) as error:
        sampler.rollout(TASKS, {"mu.bias": torch.zeros(3)})
    assert ("params do not fit the policy NormalMLPPolicy: mu.bias is (3,) float32, expected (1,) float32 "
            "(its parameters: sigma (1,) float32, mu.weight (1, 3) float32, mu.bias (1,) float32)") == str(error.value)
    with pytest.raises(ValueError, match=r"mu.weight is \(3, 1\) float32, expected \(1, 3\) float32"):
        sampler.rollout(TASKS, [None, {"mu.weight": torch.zeros(3, 1)}])
    with pytest.raises(ValueError, match=r"mu.bias is \(1,\) float64, expected \(1,\) float32"):
        sampler.rollout(TASKS, {"mu.bias": torch.zeros(1, dtype=torch.float64)})


def test_params_that_are_not_tensors_are_named(sampler):
    with pytest.raises(TypeError, match=r"params\['mu.bias'\] is a ndarray, not a torch.Tensor"):
        sampler.rollout(TASKS, {"mu.bias": np.zeros(1, dtype=np.float32)})
    with pytest.raises(TypeError, match="params of task 1 is a int: give a dict"):
        sampler.rollout(TASKS, [None, 5])


def test_refused_params_spend_no_seed_and_fitting_ones_still_run():
    refused, plain = twin_samplers()
    with refused, plain:
        with pytest.raises(ValueError):
            refused.rollout(TASKS, {"mu.bias": torch.zeros(3)})
        fitting = {"mu.bias": torch.full((1,), 0.5)}
        assert_same(rewards_and_actions(refused.rollout(TASKS, fitting)),
                    rewards_and_actions(plain.rollout(TASKS, fitting)))


# ------------------------------------------------------------------------------------------------ state
def test_a_state_without_the_sampler_keys_is_named(sampler):
    """load_state_dict({}) raised KeyError: 'seed'."""
    before = sampler.state_dict()
    with pytest.raises(ValueError, match=r"the sampler state lacks 'seed', 'num_rollouts', 'task_rng' \(it has no "
                                         r"key\)"):
        sampler.load_state_dict({})
    with pytest.raises(ValueError, match=r"lacks 'task_rng' \(it has 'seed', 'num_rollouts'\)"):
        sampler.load_state_dict({"seed": 1, "num_rollouts": 0})
    with pytest.raises(TypeError, match="takes the dict of a sampler's state_dict"):
        sampler.load_state_dict([1, 2, 3])
    with pytest.raises(ValueError, match="'num_rollouts' must be an int >= 0, got -1"):
        sampler.load_state_dict({**before, "num_rollouts": -1})
    with pytest.raises(ValueError):  # numpy's own refusal of a state of another bit generator
        sampler.load_state_dict({**before, "seed": 7, "task_rng": {"bit_generator": "MT19937"}})
    assert sampler.state_dict()["seed"] == before["seed"]  # refused states changed nothing


def test_a_state_round_trip_continues_the_same_episodes():
    first, second = twin_samplers(seed=3)
    with first, second:
        second.load_state_dict({**second.state_dict(), "seed": 99})  # another run's sampler until it loads first's
        first.rollout(TASKS)
        second.load_state_dict(first.state_dict())
        assert first.sample_tasks(2) == second.sample_tasks(2)
        assert_same(rewards_and_actions(first.rollout(TASKS)), rewards_and_actions(second.rollout(TASKS)))
