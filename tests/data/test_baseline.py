"""LinearFeatureBaseline: exact fits, degenerate inputs and regularisation growth."""

from __future__ import annotations

import pytest
import torch

import maml_rl.data.baseline as baseline_module
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.data.episodes import BatchEpisodes


def features_by_hand(observations: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    horizon, batch_size, _ = observations.shape
    rows = torch.zeros(horizon, batch_size, 2 * observations.shape[-1] + 4, dtype=torch.float64)
    for b in range(batch_size):
        for t in range(int(lengths[b])):
            obs = observations[t, b].double()
            s = t / 100.0
            rows[t, b] = torch.cat([obs, obs**2, torch.tensor([s, s**2, s**3, 1.0], dtype=torch.float64)])
    return rows


def episodes_with_linear_returns(weights: torch.Tensor, gamma: float = 0.9, seed: int = 0) -> BatchEpisodes:
    """Episodes whose discounted returns are exactly ``features @ weights``."""
    generator = torch.Generator().manual_seed(seed)
    horizon, batch_size, obs_dim = 12, 6, 3
    observations = torch.randn(horizon, batch_size, obs_dim, generator=generator)
    lengths = torch.tensor([12, 12, 9, 7, 12, 4])
    mask = (torch.arange(horizon).view(-1, 1) < lengths).float()
    observations = observations * mask.unsqueeze(-1)
    target = features_by_hand(observations, lengths) @ weights.double()
    # r_t = R_t - gamma * R_{t+1} makes the discounted reward-to-go equal to R.
    next_target = torch.cat([target[1:], torch.zeros(1, batch_size, dtype=torch.float64)])
    rewards = ((target - gamma * next_target) * mask).float()
    actions = torch.zeros(horizon, batch_size, 1)
    return BatchEpisodes(observations, actions, rewards, lengths, gamma=gamma)


def test_feature_size():
    assert LinearFeatureBaseline(5).feature_size == 14
    assert LinearFeatureBaseline(5).weight.shape == (14,)


def test_fit_recovers_a_linear_target():
    weights = torch.tensor([0.5, -1.0, 2.0, 0.1, 0.2, -0.3, 3.0, -2.0, 1.0, 0.7])
    episodes = episodes_with_linear_returns(weights)
    baseline = LinearFeatureBaseline(3)
    baseline.fit(episodes)
    values = baseline(episodes)
    assert values.shape == (12, 6)
    assert values.dtype == torch.float32
    torch.testing.assert_close(values, episodes.returns, atol=1e-3, rtol=1e-3)
    # Padded steps predict exactly zero.
    assert torch.all(values[episodes.mask == 0] == 0)
    assert baseline.last_reg_coeff == pytest.approx(1e-5)


def test_fitted_baseline_drives_advantages_to_zero():
    weights = torch.linspace(-1.0, 1.0, 10)
    episodes = episodes_with_linear_returns(weights)
    baseline = LinearFeatureBaseline(3)
    baseline.fit(episodes)
    advantages = episodes.compute_advantages(baseline, gae_lambda=1.0, normalize=False)
    assert advantages.abs().max() < 1e-3


def test_non_finite_observations_raise_a_clear_error():
    episodes = episodes_with_linear_returns(torch.ones(10))
    episodes.observations[0, 0, 0] = float("nan")
    with pytest.raises(RuntimeError, match="NaN/inf"):
        LinearFeatureBaseline(3).fit(episodes)


def test_regularisation_grows_until_the_solve_succeeds(monkeypatch):
    tried = []
    real_solve = baseline_module._ridge_solve

    def fails_below_1e3(gram, target, reg):
        tried.append(reg)
        return None if reg < 1e-3 * 0.999 else real_solve(gram, target, reg)

    monkeypatch.setattr(baseline_module, "_ridge_solve", fails_below_1e3)
    baseline = LinearFeatureBaseline(3, reg_coeff=1e-5)
    baseline.fit(episodes_with_linear_returns(torch.ones(10)))
    assert tried == pytest.approx([1e-5, 1e-4, 1e-3])
    assert baseline.last_reg_coeff == pytest.approx(1e-3)
    assert torch.isfinite(baseline.weight).all()


def test_regularisation_gives_up_with_the_last_value(monkeypatch):
    monkeypatch.setattr(baseline_module, "_ridge_solve", lambda gram, target, reg: None)
    with pytest.raises(RuntimeError, match=r"singular.*last reg_coeff=0\.1"):
        LinearFeatureBaseline(3, reg_coeff=1e-5).fit(episodes_with_linear_returns(torch.ones(10)))


def test_singular_features_without_regularisation_fail():
    # An all-zero observation column makes the normal equations singular when reg_coeff = 0.
    episodes = episodes_with_linear_returns(torch.ones(10))
    episodes.observations[..., 1] = 0.0
    with pytest.raises(RuntimeError, match="singular"):
        LinearFeatureBaseline(3, reg_coeff=0.0).fit(episodes)
    # The default ridge term makes the same problem well posed.
    LinearFeatureBaseline(3).fit(episodes)


def test_wrong_observation_size():
    with pytest.raises(ValueError, match="size 4"):
        LinearFeatureBaseline(4).fit(episodes_with_linear_returns(torch.ones(10)))
