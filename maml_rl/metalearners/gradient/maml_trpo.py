"""MAML with a trust-region (TRPO) meta-update, batched over tasks."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, ClassVar, Sequence

import numpy as np
import torch
from torch.distributions import Distribution
from torch.nn.utils import vector_to_parameters

from maml_rl.metalearners.gradient.adaptation import InnerLoop
from maml_rl.data.episodes import TaskBatch
from maml_rl.metalearners.gradient.keys import DEFAULTS, MAML_TRPO_KEYS
from maml_rl.metalearners.gradient.losses import mean_kl, surrogate_loss
from maml_rl.metalearners.base import StepLogs, check_same_params, recorded_params
from maml_rl.metalearners.gradient.learner import GradientMetaLearner, TrainEpisodes, ValidEpisodes
from maml_rl.metalearners.gradient.meta_graph import CURVATURES, MetaGraph
from maml_rl.policies.policy import Params, Policy, expand_params
from maml_rl.utils.optimization import conjugate_gradient
from maml_rl.utils.torch_utils import detach_distribution, flatten_tensors

__all__ = ["MAMLTRPO"]



@dataclass(frozen=True)
class _SearchDirection:
    """What :meth:`MAMLTRPO._search_direction` finds at the current parameters, graphs freed."""

    loss: float
    """Surrogate loss, averaged over tasks."""
    kl: float
    """Mean KL from the old policy (0 for on-policy data)."""
    direction: torch.Tensor
    """Natural-gradient direction ``s = (H + damping)^-1 g``, flat."""
    curvature: float
    """``s^T (H + damping) s``."""
    old_pi: Distribution
    """The policy that sampled the valid episodes (detached)."""
    old_log_probs: torch.Tensor
    """Its log-probabilities of the valid actions."""
    ratio_deviation: float
    """``max |pi / pi_old - 1|`` over the valid steps: 0 when the data is on-policy."""
    time_adapt: float
    time_loss_grad: float
    time_cg: float


class MAMLTRPO(GradientMetaLearner):
    """Model-Agnostic Meta-Learning with TRPO as the outer optimiser.

    Inner loop: ``num_steps`` REINFORCE gradient steps of size ``fast_lr`` per task
    (:attr:`inner_loop`, the same function the sampler adapts with).
    Outer loop: one TRPO step on the post-adaptation surrogate loss, averaged
    over tasks, under a mean-KL trust region. All tasks are processed together:
    their data is stacked and the meta-parameters are expanded to one copy per
    task, so each phase is a single batched forward/backward. Defaults are the
    declared ones (:mod:`maml_rl.config.hyperparameters`), those of a configuration
    that leaves the key out.

    :param policy: policy supporting stacked per-task parameters.
    :param fast_lr: inner-loop step size.
    :param num_steps: number of inner gradient steps.
    :param first_order: ignore second-order terms through the inner steps.
    :param device: device the policy and the data are put on.
    :param curvature: ``"auto"`` applies the inner loop's second derivatives through the
        policy's closed-form Hessian products when it has them (exact, and faster);
        ``"autograd"`` always differentiates autograd's backward pass.
    :param averaging: how losses weigh a task's steps, ``"step"`` or ``"episode"``.
    :param max_kl: trust-region radius on the mean KL divergence.
    :param cg_iters: conjugate-gradient iterations.
    :param cg_damping: damping added to the KL Hessian.
    :param ls_max_steps: maximum number of line-search steps.
    :param ls_backtrack_ratio: step shrink factor between line-search steps.
    :param gae_lambda: GAE's lambda for the advantages of the episodes :meth:`sample` gathers.
    """

    hyperparameters = MAML_TRPO_KEYS
    title = "MAML-TRPO"

    #: A fraction of a second per iteration of 2D navigation (MetaLearner.contract_config); one gradient step.
    contract_config: ClassVar[dict] = {
        "algorithm": "maml-trpo", "env-name": "2DNavigation-v0",
        "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 10}, "gamma": 0.99,
        "hidden-sizes": [16, 16], "nonlinearity": "tanh", "fast-batch-size": 4, "meta-batch-size": 3,
        "fast-lr": 0.1, "num-batches": 3}
    contract_stages: ClassVar[int] = 2

    def __init__(
        self,
        policy: Policy,
        fast_lr: float = DEFAULTS.fast_lr,
        num_steps: int = DEFAULTS.num_steps,
        first_order: bool = DEFAULTS.first_order,
        device: str | torch.device = "cpu",
        curvature: str = "auto",
        averaging: str = DEFAULTS.loss_averaging,
        *,
        max_kl: float = DEFAULTS.max_kl,
        cg_iters: int = DEFAULTS.cg_iters,
        cg_damping: float = DEFAULTS.cg_damping,
        ls_max_steps: int = DEFAULTS.ls_max_steps,
        ls_backtrack_ratio: float = DEFAULTS.ls_backtrack_ratio,
        gae_lambda: float = DEFAULTS.gae_lambda,
    ) -> None:
        if not isinstance(first_order, (bool, np.bool_)):
            raise TypeError(f"first_order must be a bool, got {first_order!r} (the arguments are MAMLTRPO(policy, "
                            "fast_lr, num_steps, first_order, device, ...))")
        if curvature not in CURVATURES:
            raise ValueError(f"curvature must be 'auto' or 'autograd', got {curvature!r}")
        self._setup(policy, device, fast_lr, num_steps, averaging, gae_lambda)
        self.first_order = bool(first_order)
        self.curvature = curvature
        self.max_kl = float(max_kl)
        self.cg_iters = int(cg_iters)
        self.cg_damping = float(cg_damping)
        self.ls_max_steps = int(ls_max_steps)
        self.ls_backtrack_ratio = float(ls_backtrack_ratio)

    # ------------------------------------------------------------------ data
    def task_batch(self, episodes_list: ValidEpisodes) -> TaskBatch:
        """Stack one batch per task into a :class:`~maml_rl.data.episodes.TaskBatch` on this device."""
        return self.inner_loop.task_batch(episodes_list, self.device)

    def _task_batches(
        self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes
    ) -> tuple[list[TaskBatch], TaskBatch]:
        return [self.task_batch(step_episodes) for step_episodes in train_episodes], self.task_batch(valid_episodes)

    def _meta_graph(self, train_batches: Sequence[TaskBatch], valid: TaskBatch) -> MetaGraph:
        return MetaGraph(self.policy, self.inner_loop, OrderedDict(self.policy.named_meta_parameters()),
                         train_batches, valid.observations, first_order=self.first_order, curvature=self.curvature)

    @staticmethod
    def _surrogate(
        pi: Distribution, old_pi: Distribution, old_log_probs: torch.Tensor, valid: TaskBatch
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The surrogate loss and the KL from ``old_pi``, both averaged over tasks."""
        return surrogate_loss(pi, old_pi, valid, old_log_probs).mean(), mean_kl(old_pi, pi, valid).mean()

    # ------------------------------------------------------------ adaptation
    def adapt(self, train_episodes: TrainEpisodes, first_order: bool | None = None) -> Params:
        """Every task's adapted parameters, stacked ``[K, ...]``.

        :param train_episodes: ``train_episodes[step][task]``, gathered before inner step ``step``.
        :param first_order: override of the instance's ``first_order``.
        :return: the adapted parameters (in the graph of the meta-parameters unless first order).
        """
        return self._adapt_batches([self.task_batch(step) for step in train_episodes], first_order)

    def _adapt_batches(self, train_batches: Sequence[TaskBatch], first_order: bool | None = None) -> Params:
        if first_order is None:
            first_order = self.first_order
        expanded = expand_params(OrderedDict(self.policy.named_meta_parameters()), train_batches[0].num_tasks)
        return self.inner_loop.adapt(self.policy, train_batches, expanded, first_order)

    # ----------------------------------------------------------- inspection
    def meta_gradient(self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes) -> torch.Tensor:
        """Gradient of the mean post-adaptation surrogate loss at the current parameters, for on-policy episodes.

        :param train_episodes: ``train_episodes[step][task]``.
        :param valid_episodes: ``valid_episodes[task]``.
        :return: flat vector over :meth:`Policy.named_meta_parameters`, in order.
        """
        train_batches, valid = self._task_batches(train_episodes, valid_episodes)
        graph = self._meta_graph(train_batches, valid)
        old_pi = detach_distribution(graph.pi)
        loss, _ = self._surrogate(graph.pi, old_pi, old_pi.log_prob(valid.actions), valid)
        return graph.gradient(loss).detach()

    def kl_hessian_vector_product(
        self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes, damping: float = 0.0
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """Products with the Hessian of the mean post-adaptation KL at the current parameters.

        :meth:`step` solves its conjugate gradient with the same products.

        :param train_episodes: ``train_episodes[step][task]``.
        :param valid_episodes: ``valid_episodes[task]``.
        :param damping: added multiple of the identity.
        :return: function mapping a flat vector over the meta-parameters to ``H v + damping v``.
        """
        train_batches, valid = self._task_batches(train_episodes, valid_episodes)
        graph = self._meta_graph(train_batches, valid)
        return graph.kl_hessian_vector_product(detach_distribution(graph.pi), valid, damping)

    # ------------------------------------------------------------- meta-step
    def step(self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes) -> StepLogs:
        """One TRPO meta-update of the policy's parameters.

        Episodes from :class:`~maml_rl.samplers.MultiTaskSampler` record the
        parameters that sampled them. The update starts from those: the old
        policy of the importance ratios and the KL is the one that sampled the
        valid episodes, and the step refuses (:class:`StaleEpisodesError`)
        episodes whose sampling parameters differ from this learner's, bit for
        bit: the pre-adaptation ones (e.g. episodes already used for a step)
        or the adapted ones (e.g. a sampler adapting with another ``fast_lr``).
        Episodes without that record are taken to be on-policy.

        :param train_episodes: ``train_episodes[step][task]``, gathered before inner step ``step``
            (advantages computed).
        :param valid_episodes: ``valid_episodes[task]``, gathered with the adapted parameters.
        :return: ``loss_before``, ``loss_after``, ``kl_before``, ``kl_after`` (at the final
            parameters), ``ratio_deviation_before`` (max ``|pi/pi_old - 1|`` over the valid steps
            before the update: 0 for on-policy data), ``ls_steps`` (number of line-search trials
            evaluated), ``accepted`` (whether the parameters moved) and timings in seconds:
            ``time_adapt`` (inner loop), ``time_loss_grad`` (outer loss and meta-gradient),
            ``time_cg`` (conjugate gradient), ``time_line_search`` and ``time_total``.
        """
        behaviour = self._behaviour_params(train_episodes, valid_episodes)
        start = time.perf_counter()
        train_batches, valid = self._task_batches(train_episodes, valid_episodes)
        params = [p for _, p in self.policy.named_meta_parameters()]

        # Surrogate loss, its gradient, and the natural-gradient direction by conjugate gradient.
        search = self._search_direction(train_batches, valid, behaviour, valid_episodes[0].inner_loop)
        self.check_finite(search.loss, "the surrogate loss")
        t_search = time.perf_counter()

        # Backtracking line search from the step whose quadratic KL model reaches max_kl.
        loss_after, kl_after = search.loss, search.kl
        accepted = False
        ls_steps = 0
        with torch.no_grad():
            old_vector = flatten_tensors(params).clone()
            if search.curvature > 0 and math.isfinite(search.curvature):
                full_step = search.direction * math.sqrt(2.0 * self.max_kl / search.curvature)
                step_size = 1.0
                with self.progress.phase("line search", self.ls_max_steps, "trial") as advance:
                    for _ in range(self.ls_max_steps):
                        ls_steps += 1
                        vector_to_parameters(old_vector - step_size * full_step, params)
                        loss, kl = self._trial(train_batches, valid, search.old_pi, search.old_log_probs)
                        advance(1)
                        if loss < search.loss and kl < self.max_kl:
                            accepted = True
                            loss_after, kl_after = loss, kl
                            break
                        step_size *= self.ls_backtrack_ratio
            if not accepted:
                vector_to_parameters(old_vector, params)
        end = time.perf_counter()

        return {
            "loss_before": search.loss,
            "loss_after": loss_after,
            "kl_before": search.kl,
            "kl_after": kl_after,
            "ratio_deviation_before": search.ratio_deviation,
            "ls_steps": ls_steps,
            "accepted": accepted,
            "time_adapt": search.time_adapt,
            "time_loss_grad": search.time_loss_grad,
            "time_cg": search.time_cg,
            "time_line_search": end - t_search,
            "time_total": end - start,
        }

    def _behaviour_params(self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes) -> Params | None:
        """The adapted parameters that sampled ``valid_episodes`` (``None``: not recorded, taken to be on-policy).

        :raises ValueError: the episodes do not fit :attr:`num_steps` or do not cover the same tasks.
        :raises StaleEpisodesError: ``train_episodes[0]`` were sampled by other parameters than the policy's.
        """
        self.check_episodes(train_episodes, valid_episodes)
        names = [name for name, _ in self.policy.named_meta_parameters()]
        pre_adaptation = recorded_params(train_episodes[0], names)
        if pre_adaptation is not None:
            current = expand_params(OrderedDict(self.policy.named_meta_parameters()), len(valid_episodes))
            check_same_params(current, pre_adaptation, "train_episodes[0]",
                              "Sample new episodes after every step(): each batch serves one update.")
        behaviour = recorded_params(valid_episodes, names)
        if behaviour is not None:
            behaviour = OrderedDict((name, p.to(self.device)) for name, p in behaviour.items())
        return behaviour

    def _search_direction(
        self,
        train_batches: Sequence[TaskBatch],
        valid: TaskBatch,
        behaviour: Params | None,
        sampled_with: InnerLoop | None,
    ) -> _SearchDirection:
        """Loss, KL and natural-gradient direction at the current parameters.

        Kept in its own frame so that every graph is freed when it returns.
        """
        start = time.perf_counter()
        graph = self._meta_graph(train_batches, valid)
        t_adapt = time.perf_counter()
        old_pi = self._old_policy(graph, valid, behaviour, sampled_with)
        old_log_probs = old_pi.log_prob(valid.actions)
        loss, kl = self._surrogate(graph.pi, old_pi, old_log_probs, valid)
        loss_grad = graph.gradient(loss)
        t_loss_grad = time.perf_counter()
        hvp = graph.kl_hessian_vector_product(old_pi, valid, self.cg_damping)
        direction, residual = conjugate_gradient(hvp, loss_grad, cg_iters=self.cg_iters, return_residual=True)
        # s^T A s = s^T (b - r): the curvature along s without one more product.
        curvature = torch.dot(direction, loss_grad - residual).item()
        end = time.perf_counter()
        with torch.no_grad():
            deviation = (torch.exp(graph.pi.log_prob(valid.actions) - old_log_probs) - 1).abs()
            ratio_deviation = deviation.masked_fill(valid.weights == 0, 0).max().item()
        return _SearchDirection(
            loss=loss.item(), kl=kl.item(), direction=direction, curvature=curvature, old_pi=old_pi,
            old_log_probs=old_log_probs, ratio_deviation=ratio_deviation, time_adapt=t_adapt - start,
            time_loss_grad=t_loss_grad - t_adapt, time_cg=end - t_loss_grad,
        )

    def _old_policy(
        self, graph: MetaGraph, valid: TaskBatch, behaviour: Params | None, sampled_with: InnerLoop | None
    ) -> Distribution:
        """The policy that sampled the valid episodes, after checking it is the adapted policy (detached)."""
        if behaviour is None:
            # Episodes from elsewhere carry no behaviour policy: taken to be on-policy.
            return detach_distribution(graph.pi)
        recorded = f"They were adapted with {sampled_with}. " if sampled_with is not None else ""
        check_same_params(
            graph.adapted_params, behaviour, "valid_episodes",
            f"{recorded}Sample them with this learner's inner loop, {self.inner_loop} "
            f"(learner.sample(sampler, tasks), or sample_adapt_sample(sampler, tasks, "
            "inner_loop=learner.inner_loop)), and with the current policy.",
        )
        with torch.no_grad():
            return self.policy(valid.observations, params=behaviour)

    @torch.no_grad()
    def _trial(
        self, train_batches: Sequence[TaskBatch], valid: TaskBatch, old_pi: Distribution, old_log_probs: torch.Tensor
    ) -> tuple[float, float]:
        """Surrogate loss and KL at the policy's current parameters (a line-search trial; no graph kept)."""
        with torch.enable_grad():
            # The adapted values do not depend on first/second order; skip the graph.
            adapted = self._adapt_batches(train_batches, first_order=True)
        adapted = OrderedDict((name, p.detach()) for name, p in adapted.items())
        loss, kl = self._surrogate(self.policy(valid.observations, params=adapted), old_pi, old_log_probs, valid)
        return loss.item(), kl.item()
