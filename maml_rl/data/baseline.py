"""Linear value baseline fitted by ridge regression on hand-made features."""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn as nn

from maml_rl.data.episodes import LOSS_AVERAGING, BatchEpisodes
from maml_rl.config.hyperparameters import DEFAULTS

# Attempts in total: the regularisation starts at ``reg_coeff`` and is
# multiplied by 10 after each failed solve.
_REG_ATTEMPTS = 5


def _features(observations: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Features ``[obs, obs^2, t, t^2, t^3, 1] * mask`` (``t`` = step / 100), in float64.

    :param observations: ``[T, *S, obs_dim]`` observations.
    :param mask: ``[T, *S]`` validity mask.
    :return: ``[T, *S, 2 * obs_dim + 4]`` features, zero on padded steps.
    """
    obs = observations.to(torch.float64)
    ones = mask.to(torch.float64).unsqueeze(-1)
    steps = torch.arange(obs.shape[0], dtype=torch.float64, device=obs.device) / 100.0
    time = steps.view(-1, *([1] * (ones.dim() - 1))) * ones
    return torch.cat([obs * ones, obs**2 * ones, time, time**2, time**3, ones], dim=-1)


def _ridge_solve(gram: torch.Tensor, target: torch.Tensor, reg: float) -> torch.Tensor | None:
    """Solve ``(gram + reg I) w = target`` by Cholesky; ``None`` when that fails.

    :param gram: ``[..., F, F]`` symmetric positive semi-definite matrices.
    :param target: ``[..., F]`` right-hand sides.
    :param reg: ridge coefficient added to the diagonal.
    """
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    chol, info = torch.linalg.cholesky_ex(gram + reg * eye)
    if bool((info != 0).any()):
        return None
    solution = torch.cholesky_solve(target.unsqueeze(-1), chol).squeeze(-1)
    if not bool(torch.isfinite(solution).all()):
        return None
    return solution


def _fit_weights(
    features: torch.Tensor, returns: torch.Tensor, reg_coeff: float
) -> tuple[torch.Tensor, float]:
    """Ridge regression of ``returns`` on ``features`` (padded rows are all zero).

    :param features: ``[..., N, F]`` float64 features.
    :param returns: ``[..., N]`` targets.
    :param reg_coeff: initial ridge coefficient.
    :return: ``[..., F]`` float64 weights and the ridge coefficient that worked.
    """
    # Padded rows have zero features, so they add nothing to the normal equations.
    gram = features.transpose(-1, -2) @ features
    target = (features.transpose(-1, -2) @ returns.to(torch.float64).unsqueeze(-1)).squeeze(-1)
    reg = reg_coeff
    if not (torch.isfinite(gram).all() and torch.isfinite(target).all()):
        raise RuntimeError(
            "LinearFeatureBaseline.fit: the features or returns contain NaN/inf values "
            f"(non-finite observations or rewards), no linear fit is possible (reg_coeff={reg_coeff:g})"
        )
    for attempt in range(_REG_ATTEMPTS):
        reg = reg_coeff * 10.0**attempt
        solution = _ridge_solve(gram, target, reg)
        if solution is not None:
            return solution, reg
    raise RuntimeError(
        "LinearFeatureBaseline.fit: the regularised normal equations stayed singular or gave a "
        f"non-finite solution after {_REG_ATTEMPTS} attempts (last reg_coeff={reg:g}); "
        "the features are degenerate"
    )


class LinearFeatureBaseline(nn.Module):
    """Linear value function of per-step features, refitted on every batch.

    :param input_size: (flattened) observation size.
    :param reg_coeff: initial ridge regularisation coefficient.
    """

    def __init__(self, input_size: int, reg_coeff: float = 1e-5) -> None:
        super().__init__()
        self.input_size = int(input_size)
        self.reg_coeff = float(reg_coeff)
        # A buffer, not a parameter: it is fitted in closed form, never by gradients.
        self.register_buffer("weight", torch.zeros(self.feature_size, dtype=torch.float32))
        # Ridge coefficient used by the last fit (larger than reg_coeff if it had to grow).
        self.last_reg_coeff: float | None = None

    @property
    def feature_size(self) -> int:
        return 2 * self.input_size + 4

    def _episode_features(self, episodes: BatchEpisodes, inputs: torch.Tensor | None = None) -> torch.Tensor:
        obs = episodes.observations if inputs is None else inputs
        obs = obs.reshape(len(episodes), episodes.batch_size, -1)
        if obs.shape[-1] != self.input_size:
            raise ValueError(f"baseline built for observations of size {self.input_size}, got {obs.shape[-1]}")
        return _features(obs, episodes.mask)

    @torch.no_grad()
    def fit(self, episodes: BatchEpisodes, inputs: torch.Tensor | None = None) -> None:
        """Fit the weights to the discounted returns of ``episodes``.

        :param episodes: the batch to fit on.
        :param inputs: ``[T, B, input_size]`` per-step inputs to use instead of the observations
            (RL²'s policy inputs).
        :raises RuntimeError: when no finite solution exists even with a larger regularisation.
        """
        features = self._episode_features(episodes, inputs).reshape(-1, self.feature_size)
        weights, self.last_reg_coeff = _fit_weights(features, episodes.returns.reshape(-1), self.reg_coeff)
        self.weight.copy_(weights.to(self.weight.dtype))

    @torch.no_grad()
    def forward(self, episodes: BatchEpisodes, inputs: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted values ``[T, B]`` (zero on padded steps).

        :param episodes: the batch to evaluate.
        :param inputs: as in :meth:`fit`.
        """
        features = self._episode_features(episodes, inputs)
        # float64 product: the fitted weights can be large and of mixed signs.
        values = features @ self.weight.to(torch.float64)
        return values.to(torch.float32)


def fit_advantages(episodes: "Sequence[BatchEpisodes]", baseline: Any, gae_lambda: float = DEFAULTS.gae_lambda,
                   averaging: str = LOSS_AVERAGING[0]) -> None:
    """Fit ``baseline`` on each task's episodes in turn and set their normalised GAE advantages."""
    for batch in episodes:
        baseline.fit(batch)
        batch.compute_advantages(baseline, gae_lambda=gae_lambda, normalize=True, averaging=averaging)
