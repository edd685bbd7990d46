"""MAML's inner loop, defined once for the sampler and the meta-learner.

The sampler adapts each task's parameters to collect the post-adaptation
episodes; the meta-learner adapts again to differentiate through the
adaptation. Both go through :func:`inner_step`, on the same
:class:`~maml_rl.data.episodes.TaskBatch`, so the parameters they reach are equal
bit for bit, and the meta-learner can check that the episodes it is given
were sampled by the policy it differentiates (see
:meth:`MAMLTRPO.step <maml_rl.metalearners.MAMLTRPO.step>`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import torch

from maml_rl.data.episodes import BatchEpisodes, TaskBatch, check_loss_averaging
from maml_rl.metalearners.gradient.keys import DEFAULTS
from maml_rl.metalearners.gradient.losses import inner_losses
from maml_rl.policies.policy import Params, expand_params, meta_parameters
from maml_rl.utils.torch_utils import gradient_step

__all__ = ["INNER_OBJECTIVES", "InnerLoop", "inner_step", "meta_parameters", "unstack_task_params"]

#: The inner losses of :func:`~maml_rl.metalearners.gradient.losses.inner_losses`.
INNER_OBJECTIVES = ("reinforce", "lvc")


@dataclass(frozen=True)
class InnerLoop:
    """How a task's parameters are adapted: ``num_steps`` gradient steps of size ``fast_lr``.

    :param fast_lr: step size of each inner gradient step.
    :param num_steps: number of inner steps (0: no adaptation).
    :param averaging: how the inner loss (and advantage normalisation) weighs a
        task's steps: ``"step"`` or ``"episode"`` (:func:`~maml_rl.data.episodes.loss_weights`).
    :param objective: the inner loss, ``"reinforce"`` (MAML) or ``"lvc"`` (ProMP's
        low-variance curvature objective: the same step at the behaviour policy,
        other second derivatives; :func:`~maml_rl.metalearners.gradient.losses.inner_losses`).
    """

    fast_lr: float = DEFAULTS.fast_lr
    num_steps: int = DEFAULTS.num_steps
    averaging: str = DEFAULTS.loss_averaging
    objective: str = "reinforce"

    def __post_init__(self) -> None:
        if isinstance(self.fast_lr, bool) or not isinstance(self.fast_lr, (int, float)) \
                or not math.isfinite(self.fast_lr) or self.fast_lr <= 0:
            raise ValueError(f"fast_lr must be a finite number > 0, got {self.fast_lr!r}")
        if isinstance(self.num_steps, bool) or not isinstance(self.num_steps, int) or self.num_steps < 0:
            raise ValueError(f"num_steps must be an int >= 0 (0: no adaptation), got {self.num_steps!r}")
        check_loss_averaging(self.averaging)
        if self.objective not in INNER_OBJECTIVES:
            raise ValueError(f"objective must be one of {INNER_OBJECTIVES}, got {self.objective!r}")
        object.__setattr__(self, "fast_lr", float(self.fast_lr))

    @classmethod
    def resolve(cls, inner_loop: "InnerLoop | None", num_steps=None, fast_lr=None, averaging=None) -> "InnerLoop":
        """``inner_loop``, or one from the three values (``None``: their defaults); not both."""
        if inner_loop is not None:
            given = [name for name, value in (("num_steps", num_steps), ("fast_lr", fast_lr), ("averaging", averaging))
                     if value is not None]
            if given:
                raise ValueError(f"give inner_loop or {', '.join(given)}, not both: inner_loop already sets them")
            if not isinstance(inner_loop, InnerLoop):
                raise TypeError(f"inner_loop must be a maml_rl.metalearners.gradient.adaptation.InnerLoop, got {inner_loop!r}")
            return inner_loop
        return cls(
            fast_lr=DEFAULTS.fast_lr if fast_lr is None else fast_lr,
            num_steps=DEFAULTS.num_steps if num_steps is None else num_steps,
            averaging=DEFAULTS.loss_averaging if averaging is None else averaging,
        )

    def task_batch(self, episodes: Sequence[BatchEpisodes], device: str | torch.device | None = None) -> TaskBatch:
        """The tasks' episodes stacked for :func:`inner_step`, weighted by ``averaging``."""
        batch = TaskBatch.from_episodes(episodes, self.averaging)
        return batch if device is None else TaskBatch(*(t.to(device) for t in batch))

    def adapt(self, policy: torch.nn.Module, batches: Sequence[TaskBatch], params: Params,
              first_order: bool = False, old_log_probs: Sequence[torch.Tensor | None] | None = None,
              ) -> "OrderedDict[str, torch.Tensor]":
        """``len(batches)`` inner steps from stacked ``params``; ``batches[i]`` is the data of step ``i``.

        :param old_log_probs: for ``"lvc"``, each step's ``[K, M]`` behaviour log-probabilities
            (``None``: the parameters of that step are the behaviour's).
        """
        for i, batch in enumerate(batches):
            old = None if old_log_probs is None else old_log_probs[i]
            params = inner_step(policy, batch, params, self.fast_lr, first_order, self.objective, old)
        return OrderedDict(params)

    def sampling_step(self, policy: torch.nn.Module, episodes: Sequence[BatchEpisodes], stacked: Params | None,
                      device: str | torch.device | None = None) -> "OrderedDict[str, torch.Tensor]":
        """One inner step of every task from stacked ``[K, ...]`` parameters
        (``None``: the policy's own), detached: sampling needs no meta-gradient,
        and the meta-learner reaches the same values bit for bit."""
        if stacked is None:
            own = OrderedDict((name, p.detach()) for name, p in meta_parameters(policy))
            stacked = expand_params(own, len(episodes))
        leaves = OrderedDict((name, p.detach().requires_grad_()) for name, p in stacked.items())
        batch = self.task_batch(episodes, device)
        with torch.enable_grad():
            new = inner_step(policy, batch, leaves, self.fast_lr, first_order=True, objective=self.objective)
        return OrderedDict((name, p.detach()) for name, p in new.items())


def inner_step(
    policy: torch.nn.Module,
    batch: TaskBatch,
    params: Params,
    step_size: float,
    first_order: bool = False,
    objective: str = "reinforce",
    old_log_probs: torch.Tensor | None = None,
) -> "OrderedDict[str, torch.Tensor]":
    """One gradient step of every task at once: the only inner step in the package.

    :param policy: ``policy(observations, params=...) -> Distribution``.
    :param batch: the ``K`` tasks' episodes (advantages computed).
    :param params: stacked ``[K, ...]`` parameters, differentiable.
    :param step_size: the inner learning rate.
    :param first_order: keep no graph through the gradient.
    :param objective: ``"reinforce"`` or ``"lvc"`` (:func:`~maml_rl.metalearners.gradient.losses.inner_losses`).
    :param old_log_probs: for ``"lvc"``, the ``[K, M]`` behaviour log-probabilities.
    :return: the ``[K, ...]`` parameters after the step.
    """
    losses = inner_losses(policy, batch, params, objective, old_log_probs)
    # The sum over tasks differentiates into each task's own gradient.
    return gradient_step(losses.sum(), params, step_size, first_order)


def unstack_task_params(params: Params) -> list["OrderedDict[str, torch.Tensor]"]:
    """One dict per task from stacked ``[K, ...]`` parameters (views, no copies)."""
    names = list(params)
    num_tasks = params[names[0]].shape[0]
    return [OrderedDict((name, params[name][k]) for name in names) for k in range(num_tasks)]
