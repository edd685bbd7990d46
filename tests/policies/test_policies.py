"""Policies: shapes, log-probabilities, batched per-task parameters, inner updates."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch.distributions import Categorical, Independent, Normal

from maml_rl.policies import (
    CategoricalMLPPolicy,
    NormalMLPPolicy,
    expand_params,
    get_nonlinearity,
    get_policy_for_env,
    stack_params,
)


def perturbed_params(policy, num_tasks: int, scale: float = 0.1, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return [
        {name: p.detach() + scale * torch.randn(p.shape, generator=generator) for name, p in policy.named_parameters()}
        for _ in range(num_tasks)
    ]


def test_normal_policy_parameters_and_init():
    torch.manual_seed(0)
    policy = NormalMLPPolicy(4, 2, hidden_sizes=(8, 8), init_std=0.5)
    names = sorted(name for name, _ in policy.named_parameters())
    assert names == sorted(
        ["layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias", "mu.weight", "mu.bias", "sigma"]
    )
    assert torch.all(policy.layer1.bias == 0) and torch.all(policy.mu.bias == 0)
    torch.testing.assert_close(policy.sigma.data, torch.full((2,), math.log(0.5)))
    assert policy.layer1.weight.abs().max() <= math.sqrt(6.0 / (4 + 8))  # Xavier-uniform bound
    assert policy.supports_batched_params
    assert set(policy.state_dict()) == set(names)


def test_normal_policy_distribution_and_log_prob():
    torch.manual_seed(0)
    policy = NormalMLPPolicy(4, 2, hidden_sizes=(8,))
    observations = torch.randn(5, 3, 4)
    pi = policy(observations)
    assert isinstance(pi, Independent)
    assert pi.batch_shape == (5, 3) and pi.event_shape == (2,)
    actions = torch.randn(5, 3, 2)
    mu = policy.mu(torch.tanh(policy.layer1(observations)))
    std = policy.sigma.exp()
    expected = Normal(mu, std).log_prob(actions).sum(-1)
    torch.testing.assert_close(pi.log_prob(actions), expected)


def test_min_std_clamps_the_scale():
    policy = NormalMLPPolicy(3, 2, init_std=1e-9, min_std=1e-3)
    pi = policy(torch.zeros(1, 3))
    torch.testing.assert_close(pi.stddev, torch.full((1, 2), 1e-3))


def test_categorical_policy():
    torch.manual_seed(0)
    policy = CategoricalMLPPolicy(4, 3, hidden_sizes=(8,), nonlinearity=torch.relu)
    assert sorted(name for name, _ in policy.named_parameters()) == [
        "layer1.bias", "layer1.weight", "layer2.bias", "layer2.weight"
    ]
    observations = torch.randn(5, 2, 4)
    pi = policy(observations)
    assert isinstance(pi, Categorical)
    assert pi.batch_shape == (5, 2)
    logits = policy.layer2(torch.relu(policy.layer1(observations)))
    actions = torch.randint(0, 3, (5, 2))
    torch.testing.assert_close(pi.log_prob(actions), torch.log_softmax(logits, -1).gather(-1, actions[..., None])[..., 0])


@pytest.mark.parametrize("policy_cls", [NormalMLPPolicy, CategoricalMLPPolicy])
def test_batched_params_equal_a_per_task_loop(policy_cls):
    torch.manual_seed(0)
    policy = policy_cls(4, 3, hidden_sizes=(16, 16))
    num_tasks = 5
    params_list = perturbed_params(policy, num_tasks)
    stacked = stack_params(params_list)
    assert stacked["layer1.weight"].shape == (num_tasks, 16, 4)

    def stats(pi):
        if isinstance(pi, Categorical):
            return [pi.logits]
        return [pi.mean, pi.stddev]

    # [K, N, obs]
    observations = torch.randn(num_tasks, 7, 4)
    batched = policy(observations, params=stacked)
    assert batched.batch_shape == (num_tasks, 7)
    for k in range(num_tasks):
        single = policy(observations[k], params=params_list[k])
        for got, want in zip(stats(batched), stats(single)):
            torch.testing.assert_close(got[k], want, atol=1e-6, rtol=1e-6)

    # [T, K, B, obs] (time-major stacked episodes)
    observations = torch.randn(6, num_tasks, 3, 4)
    batched = policy(observations, params=stacked)
    assert batched.batch_shape == (6, num_tasks, 3)
    actions = batched.sample()
    log_probs = batched.log_prob(actions)
    for k in range(num_tasks):
        single = policy(observations[:, k], params=params_list[k])
        for got, want in zip(stats(batched), stats(single)):
            torch.testing.assert_close(got[:, k], want, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(log_probs[:, k], single.log_prob(actions[:, k]), atol=1e-5, rtol=1e-5)


def test_batched_params_reject_a_wrong_task_axis():
    policy = NormalMLPPolicy(4, 2, hidden_sizes=(8,))
    stacked = stack_params(perturbed_params(policy, 3))
    with pytest.raises(ValueError, match="stacked for 3 tasks"):
        policy(torch.randn(4, 5, 4), params=stacked)


def test_expand_params_shares_memory_and_sums_gradients():
    policy = NormalMLPPolicy(4, 2, hidden_sizes=(8,))
    params = dict(policy.named_parameters())
    expanded = expand_params(params, 3)
    assert expanded["layer1.weight"].shape == (3, 8, 4)
    assert expanded["layer1.weight"].stride(0) == 0
    observations = torch.randn(3, 5, 4)
    loss = policy(observations, params=expanded).log_prob(torch.zeros(3, 5, 2)).sum()
    (grad_expanded,) = torch.autograd.grad(loss, [expanded["mu.weight"]], retain_graph=True)
    (grad_shared,) = torch.autograd.grad(loss, [params["mu.weight"]])
    torch.testing.assert_close(grad_expanded.sum(0), grad_shared)


@pytest.mark.parametrize("first_order", [False, True])
def test_update_params_is_one_sgd_step(first_order):
    torch.manual_seed(0)
    policy = NormalMLPPolicy(4, 2, hidden_sizes=(8,))
    observations, actions = torch.randn(10, 4), torch.randn(10, 2)
    loss = -policy(observations).log_prob(actions).mean()
    grads = torch.autograd.grad(loss, list(policy.parameters()), retain_graph=True)
    updated = policy.update_params(loss, step_size=0.3, first_order=first_order)
    assert list(updated) == [name for name, _ in policy.named_parameters()]
    for (name, p), g in zip(policy.named_parameters(), grads):
        torch.testing.assert_close(updated[name], p - 0.3 * g)
    # Second order keeps the gradient in the graph: d(updated)/d(params) is not the identity.
    probe = updated["mu.weight"].sum()
    (d_probe,) = torch.autograd.grad(probe, [policy.mu.weight])
    is_identity = torch.allclose(d_probe, torch.ones_like(d_probe))
    assert is_identity == first_order


def test_update_params_on_stacked_params_is_per_task():
    torch.manual_seed(0)
    policy = CategoricalMLPPolicy(4, 3, hidden_sizes=(8,))
    params_list = perturbed_params(policy, 3)
    stacked = stack_params([{n: p.requires_grad_() for n, p in params.items()} for params in params_list])
    observations, actions = torch.randn(3, 6, 4), torch.randint(0, 3, (3, 6))
    loss = -policy(observations, params=stacked).log_prob(actions).mean(-1).sum()
    updated = policy.update_params(loss, params=stacked, step_size=0.5)
    for k in range(3):
        single = {n: p.detach().requires_grad_() for n, p in params_list[k].items()}
        loss_k = -policy(observations[k], params=single).log_prob(actions[k]).mean()
        updated_k = policy.update_params(loss_k, params=single, step_size=0.5)
        for name in updated_k:
            torch.testing.assert_close(updated[name][k], updated_k[name], atol=1e-6, rtol=1e-6)


def fake_env(observation_space, action_space):
    return SimpleNamespace(observation_space=observation_space, action_space=action_space)


def test_policy_for_box_actions():
    env = fake_env(spaces.Box(-1, 1, (3, 2), np.float32), spaces.Box(-1, 1, (6,), np.float32))
    policy = get_policy_for_env(env, hidden_sizes=(32, 16), nonlinearity="ReLU")
    assert isinstance(policy, NormalMLPPolicy)
    assert (policy.input_size, policy.output_size, policy.hidden_sizes) == (6, 6, (32, 16))
    assert policy.nonlinearity is torch.relu
    # Multi-dimensional observations are flattened.
    assert policy(torch.zeros(5, 3, 2)).batch_shape == (5,)


def test_policy_for_discrete_actions_and_vector_envs():
    env = SimpleNamespace(
        single_observation_space=spaces.Box(-1, 1, (4,), np.float32),
        single_action_space=spaces.Discrete(5),
        observation_space=None,
        action_space=None,
    )
    policy = get_policy_for_env(env, hidden_sizes=(8,), nonlinearity="Tanh")
    assert isinstance(policy, CategoricalMLPPolicy)
    assert (policy.input_size, policy.output_size) == (4, 5)
    assert policy.nonlinearity is torch.tanh


@pytest.mark.parametrize("name", ["tanh", "TANH", "relu", "ReLU", "sigmoid", "leaky_relu", "LeakyReLU", "elu"])
def test_nonlinearity_names(name):
    assert callable(get_nonlinearity(name))


def test_bad_nonlinearity_and_action_space():
    env = fake_env(spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (2,), np.float32))
    with pytest.raises(ValueError, match="valid names are: .*relu.*tanh"):
        get_policy_for_env(env, nonlinearity="swishy")
    env = fake_env(spaces.Box(-1, 1, (3,), np.float32), spaces.MultiBinary(2))
    with pytest.raises(ValueError, match="unsupported action space"):
        get_policy_for_env(env)


def test_gru_initialisations():
    """"pytorch" (the default): the recurrent weights are one orthogonal 768 x 256 matrix (orthonormal
    columns), the input weights and biases PyTorch's uniform ones. "xavier" (metaworld-algorithms', flax's
    cell with a dense layer per gate): each gate's recurrent block is orthogonal itself, each gate's input
    block Xavier-uniform within sqrt(6 / (fan_in + fan_out)), every bias zero."""
    from maml_rl.policies import GRUPolicy

    eye = torch.eye(32)
    torch.manual_seed(0)
    plain = GRUPolicy(10, 2, (24,), 32)
    hh = plain.gru.weight_hh_l0.detach()
    assert torch.allclose(hh.T @ hh, eye, atol=1e-5)
    assert not torch.allclose(hh[:32] @ hh[:32].T, eye, atol=1e-2)  # a block of it is not orthogonal
    assert plain.gru.bias_ih_l0.abs().max() > 0
    assert plain.gru.weight_ih_l0.abs().max() <= 1 / math.sqrt(32)  # PyTorch's U(-1/sqrt(H), 1/sqrt(H))
    torch.manual_seed(0)
    assert torch.equal(GRUPolicy(10, 2, (24,), 32, gru_init="pytorch").gru.weight_ih_l0, plain.gru.weight_ih_l0)

    torch.manual_seed(0)
    xavier = GRUPolicy(10, 2, (24,), 32, gru_init="xavier")
    bound = math.sqrt(6 / (24 + 32))
    for gate in range(3):
        block = xavier.gru.weight_hh_l0.detach()[32 * gate:32 * (gate + 1)]
        assert torch.allclose(block @ block.T, eye, atol=1e-5), gate
        ih = xavier.gru.weight_ih_l0.detach()[32 * gate:32 * (gate + 1)]
        assert ih.abs().max() <= bound and ih.abs().max() > 0.9 * bound, gate  # 768 draws fill the range
    assert not xavier.gru.bias_ih_l0.any() and not xavier.gru.bias_hh_l0.any()
    with pytest.raises(ValueError, match="gru_init must be one of 'pytorch', 'xavier', got 'he'"):
        GRUPolicy(10, 2, (24,), 32, gru_init="he")
