"""Evaluation with the policy's most likely actions (``actions="mean"``).

The truth is the naive reference's plain loop taking ``loc`` (or the first of
the most probable categories) at every step, and hand-computed values for
the action rule itself. Such episodes must never reach a policy-gradient step.
"""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Beta, Categorical, Distribution, Independent, Normal

from maml_rl.metalearners.gradient.adaptation import InnerLoop
from maml_rl.data.baseline import LinearFeatureBaseline, fit_advantages
from maml_rl.samplers.rollout.noise import actions_from_noise
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers.differential import SHAPES, assert_equal_to, grouped_by_sampler
from helpers.differential_envs import factory
from helpers.naive_sampler import ElementwisePolicy, reference_rollout
from helpers.samplers import DRIFT_SEED

SEED = DRIFT_SEED


def test_mean_actions_by_hand():
    noise = torch.full((2, 2), 5.0)
    normal = Independent(Normal(torch.tensor([[1.0, -2.0], [0.5, 0.25]]), torch.ones(2, 2)), 1)
    assert actions_from_noise(normal, noise, 0, "mean").tolist() == [[1.0, -2.0], [0.5, 0.25]]
    assert actions_from_noise(normal, noise, 0).tolist() == [[6.0, 3.0], [5.5, 5.25]]  # loc + 1 * 5
    # [K, B] = [2, 1] batch shape, flattened like the sampled actions.
    stacked = Independent(Normal(torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]]), torch.ones(2, 1, 2)), 1)
    assert actions_from_noise(stacked, noise, 0, "mean").tolist() == [[1.0, 2.0], [3.0, 4.0]]
    # Categorical: the most probable category; ties go to the lowest index.
    categorical = Categorical(probs=torch.tensor([[0.2, 0.5, 0.3], [0.4, 0.2, 0.4], [0.1, 0.1, 0.8]]))
    assert actions_from_noise(categorical, torch.zeros(3), 0, "mean").tolist() == [1, 0, 2]
    # Another distribution: its own mean, 2 / (2 + 6) for Beta(2, 6).
    beta = Beta(torch.tensor([2.0]), torch.tensor([6.0]))
    assert actions_from_noise(beta, torch.zeros(1), 0, "mean").tolist() == [0.25]


def test_a_distribution_without_a_mean_is_refused():
    class NoMean(Distribution):
        arg_constraints = {}

        def __init__(self):
            super().__init__(torch.Size([1]), validate_args=False)

    with pytest.raises(ValueError, match="NoMean has no mean; use actions='sample'"):
        actions_from_noise(NoMean(), torch.zeros(1), 0, "mean")


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
@pytest.mark.parametrize("num_workers, partial, batched",
                         [(0, False, True), (2, False, True), (2, True, True), (0, False, False)],
                         ids=["in-process", "2-workers", "2-workers-partial", "task-by-task"])
def test_mean_rollouts_equal_the_naive_reference(discrete, num_workers, partial, batched, drift_sampler):
    """Every shape, alternating mean and sampled rollouts on one sampler: each
    call is its own reference's, whatever mode the calls before it used."""
    for (batch_size, horizon), shapes in grouped_by_sampler(SHAPES):
        sampler = drift_sampler(discrete, horizon, batch_size, batched, num_workers=num_workers, partial=partial)
        policy = sampler.policy
        with sampler:
            for call, (label, tasks, _, _) in enumerate(shapes + shapes):
                mode = "mean" if call % 2 == 0 else "sample"
                params = [policy.perturbed(0.1 * k) if k % 2 else None for k in range(len(tasks))]
                batches = sampler.rollout(tasks, params, actions=mode)
                reference = reference_rollout(factory(discrete, horizon), policy, tasks, batch_size, SEED, call,
                                              horizon, params, actions=mode)
                assert_equal_to(batches, reference, f"{label} ({mode})")
                assert all(batch.actions_from == mode for batch in batches)


def test_the_mean_reference_differs_from_the_sampled_one():
    """The harness would notice the noise being added (or not) in the wrong mode."""
    for discrete in (False, True):
        tasks = SHAPES[4][1]
        policy = ElementwisePolicy(3 if discrete else 2, discrete)
        env_fn = factory(discrete, 6)
        mean = reference_rollout(env_fn, policy, tasks, 3, SEED, 0, 6, actions="mean")
        sampled = reference_rollout(env_fn, policy, tasks, 3, SEED, 0, 6)
        assert any(not torch.equal(a["actions"], b["actions"]) for a, b in zip(mean, sampled))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_sample_adapts_on_sampled_episodes_and_evaluates_the_means(num_workers, drift_sampler):
    tasks = [{"offset": 0.2, "length": None}, {"offset": -0.5, "length": 1}]
    sampler = drift_sampler(False, 6, 3, num_workers=num_workers)
    policy = sampler.policy
    sampler.baseline = LinearFeatureBaseline(3)
    with sampler:
        train, valid = sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.3, valid_actions="mean")
    env_fn = factory(False, 6)
    assert all(batch.actions_from == "sample" for batch in train[0])
    assert_equal_to(train[0], reference_rollout(env_fn, policy, tasks, 3, SEED, 0, 6), "train")
    adapted = [batch.behaviour_params for batch in valid]
    assert_equal_to(valid, reference_rollout(env_fn, policy, tasks, 3, SEED, 1, 6, adapted, actions="mean"), "valid")
    assert all(batch.actions_from == "mean" for batch in valid)


def test_policy_gradient_steps_refuse_mean_action_episodes(drift_sampler):
    tasks = [{"offset": 0.2, "length": None}, {"offset": -0.5, "length": 3}]
    sampler = drift_sampler(False, 6, 3)
    baseline = LinearFeatureBaseline(3)
    inner_loop = InnerLoop(fast_lr=0.3, num_steps=1)
    with sampler:
        episodes = sampler.rollout(tasks, actions="mean")
        fit_advantages(episodes, baseline)
        with pytest.raises(ValueError, match=r"task\(s\) \[0, 1\] hold the policy's most likely actions"):
            inner_loop.task_batch(episodes)
        # One mean batch among sampled ones is enough to refuse.
        sampled = sampler.rollout(tasks)
        fit_advantages(sampled, baseline)
        with pytest.raises(ValueError, match=r"task\(s\) \[1\]"):
            inner_loop.task_batch([sampled[0], episodes[1]])
        inner_loop.task_batch(sampled)  # sampled episodes pass


def test_bad_action_modes_are_refused_before_any_work(drift_sampler):
    sampler = drift_sampler(False, 6, 3)
    with sampler:
        with pytest.raises(ValueError, match="actions='greedy': use 'sample'.*or 'mean'"):
            sampler.rollout([{"offset": 0.0, "length": 2}], actions="greedy")
        with pytest.raises(ValueError, match="actions='deterministic'"):
            sample_adapt_sample(sampler, [{"offset": 0.0, "length": 2}], num_steps=0, valid_actions="deterministic")
        assert sampler.state_dict()["num_rollouts"] == 0
