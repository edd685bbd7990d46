"""MAML-TRPO: batched inner loop, meta-gradients, KL Hessian products and the TRPO step."""

from __future__ import annotations

import functools
import inspect
import math
from collections import OrderedDict

import pytest
import torch
from torch.distributions import kl_divergence

from maml_rl.metalearners.gradient.losses import reinforce_loss
from maml_rl.metalearners import MAMLTRPO
from maml_rl.policies import CategoricalMLPPolicy, NormalMLPPolicy
from maml_rl.utils.torch_utils import detach_distribution, flatten_tensors, unflatten_like

from helpers.episodes import random_episodes

OBS_DIM, ACT_DIM, NUM_ACTIONS = 3, 2, 3


def make_policy(discrete: bool = False, seed: int = 0):
    torch.manual_seed(seed)
    if discrete:
        return CategoricalMLPPolicy(OBS_DIM, NUM_ACTIONS, hidden_sizes=(5,))
    return NormalMLPPolicy(OBS_DIM, ACT_DIM, hidden_sizes=(5,), init_std=0.8)


def problem(discrete: bool = False, num_steps: int = 1, num_tasks: int = 3):
    policy = make_policy(discrete)
    # Valid random episodes with varying lengths, actions sampled from the policy.
    episodes = functools.partial(random_episodes, num_tasks, 4, 6, observation_size=OBS_DIM, policy=policy,
                                 min_length=2, masked=True, numbered_tasks=True, gamma=0.9, gae_lambda=0.95)
    train = [episodes(seed=10 + step) for step in range(num_steps)]
    valid = episodes(seed=99)
    return policy, train, valid


def step_mean(values, episodes):
    """Mean over all valid steps of one task's episodes."""
    return (values * episodes.mask).sum() / episodes.mask.sum()


def episode_mean(values, episodes):
    """Mean of one task's per-episode means (pytorch-maml-rl's averaging)."""
    return ((values * episodes.mask).sum(0) / episodes.lengths).mean()


def adapt_single(policy, task_train, params, fast_lr, first_order, mean=None):
    """Reference inner loop for one task, without any batching (``mean`` writes the loss by hand)."""
    for episodes in task_train:
        if mean is None:
            loss = reinforce_loss(policy, episodes, params=params)
        else:
            pi = policy(episodes.observations, params=params)
            loss = -mean(pi.log_prob(episodes.actions) * episodes.advantages, episodes)
        params = policy.update_params(loss, params=params, step_size=fast_lr, first_order=first_order)
    return params


def per_task_objectives(policy, train, valid, fast_lr, first_order=False, mean=None):
    """Mean post-adaptation surrogate loss and KL as functions of a flat parameter vector."""
    names = [name for name, _ in policy.named_meta_parameters()]
    refs = [p.detach() for _, p in policy.named_meta_parameters()]
    num_tasks = len(valid)

    def distributions(flat):
        params = OrderedDict(zip(names, unflatten_like(flat, refs)))
        for k in range(num_tasks):
            adapted = adapt_single(policy, [step[k] for step in train], params, fast_lr, first_order, mean)
            yield k, policy(valid[k].observations, params=adapted)

    flat0 = flatten_tensors(refs)
    old = {k: detach_distribution(pi) for k, pi in distributions(flat0.clone().requires_grad_())}

    def loss(flat):
        total = 0.0
        for k, pi in distributions(flat):
            ratio = torch.exp(pi.log_prob(valid[k].actions) - old[k].log_prob(valid[k].actions))
            total = total - (mean or step_mean)(ratio * valid[k].advantages, valid[k])
        return total / num_tasks

    def kl(flat):
        total = 0.0
        for k, pi in distributions(flat):
            total = total + (mean or step_mean)(kl_divergence(old[k], pi), valid[k])
        return total / num_tasks

    return flat0, loss, kl


@pytest.mark.parametrize("num_steps", [1, 2])
def test_batched_inner_loop_equals_per_task_loop(num_steps):
    policy, train, _ = problem(num_steps=num_steps)
    learner = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps)
    stacked = learner.adapt(train)
    meta = OrderedDict(policy.named_meta_parameters())
    for k in range(len(train[0])):
        single = adapt_single(policy, [step[k] for step in train], meta, 0.3, first_order=False)
        for name, value in single.items():
            torch.testing.assert_close(stacked[name][k], value, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("discrete", [False, True])
@pytest.mark.parametrize("num_steps", [1, 2])
def test_second_order_meta_gradient_matches_autograd(discrete, num_steps):
    policy, train, valid = problem(discrete=discrete, num_steps=num_steps)
    learner = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps)
    flat0, loss, _ = per_task_objectives(policy, train, valid, fast_lr=0.3)
    flat = flat0.clone().requires_grad_()
    (expected,) = torch.autograd.grad(loss(flat), [flat])
    torch.testing.assert_close(learner.meta_gradient(train, valid), expected, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("num_steps", [1, 2])
def test_closed_form_and_autograd_curvature_agree(num_steps):
    policy, train, valid = problem(num_steps=num_steps)
    closed = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps)
    autograd = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps, curvature="autograd")
    torch.testing.assert_close(closed.meta_gradient(train, valid), autograd.meta_gradient(train, valid))
    v = torch.randn(sum(p.numel() for p in policy.parameters()), generator=torch.Generator().manual_seed(3))
    hvp_closed = closed.kl_hessian_vector_product(train, valid, damping=0.1)
    hvp_autograd = autograd.kl_hessian_vector_product(train, valid, damping=0.1)
    torch.testing.assert_close(hvp_closed(v), hvp_autograd(v))
    with pytest.raises(ValueError, match="curvature must be 'auto' or 'autograd'"):
        MAMLTRPO(policy, curvature="exact")


@pytest.mark.parametrize("num_steps", [1, 2])
def test_episode_averaging_meta_gradient_matches_per_episode_means(num_steps):
    policy, train, valid = problem(num_steps=num_steps)
    learner = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps, averaging="episode")
    flat0, loss, _ = per_task_objectives(policy, train, valid, fast_lr=0.3, mean=episode_mean)
    flat = flat0.clone().requires_grad_()
    (expected,) = torch.autograd.grad(loss(flat), [flat])
    torch.testing.assert_close(learner.meta_gradient(train, valid), expected, atol=1e-6, rtol=1e-4)
    # The episodes have different lengths, so per-step averaging gives another gradient.
    per_step = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps).meta_gradient(train, valid)
    assert not torch.allclose(per_step, expected, atol=1e-4, rtol=1e-3)
    with pytest.raises(ValueError, match="'step' or 'episode'"):
        MAMLTRPO(policy, averaging="steps")


def test_first_order_meta_gradient_treats_adapted_params_as_constants():
    policy, train, valid = problem()
    first = MAMLTRPO(policy, fast_lr=0.3, first_order=True).meta_gradient(train, valid)
    second = MAMLTRPO(policy, fast_lr=0.3, first_order=False).meta_gradient(train, valid)
    assert (first - second).norm() > 1e-3 * second.norm()

    learner = MAMLTRPO(policy, fast_lr=0.3)
    expected = torch.zeros_like(first)
    stacked = learner.adapt(train, first_order=True)
    for k in range(len(valid)):
        leaves = OrderedDict((name, p[k].detach().requires_grad_()) for name, p in stacked.items())
        pi = policy(valid[k].observations, params=leaves)
        old_pi = detach_distribution(pi)
        ratio = torch.exp(pi.log_prob(valid[k].actions) - old_pi.log_prob(valid[k].actions))
        loss = -step_mean(ratio * valid[k].advantages, valid[k])
        expected += flatten_tensors(torch.autograd.grad(loss, list(leaves.values()))) / len(valid)
    torch.testing.assert_close(first, expected, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize(
    "discrete, num_steps, first_order, curvature",
    [
        (False, 1, False, "auto"),
        (False, 2, False, "auto"),
        (False, 1, False, "autograd"),
        (False, 2, False, "autograd"),
        (True, 1, False, "auto"),
        (False, 1, True, "auto"),
    ],
)
def test_kl_hessian_vector_product_matches_autograd_hessian(discrete, num_steps, first_order, curvature):
    policy, train, valid = problem(discrete=discrete, num_steps=num_steps)
    learner = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps, first_order=first_order, curvature=curvature)
    flat0, _, kl = per_task_objectives(policy, train, valid, fast_lr=0.3, first_order=first_order)
    hessian = torch.autograd.functional.hessian(kl, flat0, vectorize=True)
    damping = 0.01
    hvp = learner.kl_hessian_vector_product(train, valid, damping=damping)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        v = torch.randn(flat0.shape, generator=generator)
        torch.testing.assert_close(hvp(v), hessian @ v + damping * v, atol=1e-6, rtol=1e-4)


def assert_valid_step(logs, policy, before, max_kl):
    for key, value in logs.items():
        assert math.isfinite(value), key
    for key in ("time_adapt", "time_loss_grad", "time_cg", "time_line_search", "time_total"):
        assert logs[key] >= 0.0
    after = flatten_tensors(policy.parameters()).detach()
    if logs["accepted"]:
        assert logs["loss_after"] < logs["loss_before"]
        assert logs["kl_after"] <= max_kl
        assert not torch.equal(after, before)
    else:
        assert torch.equal(after, before)


@pytest.mark.parametrize("discrete, num_steps, first_order", [(False, 1, False), (True, 2, False), (False, 1, True)])
def test_step_improves_the_surrogate_within_the_trust_region(discrete, num_steps, first_order):
    policy, train, valid = problem(discrete=discrete, num_steps=num_steps)
    learner = MAMLTRPO(policy, fast_lr=0.3, num_steps=num_steps, first_order=first_order, max_kl=1e-2, cg_iters=5)
    before = flatten_tensors(policy.parameters()).detach().clone()
    _, loss, kl = per_task_objectives(policy, train, valid, fast_lr=0.3)
    logs = learner.step(train, valid)
    assert_valid_step(logs, policy, before, max_kl=1e-2)
    assert logs["accepted"] is True
    assert 1 <= logs["ls_steps"] <= 10
    assert logs["kl_before"] == pytest.approx(0.0, abs=1e-7)
    assert logs["loss_before"] == pytest.approx(loss(before.clone().requires_grad_()).item(), abs=1e-6)
    # The reported values are those of the new parameters, against the old policy.
    after = flatten_tensors(policy.parameters()).detach().clone().requires_grad_()
    assert logs["loss_after"] == pytest.approx(loss(after).item(), rel=1e-4, abs=1e-6)
    assert logs["kl_after"] == pytest.approx(kl(after).item(), rel=1e-3, abs=1e-8)


def test_step_restores_the_parameters_when_no_step_is_accepted(monkeypatch):
    policy, train, valid = problem()
    learner = MAMLTRPO(policy, fast_lr=0.3, ls_max_steps=4)
    before = flatten_tensors(policy.parameters()).detach().clone()
    monkeypatch.setattr(learner, "_trial", lambda *args: (float("inf"), 0.0))
    logs = learner.step(train, valid)
    assert logs["accepted"] is False
    assert logs["ls_steps"] == 4
    assert logs["loss_after"] == logs["loss_before"]
    assert_valid_step(logs, policy, before, max_kl=learner.max_kl)


def test_step_with_zero_advantages_does_not_move():
    policy, train, valid = problem()
    for episodes in valid:
        episodes.advantages = torch.zeros_like(episodes.rewards)
    before = flatten_tensors(policy.parameters()).detach().clone()
    logs = MAMLTRPO(policy, fast_lr=0.3).step(train, valid)
    assert logs["accepted"] is False and logs["ls_steps"] == 0
    assert_valid_step(logs, policy, before, max_kl=1.0)


def test_step_checks_its_inputs():
    policy, train, valid = problem()
    learner = MAMLTRPO(policy, num_steps=2)
    with pytest.raises(ValueError, match="2 inner step"):
        learner.step(train, valid)
    with pytest.raises(ValueError, match="same tasks"):
        MAMLTRPO(policy).step([train[0][:2]], valid)


def test_constructor_defaults_are_the_declared_ones():
    """MAMLTRPO's keyword defaults are those of the keys it takes (shared and its own), as a config's."""
    from maml_rl.config.hyperparameters import SHARED_KEYS

    signature = inspect.signature(MAMLTRPO).parameters
    declared = {h.argument: h for h in (*SHARED_KEYS, *MAMLTRPO.hyperparameters) if h.argument is not None}
    assert {h.key for h in MAMLTRPO.hyperparameters} <= {h.key for h in declared.values()}
    for argument, hyperparameter in declared.items():
        assert signature[argument].default == hyperparameter.default, hyperparameter.key
    # Every other keyword is an API-only option, not a hyperparameter.
    assert set(signature) - set(declared) == {"policy", "device", "curvature"}
    learner = MAMLTRPO(make_policy())
    values = {"fast_lr": learner.fast_lr, "num_steps": learner.num_steps, "averaging": learner.averaging,
              "first_order": learner.first_order, "max_kl": learner.max_kl, "cg_iters": learner.cg_iters,
              "cg_damping": learner.cg_damping, "ls_max_steps": learner.ls_max_steps,
              "ls_backtrack_ratio": learner.ls_backtrack_ratio, "gae_lambda": learner.gae_lambda}
    assert values == {argument: h.default for argument, h in declared.items()}
