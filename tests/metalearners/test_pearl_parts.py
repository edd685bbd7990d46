"""PEARL's parts against independent truths: the product of Gaussians by hand, the KL against Monte Carlo,
SAC's targets and losses on hand-computed numbers, the squashed Gaussian's density and the sampler's draws."""

from __future__ import annotations

import math

import pytest
import torch

from maml_rl.metalearners.pearl import ContextEncoder, Posterior, kl_to_standard_normal, product_of_gaussians
from maml_rl.metalearners.pearl.sac import policy_loss, q_target, qf_loss, vf_loss
from maml_rl.policies.tanh_gaussian import TanhGaussianPolicy, squashed_log_prob_reference
from maml_rl.samplers.rollout.noise import actions_from_noise


def test_the_product_of_two_gaussians_by_hand():
    # N(1, 1) * N(3, 1): precision 2, so variance 1/2, mean (1 + 3) / 2 = 2.
    # N(0, 4) * N(6, 2): precisions 1/4 + 1/2 = 3/4, variance 4/3, mean (0/4 + 6/2) * 4/3 = 4.
    means = torch.tensor([[[1.0, 0.0], [3.0, 6.0]]])
    variances = torch.tensor([[[1.0, 4.0], [1.0, 2.0]]])
    mean, variance = product_of_gaussians(means, variances)
    torch.testing.assert_close(mean, torch.tensor([[2.0, 4.0]]))
    torch.testing.assert_close(variance, torch.tensor([[0.5, 4.0 / 3.0]]))


def test_the_product_does_not_depend_on_the_order_of_the_context():
    torch.manual_seed(0)
    encoder = ContextEncoder(4, 3, (16,))
    context = torch.randn(2, 7, 4)
    shuffled = context[:, torch.randperm(7)]
    a, b = encoder(context), encoder(shuffled)
    torch.testing.assert_close(a.means, b.means, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.variances, b.variances, rtol=1e-5, atol=1e-6)
    # One factor is its own product; more evidence narrows it.
    single = encoder(context[:, :1])
    assert (a.variances < single.variances).all()


def test_one_factor_is_its_own_product_and_a_variance_at_zero_is_clamped():
    mean, variance = product_of_gaussians(torch.tensor([[0.3, -1.0]]), torch.tensor([[2.0, 0.0]]))
    torch.testing.assert_close(mean, torch.tensor([0.3, -1.0]))
    torch.testing.assert_close(variance, torch.tensor([2.0, 1e-7]))


def test_the_kl_in_closed_form_against_monte_carlo():
    means = torch.tensor([[0.5, -1.0], [2.0, 0.0]], dtype=torch.float64)
    variances = torch.tensor([[0.25, 2.0], [1.0, 0.1]], dtype=torch.float64)
    closed = kl_to_standard_normal(means, variances)
    generator = torch.Generator().manual_seed(0)
    samples = means + variances.sqrt() * torch.randn((400_000, 2, 2), generator=generator, dtype=torch.float64)
    log_q = torch.distributions.Normal(means, variances.sqrt()).log_prob(samples)
    log_p = torch.distributions.Normal(0.0, 1.0).log_prob(samples)
    monte_carlo = (log_q - log_p).mean(0).sum()
    assert abs(float(closed - monte_carlo)) < 0.02 * float(closed)
    # And against torch's own KL, term by term.
    torch_kl = torch.distributions.kl_divergence(torch.distributions.Normal(means, variances.sqrt()),
                                                 torch.distributions.Normal(0.0, 1.0)).sum()
    torch.testing.assert_close(closed, torch_kl)
    assert float(kl_to_standard_normal(torch.zeros(3, 5), torch.ones(3, 5))) == 0.0


def test_sac_targets_and_losses_on_a_hand_computed_case():
    rewards = torch.tensor([[1.0], [-2.0], [0.5]])
    terminated = torch.tensor([[False], [True], [False]])
    target_v = torch.tensor([[10.0], [10.0], [-4.0]])
    # scale 5, discount 0.9: 5 + 9 = 14; -10 + 0 (terminated: no bootstrap) = -10; 2.5 - 3.6 = -1.1.
    target = q_target(rewards, terminated, target_v, 5.0, 0.9)
    torch.testing.assert_close(target, torch.tensor([[14.0], [-10.0], [-1.1]]))
    q1 = torch.tensor([[13.0], [-10.0], [0.9]])
    q2 = torch.tensor([[14.0], [-12.0], [-1.1]])
    # q1 errors 1, 0, 2 -> mean 5/3; q2 errors 0, 2, 0 -> mean 4/3.
    torch.testing.assert_close(qf_loss(q1, q2, target), torch.tensor(3.0))
    v = torch.tensor([[1.0], [2.0]])
    min_q, log_pi = torch.tensor([[3.0], [1.0]]), torch.tensor([[0.5], [-1.0]])
    # soft values 2.5, 2.0 -> errors 1.5, 0 -> mean 1.125.
    torch.testing.assert_close(vf_loss(v, min_q, log_pi), torch.tensor(1.125))
    mean, log_std = torch.tensor([[1.0, -1.0]]), torch.tensor([[0.0, 2.0]])
    # mean(log_pi - min_q) = (-2.5 - 2) / 2 = -2.25; + 0.1 * mean(mean^2) = 0.1; + 0.01 * mean(log_std^2) = 0.02.
    torch.testing.assert_close(policy_loss(log_pi, min_q, mean, log_std, 0.1, 0.01), torch.tensor(-2.13))


def test_the_vf_loss_leaves_the_critics_and_actor_alone():
    min_q = torch.tensor([[3.0]], requires_grad=True)
    log_pi = torch.tensor([[0.5]], requires_grad=True)
    v = torch.tensor([[1.0]], requires_grad=True)
    vf_loss(v, min_q, log_pi).backward()
    assert min_q.grad is None and log_pi.grad is None and v.grad is not None


def test_the_squashed_gaussian_density_and_the_samplers_draws_are_the_actors():
    torch.manual_seed(1)
    actor = TanhGaussianPolicy(4, 3, (16, 16))
    x, noise = torch.randn(6, 4), torch.randn(6, 3)
    drawn = actor.rsample(x, noise)
    reference = squashed_log_prob_reference(drawn.mean, drawn.log_std, drawn.pre_tanh)
    # rlkit's 1e-6 inside the log moves the density by about 1e-6 / (1 - tanh^2) per dimension.
    torch.testing.assert_close(drawn.log_prob, reference, rtol=0, atol=1e-3)
    # The sampler turns the actor's distribution and the same noise into the same actions, bit for bit.
    assert torch.equal(actions_from_noise(actor(x), noise, None), drawn.actions)
    assert torch.equal(actions_from_noise(actor(x), noise, None, "mean"), actor.deterministic(x))
    assert drawn.actions.abs().max() < 1


def test_posterior_draws_follow_their_generator():
    posterior = Posterior(torch.zeros(2, 3), torch.full((2, 3), 4.0))
    a = posterior.sample(torch.Generator().manual_seed(1), per_task=5)
    b = posterior.sample(torch.Generator().manual_seed(1), per_task=5)
    assert a.shape == (2, 5, 3) and torch.equal(a, b)
    assert math.isclose(float(posterior.sample(torch.Generator().manual_seed(2), per_task=20000).std()), 2.0,
                        rel_tol=0.02)
