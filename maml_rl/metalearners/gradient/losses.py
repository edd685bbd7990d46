"""Policy-gradient losses: REINFORCE and LVC for the inner loop, surrogates and KL for TRPO and ProMP."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch
from torch.distributions import Distribution, kl_divergence

from maml_rl.data.episodes import BatchEpisodes, TaskBatch, loss_weights
from maml_rl.metalearners.ppo import clipped_objective
from maml_rl.metalearners.gradient.keys import DEFAULTS


def _flat_observations(observations: torch.Tensor, leading: int) -> torch.Tensor:
    # Multi-dimensional observations are fed to the policy flattened.
    return observations.reshape(*observations.shape[:leading], -1)


def reinforce_loss(
    policy: torch.nn.Module,
    episodes: BatchEpisodes,
    params: Mapping[str, torch.Tensor] | None = None,
    averaging: str = DEFAULTS.loss_averaging,
) -> torch.Tensor:
    """``-log pi(a|s) * advantage``, averaged over the valid steps (see :func:`~maml_rl.data.episodes.loss_weights`).

    :param policy: callable ``policy(observations, params=...) -> Distribution``.
    :param episodes: one task's batch, with advantages computed.
    :param params: parameters to evaluate the policy at (its own when ``None``).
    :param averaging: ``"step"`` (every valid step weighs the same) or ``"episode"``.
    :return: scalar loss.
    """
    pi = policy(_flat_observations(episodes.observations, 2), params=params)
    log_probs = pi.log_prob(episodes.actions)
    weights = loss_weights(episodes.mask, episodes.lengths, averaging)
    return -(log_probs * episodes.advantages * weights).sum()


def batched_reinforce_loss(
    policy: torch.nn.Module,
    batch: TaskBatch,
    params: Mapping[str, torch.Tensor],
) -> torch.Tensor:
    """Per-task REINFORCE losses of ``K`` tasks in one batched policy evaluation.

    Summing the result and differentiating with respect to stacked ``params``
    yields each task's own gradient.

    :param policy: policy supporting stacked parameters.
    :param batch: the tasks' data (:class:`~maml_rl.data.episodes.TaskBatch`).
    :param params: stacked ``[K, ...]`` parameters.
    :return: ``[K]`` losses.
    """
    pi = policy(_flat_observations(batch.observations, 2), params=params)
    return -(pi.log_prob(batch.actions) * batch.advantages * batch.weights).sum(-1)


def task_reinforce_losses(
    policy: torch.nn.Module,
    batch: TaskBatch,
    params: Mapping[str, torch.Tensor],
) -> torch.Tensor:
    """:func:`batched_reinforce_loss` for policies without stacked parameters: one call per task.

    :param params: stacked ``[K, ...]`` parameters; task ``k`` is evaluated at ``params[name][k]``.
    :return: ``[K]`` losses.
    """
    losses = []
    for k in range(batch.num_tasks):
        pi = policy(_flat_observations(batch.observations[k], 1), params={name: p[k] for name, p in params.items()})
        losses.append(-(pi.log_prob(batch.actions[k]) * batch.advantages[k] * batch.weights[k]).sum())
    return torch.stack(losses)


def inner_losses(
    policy: torch.nn.Module,
    batch: TaskBatch,
    params: Mapping[str, torch.Tensor],
    objective: str = "reinforce",
    old_log_probs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-task inner losses ``[K]``, REINFORCE's or LVC's, batched when the policy supports stacked parameters.

    ``"lvc"`` is ProMP's low-variance curvature objective, ``-E[pi / pi_old * A]``
    with ``pi_old`` the behaviour policy, a constant: at the behaviour policy
    its value is ``-E[A]`` and its gradient REINFORCE's, bit for bit, while its
    Hessian adds ``E[A grad log pi grad log pi^T]`` to REINFORCE's.

    :param old_log_probs: ``[K, M]`` behaviour log-probabilities for ``"lvc"``;
        ``None`` takes ``params`` as the behaviour (the ratio is 1, e.g. when sampling).
    """
    if objective == "reinforce":
        if getattr(policy, "supports_batched_params", False):
            return batched_reinforce_loss(policy, batch, params)
        return task_reinforce_losses(policy, batch, params)
    if objective != "lvc":
        raise ValueError(f"inner objective must be 'reinforce' or 'lvc', got {objective!r}")
    if getattr(policy, "supports_batched_params", False):
        log_probs = policy(_flat_observations(batch.observations, 2), params=params).log_prob(batch.actions)
    else:
        log_probs = torch.stack([
            policy(_flat_observations(batch.observations[k], 1), params={name: p[k] for name, p in params.items()})
            .log_prob(batch.actions[k]) for k in range(batch.num_tasks)])
    old = log_probs.detach() if old_log_probs is None else old_log_probs
    return -(torch.exp(log_probs - old) * batch.advantages * batch.weights).sum(-1)


def clipped_surrogate_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, weights: torch.Tensor,
                           clip: float) -> torch.Tensor:
    """PPO's clipped objective, negated, per task: ``-E[min(r A, clip(r, 1 - clip, 1 + clip) A)]``.

    :param log_ratio: ``[K, M]`` ``log pi - log pi_old``.
    :param weights: ``[K, M]`` step weights (:func:`~maml_rl.data.episodes.loss_weights`).
    :return: ``[K]`` losses.
    """
    return -(clipped_objective(torch.exp(log_ratio), advantages, clip) * weights).sum(-1)


def batched_reinforce_hessian(
    policy: torch.nn.Module,
    batch: TaskBatch,
    params: Mapping[str, torch.Tensor],
) -> Callable[[Sequence[torch.Tensor]], list[torch.Tensor]] | None:
    """Products with the Hessian of ``batched_reinforce_loss(policy, batch, params).sum()``.

    Uses the policy's closed-form products (``policy.nll_hessian``) when it has
    them for these parameters; the Hessian is block diagonal over tasks.

    :param policy: policy supporting stacked parameters.
    :param batch: the tasks' data.
    :param params: stacked ``[K, ...]`` parameters (values only; no graph is kept).
    :return: ``v -> H v`` on lists of ``[K, ...]`` tensors in the order of ``params``, or ``None``
        when the policy has no closed form (differentiate twice with autograd instead).
    """
    nll_hessian = getattr(policy, "nll_hessian", None)
    if nll_hessian is None:
        return None
    weights = batch.advantages * batch.weights
    return nll_hessian(_flat_observations(batch.observations, 2), batch.actions, weights, params)


def batched_kl_hessian(
    policy: torch.nn.Module,
    batch: TaskBatch,
    params: Mapping[str, torch.Tensor],
) -> Callable[[Sequence[torch.Tensor]], list[torch.Tensor]] | None:
    """Products with the Hessian of ``mean_kl(pi(params), pi(theta), batch).sum()`` in ``theta`` at ``params``.

    :param policy: policy supporting stacked parameters.
    :param batch: the tasks' data.
    :param params: stacked ``[K, ...]`` parameters (values only).
    :return: ``v -> H v`` from the policy's closed form (``policy.kl_hessian``), or ``None`` when it has none.
    """
    kl_hessian = getattr(policy, "kl_hessian", None)
    if kl_hessian is None:
        return None
    return kl_hessian(_flat_observations(batch.observations, 2), batch.weights, params)


def surrogate_loss(
    pi: Distribution,
    old_pi: Distribution,
    batch: TaskBatch,
    old_log_probs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Importance-weighted policy-gradient surrogate, per task.

    :param pi: current ``[K, M]`` action distribution.
    :param old_pi: the (detached) distribution the data was sampled with.
    :param batch: the tasks' data.
    :param old_log_probs: ``old_pi.log_prob(batch.actions)`` if already computed (line searches reuse it).
    :return: ``[K]`` losses ``-E[pi/old_pi * advantage]``.
    """
    if old_log_probs is None:
        old_log_probs = old_pi.log_prob(batch.actions)
    ratio = torch.exp(pi.log_prob(batch.actions) - old_log_probs)
    return -(ratio * batch.advantages * batch.weights).sum(-1)


def mean_kl(old_pi: Distribution, pi: Distribution, batch: TaskBatch) -> torch.Tensor:
    """``KL(old_pi || pi)`` averaged over valid steps like the losses, per task.

    :param old_pi: reference (detached) distribution.
    :param pi: current distribution.
    :param batch: gives the step weights.
    :return: ``[K]`` mean KL divergences.
    """
    return (kl_divergence(old_pi, pi) * batch.weights).sum(-1)
