"""ProMP: the LVC inner objective against REINFORCE and against its Hessian
written out by hand, the clipped objective by hand, the meta-gradient against
a plain per-task loop, the refusals, the degenerate shapes, and what a run logs and checkpoints (its exact
resume: test_learner_contract.py)."""

from __future__ import annotations

import math
from collections import OrderedDict

import pytest
import torch
from torch.func import functional_call

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.metalearners.gradient.adaptation import InnerLoop, inner_step
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.data.episodes import TaskBatch
from maml_rl.metalearners.gradient.losses import clipped_surrogate_loss, inner_losses
from maml_rl.metalearners import ProMP, StaleEpisodesError
from maml_rl.metalearners.gradient.promp import adapt_kl_coefficient
from maml_rl.policies import CategoricalMLPPolicy, GRUPolicy, NormalMLPPolicy, expand_params
from maml_rl.samplers import MultiTaskSampler
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers.episodes import random_episodes
from helpers.runs import read_learner_state, read_metrics


def random_batch(num_tasks=3, rows=7, obs=2, discrete=None, generator=None, dtype=torch.float32):
    g = generator or torch.Generator().manual_seed(0)
    actions = (torch.randint(0, discrete, (num_tasks, rows), generator=g) if discrete
               else torch.randn(num_tasks, rows, 2, generator=g, dtype=dtype))
    weights = torch.rand(num_tasks, rows, generator=g, dtype=dtype)
    return TaskBatch(torch.randn(num_tasks, rows, obs, generator=g, dtype=dtype), actions,
                     torch.randn(num_tasks, rows, generator=g, dtype=dtype), weights / weights.sum(-1, keepdim=True))


@pytest.mark.parametrize("discrete", [None, 3])
def test_lvc_step_is_reinforce_step_at_the_behaviour_policy_bit_for_bit(discrete):
    torch.manual_seed(0)
    policy = CategoricalMLPPolicy(2, 3, hidden_sizes=(5,)) if discrete else NormalMLPPolicy(2, 2, hidden_sizes=(5,))
    batch = random_batch(discrete=discrete)
    params = expand_params(OrderedDict(policy.named_parameters()), batch.num_tasks)
    reinforce = inner_step(policy, batch, params, 0.3, objective="reinforce")
    lvc = inner_step(policy, batch, params, 0.3, objective="lvc")
    with torch.no_grad():
        old = policy(batch.observations, params=params).log_prob(batch.actions)
    lvc_given = inner_step(policy, batch, params, 0.3, objective="lvc", old_log_probs=old)
    for name in reinforce:
        assert torch.equal(reinforce[name], lvc[name]) and torch.equal(reinforce[name], lvc_given[name]), name
    # Its value is -E[A] there (the ratio is 1), REINFORCE's is -E[log pi A].
    torch.testing.assert_close(inner_losses(policy, batch, params, "lvc"),
                               -(batch.advantages * batch.weights).sum(-1), rtol=0, atol=1e-7)


def test_lvc_curvature_is_reinforces_plus_the_score_outer_product():
    """At the behaviour policy the LVC Hessian is -E[A (hess log pi + grad log pi grad log pi^T)]:
    written out with autograd's Hessian and Jacobian of log pi, and checked by finite differences."""
    torch.manual_seed(1)
    policy = NormalMLPPolicy(2, 1, hidden_sizes=(3,)).double()
    batch = random_batch(num_tasks=1, rows=5, dtype=torch.float64)
    batch = batch._replace(actions=batch.actions[..., :1])
    names = [name for name, _ in policy.named_parameters()]
    shapes = [p.shape for _, p in policy.named_parameters()]
    theta0 = torch.cat([p.detach().reshape(-1) for _, p in policy.named_parameters()])

    def unflat(vector):
        out, offset = OrderedDict(), 0
        for name, shape in zip(names, shapes):
            n = math.prod(shape)
            out[name] = vector[offset:offset + n].view(1, *shape)
            offset += n
        return out

    def log_probs(vector):
        return policy(batch.observations, params=unflat(vector)).log_prob(batch.actions)[0]

    old = log_probs(theta0).detach().unsqueeze(0)

    def lvc(vector):
        return inner_losses(policy, batch, unflat(vector), "lvc", old).sum()

    c = (batch.advantages * batch.weights)[0]
    hessian_reinforce = -torch.autograd.functional.hessian(lambda v: (c * log_probs(v)).sum(), theta0)
    scores = torch.autograd.functional.jacobian(log_probs, theta0)  # [rows, P]
    truth = hessian_reinforce - (c[:, None, None] * scores[:, :, None] * scores[:, None, :]).sum(0)

    v = torch.randn(theta0.numel(), dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    theta = theta0.clone().requires_grad_()
    (grad,) = torch.autograd.grad(lvc(theta), theta, create_graph=True)
    (hvp,) = torch.autograd.grad(grad @ v, theta)
    torch.testing.assert_close(hvp, truth @ v, rtol=1e-10, atol=1e-12)
    eps = 1e-6
    plus, minus = (torch.autograd.functional.jacobian(lvc, theta0 + s * eps * v) for s in (1, -1))
    torch.testing.assert_close(hvp, (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-7)
    assert (truth - hessian_reinforce).abs().max() > 1e-3  # the outer-product term is really there


def test_clipped_objective_by_hand():
    log_ratio = torch.log(torch.tensor([[0.5, 1.0, 1.5, 1.5, 0.5, 1.2]]))
    advantages = torch.tensor([[1.0, -1.0, 1.0, -1.0, -1.0, 2.0]])
    weights = torch.full((1, 6), 1 / 6)
    # min(rA, clip(r, 0.7, 1.3) A): 0.5, -1, 1.3, -1.5, -0.7, 2.4
    expected = -(0.5 - 1.0 + 1.3 - 1.5 - 0.7 + 2.4) / 6
    torch.testing.assert_close(clipped_surrogate_loss(log_ratio, advantages, weights, 0.3),
                               torch.tensor([expected]), rtol=1e-6, atol=1e-7)


def test_adaptive_kl_rule_by_hand():
    assert adapt_kl_coefficient(1.0, 0.001, 0.01) == 0.5  # below 0.01 / 1.5
    assert adapt_kl_coefficient(1.0, 0.02, 0.01) == 2.0   # above 0.015
    assert adapt_kl_coefficient(1.0, 0.01, 0.01) == 1.0
    assert adapt_kl_coefficient(1.0, 0.01 / 1.5, 0.01) == 1.0


def naive_promp_objective(policy, train, valid, fast_lr, clip):
    """ProMP's first-epoch objective written per task with plain autograd (on-policy episodes, no KL:
    at the behaviour policy the KL term's value and gradient are 0)."""
    theta = OrderedDict(policy.named_parameters())
    losses = []
    for task_train, task_valid in zip(train, valid):
        mask = task_train.mask
        weights = mask / mask.sum()
        pi = functional_call(policy, theta, (task_train.observations,))
        lp = pi.log_prob(task_train.actions)
        inner = -(torch.exp(lp - lp.detach()) * task_train.advantages * weights).sum()
        grads = torch.autograd.grad(inner, list(theta.values()), create_graph=True)
        adapted = OrderedDict((name, p - fast_lr * g) for (name, p), g in zip(theta.items(), grads))
        pi_valid = functional_call(policy, adapted, (task_valid.observations,))
        lp_valid = pi_valid.log_prob(task_valid.actions)
        ratio = torch.exp(lp_valid - lp_valid.detach())
        adv = task_valid.advantages
        clipped = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
        valid_weights = task_valid.mask / task_valid.mask.sum()
        losses.append(-(clipped * valid_weights).sum())
    return sum(losses) / len(losses)


def test_first_meta_gradient_equals_a_plain_per_task_loop():
    torch.manual_seed(3)
    policy = NormalMLPPolicy(2, 2, hidden_sizes=(6, 6))
    # Random data with ragged lengths, advantages from the linear baseline.
    train, valid = (random_episodes(3, 4, 5, seed, observation_size=2, action_size=2) for seed in (1, 2))
    expected = torch.autograd.grad(naive_promp_objective(policy, train, valid, 0.2, 0.3), list(policy.parameters()))
    learner = ProMP(policy, fast_lr=0.2, outer_steps=1, inner_kl_coef=0.7)
    learner.step([train], valid)
    # After one Adam step each parameter's .grad holds the gradient it stepped with.
    for p, g in zip(policy.parameters(), expected):
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)


@pytest.fixture(scope="module")
def sampled():
    """On-policy episodes of 3 navigation tasks, sampled through ProMP's inner loop, and the policy's state."""
    torch.manual_seed(0)
    policy = NormalMLPPolicy(2, 2, hidden_sizes=(8,))
    learner = ProMP(policy, fast_lr=0.3)
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 12}, 4, policy, LinearFeatureBaseline(2), seed=4,
                          num_workers=0) as sampler:
        tasks = sampler.sample_tasks(3)
        train, valid = sample_adapt_sample(sampler, tasks, inner_loop=learner.inner_loop, gamma=0.99)
        _, mean_valid = sample_adapt_sample(sampler, tasks, inner_loop=learner.inner_loop, gamma=0.99, valid_actions="mean")
    return policy.state_dict(), train, valid, mean_valid


def learner_at(state, fast_lr=0.3, **kwargs):
    policy = NormalMLPPolicy(2, 2, hidden_sizes=(8,))
    policy.load_state_dict(state)
    return ProMP(policy, fast_lr=fast_lr, **kwargs)


def test_a_step_on_sampled_episodes_then_the_refusals(sampled):
    state, train, valid, mean_valid = sampled
    learner = learner_at(state)
    logs = learner.step(train, valid)
    assert set(logs) == {"loss_before", "loss_after", "inner_kl", "inner_kl_coef", "outer_kl", "clip_fraction",
                         "outer_steps", "outer_step_scale", "time_update"}
    assert logs["outer_steps"] == 5
    assert all(math.isfinite(v) for v in logs.values())
    assert abs(logs["loss_before"]) < 1e-6  # the ratio is 1 and the advantages are centred at the first step
    assert logs["loss_after"] < logs["loss_before"] and logs["inner_kl"] > 0 and logs["outer_kl"] > 0
    assert not torch.equal(learner.policy.state_dict()["sigma"], state["sigma"])
    with pytest.raises(StaleEpisodesError, match="each batch serves one update"):
        learner.step(train, valid)
    with pytest.raises(StaleEpisodesError, match=r"valid_episodes.*inner loop"):
        learner_at(state, fast_lr=0.2).step(train, valid)
    with pytest.raises(ValueError, match="most likely actions"):
        learner_at(state).step(train, mean_valid)
    with pytest.raises(ValueError, match=r"ProMP\(policy, num_steps=\.\.\.\)"):
        learner_at(state, num_steps=2).step(train, valid)


def test_the_same_step_twice_gives_the_same_bits_and_adapt_matches_the_sampler(sampled):
    state, train, valid, _ = sampled
    first, second = learner_at(state), learner_at(state)
    a, b = first.step(train, valid), second.step(train, valid)
    assert {k: v for k, v in a.items() if k != "time_update"} == {k: v for k, v in b.items() if k != "time_update"}
    for name, p in first.policy.state_dict().items():
        assert torch.equal(p, second.policy.state_dict()[name])
    adapted = learner_at(state).adapt(train, first_order=True)
    for name, p in adapted.items():
        assert torch.equal(p, torch.stack([episodes.behaviour_params[name] for episodes in valid])), name


def _stepped(state, train, valid, **kwargs):
    """A learner from ``state`` after one step: its policy, Adam's moments (what the next step starts from), logs."""
    learner = learner_at(state, **kwargs)
    logs = learner.step(train, valid)
    return learner.policy.state_dict(), learner.optimizer.state_dict()["state"], logs


def _assert_same_moments(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert all(torch.equal(a[k][m], b[k][m]) for m in ("step", "exp_avg", "exp_avg_sq"))


def _assert_same_state(a, b):
    assert a[0].keys() == b[0].keys() and all(torch.equal(a[0][k], b[0][k]) for k in a[0])
    _assert_same_moments(a[1], b[1])


def test_outer_kl_limit_undoes_the_step_that_exceeds_it(sampled):
    state, train, valid, _ = sampled
    # The KL of the adapted policies after 2 and after 3 Adam steps, with no limit.
    kl = {n: learner_at(state, outer_steps=n).step(train, valid)["outer_kl"] for n in (2, 3)}
    assert 0 < kl[2] < kl[3]
    # A limit between them stops after 2 steps: the same bits (policy, Adam's moments) as outer_steps=2.
    limited = _stepped(state, train, valid, outer_kl_limit=(kl[2] + kl[3]) / 2)
    two = _stepped(state, train, valid, outer_steps=2)
    assert limited[2]["outer_steps"] == 2 and two[2]["outer_steps"] == 2
    assert limited[2]["outer_kl"] == kl[2] and limited[2]["loss_after"] == two[2]["loss_after"]
    _assert_same_state(limited, two)
    # A limit no step reaches changes nothing.
    _assert_same_state(_stepped(state, train, valid, outer_kl_limit=1e9), _stepped(state, train, valid))


def test_outer_kl_limit_below_the_first_step_keeps_the_policy_and_the_moments(sampled):
    state, train, valid, _ = sampled
    learner = learner_at(state, outer_kl_limit=1e-12)
    logs = learner.step(train, valid)
    assert logs["outer_steps"] == 0 and logs["outer_kl"] < 1e-12 and logs["clip_fraction"] == 0
    assert all(torch.equal(v, state[k]) for k, v in learner.policy.state_dict().items())
    assert learner.optimizer.state_dict()["state"] == {}
    assert all(math.isfinite(v) for v in logs.values())
    # The episodes are still those of the current policy: a second call in a row steps on them again.
    assert learner.step(train, valid)["outer_steps"] == 0
    with pytest.raises(ValueError, match="outer_kl_limit"):
        learner_at(state, outer_kl_limit=0.0)
    with pytest.raises(ValueError, match="outer_kl_limit"):
        learner_at(state, outer_kl_limit=float("nan"))


def test_outer_kl_backtracks_keep_the_first_halved_step_within_the_limit(sampled):
    state, train, valid, _ = sampled
    # The first Adam step with no limit: where it goes, its moments, and how far it moves the adapted policies.
    full = _stepped(state, train, valid, outer_steps=1)
    limit = full[2]["outer_kl"] / 5  # below the full step: some halving is needed
    policy, moments, logs = _stepped(state, train, valid, outer_kl_limit=limit, outer_kl_backtracks=12)
    j = round(-math.log2(logs["outer_step_scale"]))
    assert 1 <= j <= 12 and logs["outer_step_scale"] == 0.5 ** j and logs["outer_steps"] == 1
    assert logs["outer_kl"] <= limit
    # By hand: the parameters are the start plus 0.5**j of the full step's move; Adam's moments are the full step's.
    for name, value in policy.items():
        assert torch.equal(value, state[name] + 0.5 ** j * (full[0][name] - state[name])), name
    _assert_same_moments(moments, full[1])
    # j is the first halving within the limit: with j - 1 backtracks the step is undone, moments and all.
    policy, moments, logs = _stepped(state, train, valid, outer_kl_limit=limit, outer_kl_backtracks=j - 1)
    assert logs["outer_steps"] == 0 and logs["outer_step_scale"] == 0.0 and moments == {}
    assert all(torch.equal(v, state[k]) for k, v in policy.items())


def test_outer_kl_backtracks_after_steps_within_the_limit_and_their_misuse(sampled):
    state, train, valid, _ = sampled
    kl = {n: learner_at(state, outer_steps=n).step(train, valid)["outer_kl"] for n in (2, 3)}
    limited = _stepped(state, train, valid, outer_kl_limit=(kl[2] + kl[3]) / 2, outer_kl_backtracks=8)
    # Two whole steps, then the third halved until within the limit, and no fourth.
    assert limited[2]["outer_steps"] == 3 and 0 < limited[2]["outer_step_scale"] < 1
    assert limited[2]["outer_kl"] <= (kl[2] + kl[3]) / 2
    _assert_same_moments(limited[1], _stepped(state, train, valid, outer_steps=3)[1])  # the third step's kept
    # Without a limit the backtracks have nothing to shorten; with no step over it they change nothing.
    _assert_same_state(_stepped(state, train, valid, outer_kl_limit=1e9, outer_kl_backtracks=5),
                       _stepped(state, train, valid))
    assert _stepped(state, train, valid)[2]["outer_step_scale"] == 1.0
    with pytest.raises(ValueError, match="set outer-kl-limit too"):
        learner_at(state, outer_kl_backtracks=3)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="outer_kl_backtracks must be an integer >= 0"):
            learner_at(state, outer_kl_limit=0.1, outer_kl_backtracks=bad)


def test_adaptive_coefficient_follows_the_inner_kl(sampled):
    state, train, valid, _ = sampled
    learner = learner_at(state, adaptive_inner_kl=True, inner_kl_coef=1.0, inner_kl_target=1e9)
    logs = learner.step(train, valid)
    assert logs["inner_kl_coef"] == 1.0 and learner.inner_kl_coefs == [0.5]
    fixed = learner_at(state, inner_kl_coef=1.0)
    fixed.step(train, valid)
    assert fixed.inner_kl_coefs == [1.0]


@pytest.mark.parametrize("num_steps", [1, 2])
def test_degenerate_shapes_one_task_one_episode_horizon_one(num_steps):
    torch.manual_seed(0)
    policy = CategoricalMLPPolicy(1, 5, hidden_sizes=(4,))
    learner = ProMP(policy, fast_lr=0.5, num_steps=num_steps)
    with MultiTaskSampler("Bandit-K5-v0", {}, 1, policy, LinearFeatureBaseline(1), seed=0, num_workers=0) as sampler:
        train, valid = sample_adapt_sample(sampler, sampler.sample_tasks(1), inner_loop=learner.inner_loop)
        assert len(valid[0]) == 1 and valid[0].batch_size == 1
        logs = learner.step(train, valid)
        assert all(math.isfinite(v) for v in logs.values())
        train, valid = sample_adapt_sample(sampler, sampler.sample_tasks(1), inner_loop=learner.inner_loop)
        learner.step(train, valid)  # a second call in a row, on new episodes


def test_recurrent_and_unstackable_policies_are_refused():
    with pytest.raises(TypeError, match="RL2PPO"):
        ProMP(GRUPolicy(6, 2, (8,), 4))
    with pytest.raises(ValueError, match="outer_clip"):
        ProMP(NormalMLPPolicy(2, 2), outer_clip=0.0)
    with pytest.raises(ValueError, match="num_steps"):
        ProMP(NormalMLPPolicy(2, 2), num_steps=0)
    with pytest.raises(ValueError, match="objective must be one of"):
        InnerLoop(objective="dice")


def test_train_py_logs_both_kls_and_checkpoints_adams_moments(reference_runs):
    """On the small ProMP run (its exact resume and test.py's results: test_learner_contract.py)."""
    folder = reference_runs("promp")
    whole = read_metrics(folder)
    assert len(whole) == 3 and "inner_kl" in whole[0] and "outer_kl" in whole[0]
    # Resuming without Adam's moments would differ: the checkpoint carries them.
    state = read_learner_state(folder)
    assert state["num_updates"] == 3 and state["optimizer"]["state"]
