"""Closed-form Hessian products of the Gaussian policy: weighted negative log-likelihood and KL."""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from torch.distributions import kl_divergence

from maml_rl.policies import CategoricalMLPPolicy, NormalMLPPolicy

OBS_DIM, ACT_DIM, NUM_TASKS, NUM_SAMPLES = 3, 2, 3, 7


def stacked_problem(policy, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    params = OrderedDict(
        (name, p.detach().unsqueeze(0) + 0.3 * torch.randn(NUM_TASKS, *p.shape, generator=generator, dtype=p.dtype))
        for name, p in policy.named_parameters()
    )
    observations = torch.randn(NUM_TASKS, NUM_SAMPLES, OBS_DIM, generator=generator, dtype=torch.float64)
    actions = torch.randn(NUM_TASKS, NUM_SAMPLES, ACT_DIM, generator=generator, dtype=torch.float64)
    weights = torch.randn(NUM_TASKS, NUM_SAMPLES, generator=generator, dtype=torch.float64)
    return params, observations, actions, weights


def autograd_hvp(policy, params, observations, actions, weights, tangents):
    names = list(params)

    def loss(*values):
        pi = policy(observations, params=OrderedDict(zip(names, values)))
        return -(pi.log_prob(actions) * weights).sum()

    return torch.autograd.functional.hvp(loss, tuple(params.values()), tuple(tangents))[1]


@pytest.mark.parametrize(
    "hidden_sizes, nonlinearity",
    [((), "tanh"), ((5,), "tanh"), ((5, 4), "relu"), ((5, 4), "elu"), ((5, 4), "softplus"), ((6, 5, 4), "sigmoid")],
)
def test_products_match_autograd(hidden_sizes, nonlinearity):
    torch.manual_seed(0)
    policy = NormalMLPPolicy(OBS_DIM, ACT_DIM, hidden_sizes=hidden_sizes, nonlinearity=nonlinearity).double()
    params, observations, actions, weights = stacked_problem(policy)
    hessian = policy.nll_hessian(observations, actions, weights, params)
    assert hessian is not None
    generator = torch.Generator().manual_seed(1)
    for _ in range(2):
        tangents = [torch.randn(p.shape, generator=generator, dtype=p.dtype) for p in params.values()]
        expected = autograd_hvp(policy, params, observations, actions, weights, tangents)
        for name, got, want in zip(params, hessian(tangents), expected):
            torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-9, msg=name)


@pytest.mark.parametrize("hidden_sizes, nonlinearity", [((), "tanh"), ((5, 4), "tanh"), ((5, 4), "relu")])
def test_kl_products_match_autograd(hidden_sizes, nonlinearity):
    torch.manual_seed(0)
    policy = NormalMLPPolicy(OBS_DIM, ACT_DIM, hidden_sizes=hidden_sizes, nonlinearity=nonlinearity).double()
    params, observations, _, weights = stacked_problem(policy)
    weights = weights.abs()
    names = list(params)
    old = policy(observations, params=params)

    def kl(*values):
        return (kl_divergence(old, policy(observations, params=OrderedDict(zip(names, values)))) * weights).sum()

    hessian = policy.kl_hessian(observations, weights, params)
    generator = torch.Generator().manual_seed(1)
    tangents = [torch.randn(p.shape, generator=generator, dtype=p.dtype) for p in params.values()]
    expected = torch.autograd.functional.hvp(kl, tuple(params.values()), tuple(tangents))[1]
    for name, got, want in zip(names, hessian(tangents), expected):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-9, msg=name)


def test_clamped_log_std_has_no_curvature():
    policy = NormalMLPPolicy(OBS_DIM, ACT_DIM, hidden_sizes=(4,), min_std=0.5).double()
    params, observations, actions, weights = stacked_problem(policy)
    params["sigma"][0, 0] = -3.0  # below log(0.5) for one task and action dimension: clamped
    tangents = [torch.ones_like(p) for p in params.values()]
    got = policy.nll_hessian(observations, actions, weights, params)(tangents)
    expected = autograd_hvp(policy, params, observations, actions, weights, tangents)
    for name, g, e in zip(params, got, expected):
        torch.testing.assert_close(g, e, atol=1e-10, rtol=1e-9, msg=name)
    assert got[list(params).index("sigma")][0, 0] == 0.0
    kl_got = policy.kl_hessian(observations, weights.abs(), params)(tangents)
    assert kl_got[list(params).index("sigma")][0, 0] == 0.0


def test_no_closed_form_for_unknown_activations_unstacked_or_partial_params():
    _, observations, actions, weights = stacked_problem(NormalMLPPolicy(OBS_DIM, ACT_DIM, hidden_sizes=(4,)).double())
    custom = NormalMLPPolicy(OBS_DIM, ACT_DIM, hidden_sizes=(4,), nonlinearity=lambda x: x * torch.sigmoid(x)).double()
    params = stacked_problem(custom)[0]
    # A user callable might mix features, which the elementwise derivatives would get wrong.
    assert custom.nll_hessian(observations, actions, weights, params) is None
    assert custom.kl_hessian(observations, weights, params) is None

    policy = NormalMLPPolicy(OBS_DIM, ACT_DIM, hidden_sizes=(4,)).double()
    unstacked = OrderedDict((name, p.detach()) for name, p in policy.named_parameters())
    assert policy.nll_hessian(observations[0], actions[0], weights[0], unstacked) is None
    partial = stacked_problem(policy)[0]
    del partial["sigma"]
    assert policy.nll_hessian(observations, actions, weights, partial) is None

    categorical = CategoricalMLPPolicy(OBS_DIM, 3, hidden_sizes=(4,))
    assert categorical.nll_hessian(observations, actions, weights, stacked_problem(categorical)[0]) is None
    assert categorical.kl_hessian(observations, weights, stacked_problem(categorical)[0]) is None
