"""RL²-PPO: train.py's adaptation curve and test.py's trial with ``algorithm: rl2-ppo``, the learner's
refusals, and PPO's clipped objective against a hand computation (its exact resume: test_learner_contract.py)."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from maml_rl.metalearners import MAMLTRPO, RL2PPO
from maml_rl.policies import GRUPolicy, NormalMLPPolicy, rl2_input_size
from maml_rl.samplers import MultiTaskSampler

from helpers.runs import load_policy, read_metrics
from helpers.scripts import evaluate as test_script


def test_train_writes_the_adaptation_curve_and_test_py_labels_the_trial(reference_runs, tmp_path, capsys):
    """On the small RL² run (its resume, state and results' shape: test_learner_contract.py)."""
    folder = reference_runs("rl2-ppo")
    whole = read_metrics(folder)
    assert [sorted(k for k in row if k.startswith("return_episode")) for row in whole] == \
        [["return_episode_0", "return_episode_1", "return_episode_2"]] * 2
    assert "gru.weight_hh_l0" in load_policy(folder)
    # 3 tasks x 4 trials x 3 episodes of 10 steps (2D navigation's episodes run to the horizon).
    assert whole[0]["env_steps"] == 3 * 4 * 3 * 10

    capsys.readouterr()
    results = test_script.main(["--config", str(folder / "config.json"), "--meta-batch-size", "2",
                                "--num-workers", "0", "--eval-actions", "mean", "--evaluation-episodes", "2",
                                "--output", str(tmp_path / "results.npz")])
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
    with pytest.raises(ValueError, match=r"reward_scale=1.0; this learner trains on inputs='rl2' with reward_scale=0.1"):
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


def _learner_and_trials(tasks=2, trials_per_task=2, reward_scale=1.0, **learner):
    """A small GRU, an RL2PPO with ``learner``'s arguments over 2-episode trials of 5 steps, and its trials."""
    torch.manual_seed(2)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)
    learner = RL2PPO(policy, **{"episodes_per_trial": 2, "epochs": 2, "minibatches": 2,
                                "normalize_advantages": False, "reward_scale": reward_scale, **learner})
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 5}, trials_per_task, policy, seed=4,
                          num_workers=0) as sampler:
        trials = sampler.rollout_trials(sampler.sample_tasks(tasks), 2, chunk=learner.bptt_chunk,
                                        reward_scale=reward_scale)
    return policy, learner, trials


def test_an_update_per_chunk_steps_through_the_trial_carrying_the_state():
    """With update-per-chunk each BPTT chunk of a minibatch gets one Adam step, in order,
    and the state entering a chunk is where the policy *before that step* took the
    previous chunk: checked against the policy stepped one input at a time."""
    import copy

    policy, learner, trials = _learner_and_trials(bptt_chunk=4, update_per_chunk=True)
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
        policy, learner, trials = _learner_and_trials(bptt_chunk=50, update_per_chunk=update_per_chunk)
        logs = learner.step(trials)
        outcomes.append(({k: v for k, v in logs.items() if k != "time_update"},
                         {k: v.clone() for k, v in policy.state_dict().items()}))
    (logs_a, policy_a), (logs_b, policy_b) = outcomes
    assert logs_a == logs_b and logs_a["ppo_updates"] == 4
    assert all(torch.equal(policy_a[k], policy_b[k]) for k in policy_a)


@pytest.mark.parametrize("argument", ["epochs", "minibatches", "bptt_chunk", "episodes_per_trial"])
def test_learner_arguments_are_checked(argument):
    with pytest.raises(ValueError, match=f"{argument} must be an integer >= 1, got 0"):
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


def test_the_tanh_head_by_hand():
    """metaworld-algorithms' head: one linear layer to 2A outputs, tanh on all of them, the
    first A the mean, the last A the log-std; the Gaussian itself unsquashed."""
    torch.manual_seed(5)
    policy = GRUPolicy(6, 2, (8,), 4, head="tanh")
    inputs, state = torch.randn(3, 6), torch.randn(3, 4)
    with torch.no_grad():
        distribution, h = policy.step(inputs, state)
        out = (h @ policy.head.weight.T + policy.head.bias).tanh()
    mean, std = out[:, :2], out[:, 2:].exp()
    torch.testing.assert_close(distribution.mean, mean)
    torch.testing.assert_close(distribution.stddev, std)
    action = torch.tensor([[0.3, -2.0]] * 3)
    by_hand = (-0.5 * ((action - mean) / std) ** 2 - std.log() - 0.5 * np.log(2 * np.pi)).sum(-1)
    torch.testing.assert_close(distribution.log_prob(action), by_hand)
    assert not hasattr(policy, "sigma") and policy.head.out_features == 4
    with pytest.raises(ValueError, match="head must be one of 'linear', 'tanh', got 'squash'"):
        GRUPolicy(6, 2, head="squash")
    with pytest.raises(ValueError, match="categorical policy has a linear head"):
        GRUPolicy(6, 2, categorical=True, head="tanh")


def test_overlapping_chunks_restart_every_stride_from_the_state_reached_there():
    """bptt_overlap: chunks of bptt_chunk steps start every bptt_chunk - overlap steps; a shorter
    last chunk covers the tail; the state entering a chunk is where the previous chunk's policy
    (before that chunk's step) was after `stride` steps: checked one input at a time."""
    import copy

    policy, learner, trials = _learner_and_trials(bptt_chunk=4, bptt_overlap=2, update_per_chunk=True)
    data = learner._prepare(trials)
    calls, update = [], learner._update

    def spy(chunk, state, carry_after=None):
        calls.append((chunk["inputs"].clone(), state.detach().clone(), carry_after, copy.deepcopy(policy)))
        return update(chunk, state, carry_after)

    learner._update = spy
    logs = learner.step(trials)
    # Trials of 10 steps, stride 2: chunks [0, 4), [2, 6), [4, 8), [6, 10); 2 minibatches, 2 epochs.
    starts, lengths = [0, 2, 4, 6], [4, 4, 4, 4]
    assert logs["ppo_updates"] == 4 * 2 * 2 == len(calls)
    for k, (inputs, state, carry_after, before) in enumerate(calls):
        lo = starts[k % 4]
        assert inputs.shape[0] == lengths[k % 4] and carry_after == 2
        whole = data["inputs"][lo:lo + inputs.shape[0]]
        assert all(any(torch.equal(inputs[:, i], whole[:, j]) for j in range(whole.shape[1]))
                   for i in range(inputs.shape[1]))
        if k % 4 == 0:
            assert torch.equal(state, torch.zeros_like(state))
            continue
        previous_inputs, h, _, previous_policy = calls[k - 1]
        with torch.no_grad():
            for x in previous_inputs[:2]:
                _, h = previous_policy.step(x, h)
        torch.testing.assert_close(state, h, rtol=1e-5, atol=1e-6)


def test_an_overlap_whose_stride_does_not_divide_the_trial_ends_with_a_shorter_chunk():
    _, learner, trials = _learner_and_trials(tasks=1, trials_per_task=1, epochs=1, minibatches=1, bptt_chunk=4,
                                             bptt_overlap=1, update_per_chunk=True, normalize_advantages=True)
    lengths, update = [], learner._update
    learner._update = lambda chunk, state, carry_after=None: (lengths.append(chunk["inputs"].shape[0])
                                                             or update(chunk, state, carry_after))
    learner.step(trials)
    # 10 steps, stride 3: [0, 4), [3, 7), [6, 10); nothing left after the chunk that reached the end.
    assert lengths == [4, 4, 4]


@pytest.mark.parametrize(("changes", "message"), [
    ({"bptt_overlap": 4}, r"bptt_overlap \(4\) must be smaller than bptt_chunk \(4\)"),
    ({"bptt_overlap": -1}, "bptt_overlap must be an integer >= 0, got -1"),
    ({"bptt_overlap": 1, "update_per_chunk": False}, "bptt_overlap applies to the chunk updates"),
    ({"baseline_inputs": "actions"}, "baseline_inputs must be \"observations\" or \"policy-inputs\""),
    ({"seed": -3}, "seed must be an int >= 0"),
    ({"trial_inputs": "observations"}, "trial_inputs must be \"rl2\" or \"rl2-autoreset\""),
])
def test_the_recipe_arguments_are_checked(changes, message):
    with pytest.raises(ValueError, match=message):
        RL2PPO(GRUPolicy(6, 2, (8,), 4), **{"bptt_chunk": 4, "update_per_chunk": True, **changes})


def test_target_kl_stops_the_updates_once_one_moves_the_policy_past_it():
    """metaworld-algorithms' early stop: the first update starts at ratio one (KL 0), so a tiny target stops
    the iteration after the second; a target no update reaches changes nothing, bit for bit."""
    policy, learner, trials = _learner_and_trials(target_kl=1e-12)
    logs = learner.step(trials)
    assert logs["ppo_updates"] == 2 and logs["kl_stopped"] is True
    policy_b, free, trials_b = _learner_and_trials(target_kl=1e9)
    policy_c, plain, trials_c = _learner_and_trials()
    logs_b, logs_c = free.step(trials_b), plain.step(trials_c)
    assert logs_b["kl_stopped"] is False and "kl_stopped" not in logs_c
    assert logs_b["ppo_updates"] == logs_c["ppo_updates"] == 4  # 2 epochs x 2 minibatches
    for a, b in zip(policy_b.parameters(), policy_c.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="target_kl must be null or a number > 0"):
        RL2PPO(GRUPolicy(6, 2, (8,), 4), target_kl=0.0)


def test_the_baseline_on_policy_inputs_is_the_ridge_fit_of_their_features_and_gae_uses_it():
    """baseline_inputs='policy-inputs': values from a ridge regression of the trial's discounted
    returns on [x, x^2, t, t^2, t^3, 1] of the policy's input x (numpy here), then GAE over the
    whole trial with a zero value after its last step."""
    policy, learner, trials = _learner_and_trials(tasks=1, trials_per_task=3, reward_scale=0.5, bptt_chunk=4,
                                                  baseline_inputs="policy-inputs", gae_lambda=0.9)
    batch = trials[0]
    x = batch.policy_inputs(0.5).double().numpy()                      # [T, B, in]
    T, B = x.shape[:2]
    t = np.broadcast_to((np.arange(T) / 100.0)[:, None, None], (T, B, 1))
    features = np.concatenate([x, x ** 2, t, t ** 2, t ** 3, np.ones((T, B, 1))], -1).reshape(T * B, -1)
    rewards = batch.rewards.double().numpy()
    returns = np.zeros_like(rewards)
    running = np.zeros(B)
    for step in reversed(range(T)):
        running = rewards[step] + batch.gamma * running
        returns[step] = running
    weights = np.linalg.solve(features.T @ features + 1e-5 * np.eye(features.shape[1]),
                              features.T @ returns.reshape(-1))
    values = (features @ weights).reshape(T, B)
    advantages, gae = np.zeros_like(rewards), np.zeros(B)
    for step in reversed(range(T)):
        following = values[step + 1] if step + 1 < T else np.zeros(B)
        gae = rewards[step] + batch.gamma * following - values[step] + batch.gamma * 0.9 * gae
        advantages[step] = gae
    data = learner._prepare(trials)
    np.testing.assert_allclose(data["advantages"].numpy(), advantages, rtol=1e-4, atol=1e-4)
    # The observation-only baseline gives other values (the test would pass vacuously otherwise).
    plain = RL2PPO(policy, episodes_per_trial=2, bptt_chunk=4, normalize_advantages=False, reward_scale=0.5,
                   gae_lambda=0.9)._prepare(trials)["advantages"].numpy()
    assert np.abs(plain - advantages).max() > 1e-3


def test_the_run_seed_orders_the_minibatches():
    """The minibatch order is drawn from the run seed (and the update count): two seeds
    with the same trials and the same initial policy take different steps, one seed the same."""
    outcomes = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        policy, learner, trials = _learner_and_trials(bptt_chunk=10, seed=seed, normalize_advantages=True)
        learner.step(trials)
        outcomes[name] = torch.cat([p.detach().flatten() for p in policy.parameters()])
    assert torch.equal(outcomes["a"], outcomes["b"])
    assert not torch.equal(outcomes["a"], outcomes["c"])


def test_from_config_passes_the_run_seed_and_the_recipe(tmp_path, small_rl2_config):
    from maml_rl.app.config_files import build_env, load_config
    from maml_rl.metalearners import make_metalearner, make_policy

    config = load_config(small_rl2_config(tmp_path, **{"update-per-chunk": True, "bptt-overlap": 2,
                                                       "action-head": "tanh", "baseline-inputs": "policy-inputs",
                                                       "trial-inputs": "rl2-autoreset", "gru-init": "xavier"}))
    config["seed"] = 17
    env = build_env(config)
    policy = make_policy(config, env)
    learner = make_metalearner(config, policy)
    assert (learner.seed, learner.bptt_overlap, learner.baseline_inputs) == (17, 2, "policy-inputs")
    assert learner.trial_inputs == "rl2-autoreset"
    assert policy.head_type == "tanh"
    # xavier: each gate's block of the input weights and of the recurrent ones is initialised alone.
    assert not policy.gru.bias_ih_l0.any() and not policy.gru.bias_hh_l0.any()


def test_autoreset_inputs_reach_every_rollout_of_the_learner_and_other_trials_are_refused():
    """trial_inputs='rl2-autoreset': the learner samples, evaluates and trains on those inputs, and
    refuses trials sampled with RL²'s plain ones (the ratios would be of other inputs)."""
    torch.manual_seed(0)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)
    learner = RL2PPO(policy, episodes_per_trial=2, epochs=1, bptt_chunk=3, trial_inputs="rl2-autoreset")
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 4}, 2, policy, seed=0, num_workers=0) as sampler:
        tasks = sampler.sample_tasks(2)
        plain = sampler.rollout_trials(tasks, 2, chunk=3)
        right = learner.sample(sampler, tasks, 0.9, "cpu")
        calls = []
        rollout_trials = sampler.rollout_trials

        def spy(*args, **kwargs):
            calls.append(kwargs.get("inputs"))
            return rollout_trials(*args, **kwargs)

        sampler.rollout_trials = spy
        learner.evaluate(sampler, tasks, 0.9, "cpu", actions="mean", evaluation_episodes=2)
    assert calls == ["rl2-autoreset"] * 3  # the trial, then two evaluation episodes
    assert [b.inputs for b in right] == ["rl2-autoreset"] * 2
    with pytest.raises(ValueError, match=r"inputs='rl2'.*this learner trains on inputs='rl2-autoreset'"):
        learner.step(plain)
    assert learner.step(right)["ppo_updates"] == 1
