"""The trial learners' learned critic (``critic: "gru"``): its advantages against a plain-loop GAE on its own values,
its regression on fixed returns, and checkpoints that do not match the run. Its resume, round trip and bits on two
workers are the learner contract's (the Transformer's tiny config uses it)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import yaml

from maml_rl.app.config_files import build_env, load_config
from maml_rl.metalearners import METALEARNERS, make_policy
from maml_rl.metalearners.transformer import TransformerPPO
from maml_rl.samplers import MultiTaskSampler

ALGORITHM = "transformer-ppo"


def _learner(tmp_path, **changes):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({**TransformerPPO.contract_config, "critic": "gru", "critic-size": 16, **changes}))
    config = load_config(path)
    torch.manual_seed(0)
    env = build_env(config)
    policy = make_policy(config, env)
    env.close()
    learner = METALEARNERS[ALGORITHM].from_config(policy, {**config, "seed": 3})
    return learner, policy, config


def _trials(learner, policy, tasks=2, seed=1):
    with MultiTaskSampler("2DNavigation-v0", {"low": -0.5, "high": 0.5, "max_episode_steps": 5}, 2, policy,
                          seed=seed) as sampler:
        return learner.sample(sampler, sampler.sample_tasks(tasks), 0.99)


def _naive_gae(rewards, values, mask, gamma, lam):
    """Plain loops over each trial, in float64: delta_t = r_t + gamma V_{t+1} - V_t, V after the end 0."""
    T, B = rewards.shape
    out = np.zeros((T, B))
    for b in range(B):
        following = 0.0
        for t in reversed(range(T)):
            if not mask[t, b]:
                continue
            after = values[t + 1, b] if t + 1 < T and mask[t + 1, b] else 0.0
            delta = rewards[t, b] + gamma * after - values[t, b]
            following = delta + gamma * lam * following
            out[t, b] = following
    return out


@pytest.mark.parametrize("normalize", [True, False])
def test_the_advantages_are_gae_on_the_critics_values_of_the_trial_so_far(tmp_path, normalize):
    learner, policy, _ = _learner(tmp_path, **{"normalize-advantages": normalize, "ppo-epochs": 1})
    learner.step(_trials(learner, policy, seed=5))  # the first step fixes the critic's origin and unit, and moves it
    assert float(learner.critic.scale) > 0
    trials = _trials(learner, policy)
    critic = copy.deepcopy(learner.critic)  # the values before this step moves it
    learner.step(trials)
    for batch in trials:
        inputs = batch.policy_inputs(learner.reward_scale)
        mask = batch.mask.numpy().astype(bool)
        # The critic reads the trial so far: each step's value from its own prefix, one trial at a time.
        values = np.zeros(mask.shape)
        with torch.no_grad():
            for b in range(mask.shape[1]):
                for t in range(mask.shape[0]):
                    values[t, b] = float(critic(inputs[:t + 1, b:b + 1])[-1, 0])
        expected = _naive_gae(batch.rewards.numpy().astype(np.float64), values, mask, batch.gamma,
                              learner.gae_lambda)
        if normalize:  # every valid step weighs the same, population deviation
            valid = expected[mask]
            expected = np.where(mask, (expected - valid.mean()) / (valid.std() + 1e-8), 0.0)
        np.testing.assert_allclose(batch.advantages.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_the_critic_regresses_on_the_returns(tmp_path):
    # lambda 1: the targets are the discounted returns, whatever the critic predicts, so its loss on them must fall.
    learner, policy, _ = _learner(tmp_path, **{"gae-lambda": 1.0, "ppo-epochs": 4, "ppo-minibatches": 1})
    trials = _trials(learner, policy, tasks=2)

    def loss():
        with torch.no_grad():
            return float(np.mean([learner.critic.loss(b.policy_inputs(learner.reward_scale), b.returns, b.mask)
                                  for b in trials]))

    learner.step(trials)  # fixes the critic's unit from these returns
    first = loss()
    assert float(learner.critic.scale) > 0
    for _ in range(30):
        logs = learner.step(trials)
        assert np.isfinite(logs["value_loss"])
    assert loss() < 0.5 * first


def test_one_step_of_one_task_with_one_trial(tmp_path):
    learner, policy, _ = _learner(tmp_path, **{"fast-batch-size": 1, "ppo-minibatches": 1})
    with MultiTaskSampler("2DNavigation-v0", {"low": -0.5, "high": 0.5, "max_episode_steps": 1}, 1, policy,
                          seed=0) as sampler:
        trials = learner.sample(sampler, sampler.sample_tasks(1), 0.99)
    assert len(trials) == 1 and trials[0].batch_size == 1
    logs = learner.step(trials)
    assert np.isfinite(logs["value_loss"]) and float(learner.critic.scale) > 0


def test_a_checkpoint_must_match_the_runs_critic(tmp_path):
    learner, policy, config = _learner(tmp_path)
    with_critic = learner.state_dict()
    assert set(with_critic) == {"optimizer", "num_updates", "critic", "critic_optimizer"}
    linear = METALEARNERS[ALGORITHM].from_config(policy, {**config, "seed": 3, "critic": "linear"})
    assert set(linear.state_dict()) == {"optimizer", "num_updates"}
    with pytest.raises(ValueError, match="saved with a learned critic"):
        linear.load_state_dict(with_critic)
    with pytest.raises(ValueError, match="saved without a learned critic"):
        learner.load_state_dict(linear.state_dict())


@pytest.mark.parametrize("algorithm", ["rl2-ppo", "transformer-ppo"])
def test_the_memory_check_counts_the_critic(algorithm, tmp_path):
    learner_class = METALEARNERS[algorithm]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(learner_class.contract_config))
    full = load_config(tmp_path / "c.yaml")  # every key, defaults filled in
    linear = learner_class.memory_needs(None, {**full, "critic": "linear"}, 2, 2, 5)
    gru = learner_class.memory_needs(None, {**full, "critic": "gru", "critic-size": 16}, 2, 2, 5)
    assert "the critic's activations" not in linear
    # A minibatch's trials (tasks x trials a task, over the minibatches, rounded up) of episodes x 5 steps, each
    # step 6 widths of 16 float32s: RL²'s 3 x 4 / 2 trials of 3 x 5 steps, the Transformer's 2 x 2 / 2 of 2 x 5.
    trials, steps = {"rl2-ppo": (6, 15), "transformer-ppo": (2, 10)}[algorithm]
    assert gru == {**linear, "the critic's activations": trials * steps * 6 * 16 * 4}
