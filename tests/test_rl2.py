"""RL²-PPO: train.py and test.py with ``algorithm: rl2-ppo``, exact resume, the
learner's refusals, and PPO's clipped objective against a hand computation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from maml_rl.metalearners import MAMLTRPO, RL2PPO
from maml_rl.policies import GRUPolicy, NormalMLPPolicy, rl2_input_size
from maml_rl.samplers import MultiTaskSampler

from conftest import write_small_config
from scripts import evaluate as test_script
from scripts import train

RL2 = {"algorithm": "rl2-ppo", "episodes-per-trial": 3, "gru-size": 8, "ppo-epochs": 2, "ppo-minibatches": 2,
       "bptt-chunk": 7, "gae-lambda": 0.95, "num-batches": 2}


def small_rl2_config(folder, **changes):
    config = {**RL2, **changes}
    path = write_small_config(folder, **config)
    # MAML's key is not one of RL²'s.
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("fast-lr"))
    path.write_text(text + "\n")
    return path


def run(config, output, *extra):
    return train.main(["--config", str(config), "--output-folder", str(output), "--num-workers", "0", *extra])


def read_metrics(folder):
    return [json.loads(line) for line in (Path(folder) / "metrics.jsonl").read_text().splitlines()]


def test_train_writes_the_adaptation_curve_and_resumes_exactly(tmp_path, capsys):
    config = small_rl2_config(tmp_path)
    run(config, tmp_path / "whole", "--seed", "3")
    run(config, tmp_path / "pieces", "--seed", "3", "--num-batches", "1")
    run(config, tmp_path / "pieces", "--resume", "--num-batches", "2")
    whole, pieces = read_metrics(tmp_path / "whole"), read_metrics(tmp_path / "pieces")
    assert [sorted(k for k in row if k.startswith("return_episode")) for row in whole] == \
        [["return_episode_0", "return_episode_1", "return_episode_2"]] * 2
    for a, b in zip(whole, pieces, strict=True):
        assert {k: v for k, v in a.items() if not k.startswith("time")} == \
            {k: v for k, v in b.items() if not k.startswith("time")}
    pa = torch.load(tmp_path / "whole" / "policy.th", weights_only=True)
    pb = torch.load(tmp_path / "pieces" / "policy.th", weights_only=True)
    assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)
    assert "gru.weight_hh_l0" in pa
    # 3 tasks x 4 trials x 3 episodes of 10 steps (2D navigation's episodes run to the horizon).
    assert whole[0]["env_steps"] == 3 * 4 * 3 * 10

    results = test_script.main(["--config", str(tmp_path / "whole" / "config.json"), "--meta-batch-size", "2",
                                "--num-workers", "0", "--eval-actions", "mean", "--evaluation-episodes", "2"])
    # Rows: the 3 episodes of the adaptation trial, then the evaluation episodes.
    assert results["returns_per_step"].shape == (4, 2)
    assert np.isfinite(results["returns_per_step"]).all()
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:4].strip().isdigit()]
    assert [row.partition("  (")[2] for row in rows] == \
        ["episode 0 of the trial)", "", "", "evaluation episodes, mean action)"]


def test_the_learners_refuse_the_other_family_of_policy():
    with pytest.raises(TypeError, match="recurrent policy.*GRUPolicy"):
        RL2PPO(NormalMLPPolicy(2, 2))
    with pytest.raises(TypeError, match="RL2PPO"):
        MAMLTRPO(GRUPolicy(6, 2, (8,), 4))


def test_a_step_on_mean_action_trials_is_refused():
    torch.manual_seed(0)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)
    learner = RL2PPO(policy, episodes_per_trial=2, epochs=1)
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 4}, 2, policy, seed=0, num_workers=0) as sampler:
        trials = sampler.rollout_trials(sampler.sample_tasks(2), 2, actions="mean")
    with pytest.raises(ValueError, match="mean actions"):
        learner.step(trials)


def test_trials_sampled_otherwise_than_the_learner_trains_are_refused():
    """The PPO ratios are exact only on the inputs the policy saw, from the state it started in."""
    torch.manual_seed(0)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)
    learner = RL2PPO(policy, episodes_per_trial=2, epochs=1, reward_scale=0.1, bptt_chunk=3)
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 4}, 2, policy, seed=0, num_workers=0) as sampler:
        tasks = sampler.sample_tasks(2)
        other_scale = sampler.rollout_trials(tasks, 2, chunk=3)  # reward_scale 1.0
        no_states = sampler.rollout_trials(tasks, 2, reward_scale=0.1)
        right = learner.sample(sampler, tasks, 0.9, "cpu")
    with pytest.raises(ValueError, match=r"reward_scale=1.0; this learner trains on RL²'s inputs with reward_scale=0.1"):
        learner.step(other_scale)
    with pytest.raises(ValueError, match="recorded no policy states"):
        learner.step(no_states)
    assert right[0].reward_scale == 0.1 and learner.step(right)["ppo_updates"] == 1


def test_the_first_epoch_starts_at_ratio_one_and_its_loss_is_the_hand_computed_surrogate():
    """Before any update the recomputed log-probs equal the behaviour ones (ratio 1), so
    the clipped surrogate is minus the masked mean advantage minus the entropy bonus."""
    torch.manual_seed(1)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)
    learner = RL2PPO(policy, episodes_per_trial=2, epochs=1, minibatches=1, entropy_coef=0.01, bptt_chunk=3,
                     normalize_advantages=False)
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 5}, 3, policy, seed=4, num_workers=0) as sampler:
        trials = sampler.rollout_trials(sampler.sample_tasks(2), 2, chunk=3)
    data = learner._prepare(trials)
    distribution, _ = policy.forward_trials(data["inputs"], data["state"][0], chunk=3)
    assert torch.allclose(distribution.log_prob(data["actions"]), data["log_probs"], atol=1e-5)
    mask = data["mask"]
    entropy = (distribution.entropy() * mask).sum() / mask.sum()
    expected = -(data["advantages"] * mask).sum() / mask.sum() - 0.01 * entropy
    logs = learner.step(trials)
    assert logs["loss"] == pytest.approx(expected.item(), rel=1e-4, abs=1e-5)
    assert logs["clip_fraction"] == 0.0 and abs(logs["approx_kl"]) < 1e-6


def _chunked_learner_and_trials(bptt_chunk, update_per_chunk, seed=2):
    torch.manual_seed(seed)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)
    learner = RL2PPO(policy, episodes_per_trial=2, epochs=2, minibatches=2, bptt_chunk=bptt_chunk,
                     update_per_chunk=update_per_chunk, normalize_advantages=False)
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 5}, 2, policy, seed=4, num_workers=0) as sampler:
        trials = sampler.rollout_trials(sampler.sample_tasks(2), 2, chunk=bptt_chunk)
    return policy, learner, trials


def test_an_update_per_chunk_steps_through_the_trial_carrying_the_state():
    """With update-per-chunk each BPTT chunk of a minibatch gets one Adam step, in order,
    and the state entering a chunk is where the policy *before that step* took the
    previous chunk: checked against the policy stepped one input at a time."""
    import copy

    policy, learner, trials = _chunked_learner_and_trials(bptt_chunk=4, update_per_chunk=True)
    data = learner._prepare(trials)
    calls, forward = [], policy.forward_trials

    def spy(inputs, state, chunk=None):
        calls.append((inputs.detach().clone(), state.detach().clone(), copy.deepcopy(policy)))
        return forward(inputs, state, chunk)

    policy.forward_trials = spy
    logs = learner.step(trials)
    # 2 tasks x 2 trials of 10 steps: 3 chunks of at most 4 steps, 2 minibatches, 2 epochs.
    assert logs["ppo_updates"] == 2 * 2 * 3 == len(calls)
    columns = []
    for k, (inputs, state, before) in enumerate(calls):
        lo = 4 * (k % 3)
        assert inputs.shape[0] == (4 if k % 3 < 2 else 2)
        # The chunk is steps lo.. of the minibatch's trials, the same trials in all its chunks.
        whole = data["inputs"][lo:lo + inputs.shape[0]]
        found = [next(j for j in range(whole.shape[1]) if torch.equal(inputs[:, i], whole[:, j]))
                 for i in range(inputs.shape[1])]
        columns.append(found)
        if k % 3 == 0:  # a minibatch's first chunk starts from the trials' initial state
            assert torch.equal(state, torch.zeros_like(state))
            continue
        assert found == columns[k - 1]
        # The previous chunk, one step at a time by the policy as it was before that chunk's step.
        previous_inputs, h, previous_policy = calls[k - 1]
        with torch.no_grad():
            for x in previous_inputs:
                _, h = previous_policy.step(x, h)
        torch.testing.assert_close(state, h, rtol=1e-5, atol=1e-6)
    assert sorted(columns[0] + columns[3]) == [0, 1, 2, 3]  # an epoch's minibatches cover every trial


def test_one_chunk_per_trial_makes_update_per_chunk_the_plain_update():
    outcomes = []
    for update_per_chunk in (False, True):
        policy, learner, trials = _chunked_learner_and_trials(bptt_chunk=50, update_per_chunk=update_per_chunk)
        logs = learner.step(trials)
        outcomes.append(({k: v for k, v in logs.items() if k != "time_update"},
                         {k: v.clone() for k, v in policy.state_dict().items()}))
    (logs_a, policy_a), (logs_b, policy_b) = outcomes
    assert logs_a == logs_b and logs_a["ppo_updates"] == 4
    assert all(torch.equal(policy_a[k], policy_b[k]) for k in policy_a)


@pytest.mark.parametrize("argument", ["epochs", "minibatches", "bptt_chunk", "episodes_per_trial"])
def test_learner_arguments_are_checked(argument):
    with pytest.raises(ValueError, match=f"{argument} must be an int >= 1, got 0"):
        RL2PPO(GRUPolicy(6, 2, (8,), 4), **{argument: 0})


def test_a_categorical_gru_samples_and_trains_on_a_discrete_env():
    """RL² on a bandit: the categorical head through the sampler's trials and one PPO step
    (the first epoch recomputes the behaviour log-probabilities exactly: ratio 1)."""
    import maml_rl.envs

    torch.manual_seed(0)
    env = maml_rl.envs.make_env("Bandit-K5-v0", max_episode_steps=4)()
    policy = RL2PPO.make_policy(env, {"hidden-sizes": [8], "gru-size": 4, "nonlinearity": "tanh"})
    assert policy.categorical and policy.input_size == 1 + 5 + 2
    learner = RL2PPO(policy, episodes_per_trial=2, epochs=1, bptt_chunk=3, normalize_advantages=False)
    with MultiTaskSampler("Bandit-K5-v0", {"max_episode_steps": 4}, 3, policy, seed=1, num_workers=0) as sampler:
        trials = learner.sample(sampler, sampler.sample_tasks(2), 0.9, "cpu")
    assert trials[0].actions.dtype == torch.int64 and set(trials[0].actions.unique().tolist()) <= set(range(5))
    data = learner._prepare(trials)
    distribution, _ = policy.forward_trials(data["inputs"], data["state"][0], chunk=3)
    assert ((distribution.log_prob(data["actions"]) - data["log_probs"]).abs() * data["mask"]).max() < 1e-5
    logs = learner.step(trials)
    assert logs["ppo_updates"] == 1 and abs(logs["approx_kl"]) < 1e-6 and logs["clip_fraction"] == 0.0
