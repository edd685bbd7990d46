"""MAML with a trust-region (TRPO) meta-update, batched over tasks."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch.distributions import Distribution
from torch.nn.utils import vector_to_parameters

from maml_rl.adaptation import InnerLoop, inner_step
from maml_rl.episodes import TaskBatch
from maml_rl.hyperparameters import DEFAULTS
from maml_rl.losses import batched_kl_hessian, batched_reinforce_hessian, mean_kl, surrogate_loss
from maml_rl.metalearners.base import (
    MetaLearner,
    StepLogs,
    TrainEpisodes,
    ValidEpisodes,
    check_same_params,
    recorded_params,
)
from maml_rl.policies.policy import Policy, expand_params
from maml_rl.utils.optimization import conjugate_gradient
from maml_rl.utils.torch_utils import (
    detach_distribution,
    distribution_tensors,
    flatten_tensors,
    rebuild_distribution,
    unflatten_like,
)

TensorList = Sequence[torch.Tensor]


def _grad(
    outputs: TensorList, inputs: TensorList, grad_outputs: TensorList | None = None, create_graph: bool = False
) -> tuple[torch.Tensor, ...]:
    """``torch.autograd.grad`` keeping the graph, with zeros for inputs an output does not reach."""
    return torch.autograd.grad(
        outputs,
        inputs,
        grad_outputs=grad_outputs,
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
        materialize_grads=True,
    )


class _MetaGraph:
    """Graphs of one meta-update, from the meta-parameters to the post-adaptation policy.

    Three pieces are kept separate so that products with the KL Hessian can be
    formed without third-order derivatives:

    * ``expanded -> adapted``: the inner loop, from ``K`` stride-0 copies of the
      meta-parameters to the stacked adapted parameters;
    * ``outer -> dist``: the policy at (a detached copy of) the adapted parameters;
    * ``dist -> KL``: the KL divergence as a function of the distribution's tensors.

    When the policy has closed-form products with its inner loss's Hessian
    (:meth:`Policy.nll_hessian`), the inner loop keeps no graph: its Jacobian,
    ``prod_k (I - fast_lr * H_k)`` over the inner steps, is applied through
    those products instead of by differentiating autograd's backward pass.
    """

    def __init__(
        self,
        learner: "MAMLTRPO",
        params: "OrderedDict[str, torch.Tensor]",
        train_batches: Sequence[TaskBatch],
        valid: TaskBatch,
        behaviour: "OrderedDict[str, torch.Tensor] | None" = None,
        sampled_with: InnerLoop | None = None,
    ) -> None:
        self.names = list(params.keys())
        self.params = list(params.values())
        num_tasks = valid.num_tasks
        self.num_tasks = num_tasks
        expanded = expand_params(params, num_tasks)
        self.expanded = list(expanded.values())
        self.fast_lr = learner.inner_loop.fast_lr
        self.policy = learner.policy
        self.curvature = learner.curvature
        self.inner_hessians = None
        if not learner.first_order and learner.curvature == "auto":
            adapted, self.inner_hessians = learner._adapt_with_hessians(expanded, train_batches)
        if self.inner_hessians is None:
            adapted = learner.inner_loop.adapt(learner.policy, train_batches, expanded, learner.first_order)
        self.adapted = list(adapted.values())
        self.t_adapt = time.perf_counter()

        outer = OrderedDict((name, p.detach().requires_grad_()) for name, p in adapted.items())
        self.outer = list(outer.values())
        self.pi = learner.policy(valid.observations, params=outer)
        if behaviour is None:
            # Episodes from elsewhere carry no behaviour policy: taken to be on-policy.
            self.old_pi = detach_distribution(self.pi)
        else:
            recorded = f"They were adapted with {sampled_with}. " if sampled_with is not None else ""
            check_same_params(
                outer, behaviour, "valid_episodes",
                f"{recorded}Sample them with this learner's inner loop, {learner.inner_loop} "
                f"(sampler.sample(tasks, inner_loop=learner.inner_loop)), and with the current policy.",
            )
            with torch.no_grad():
                self.old_pi = learner.policy(valid.observations, params=behaviour)
        self.old_log_probs = self.old_pi.log_prob(valid.actions)
        with torch.no_grad():
            # max |pi / pi_old - 1| over the valid steps: 0 when the data is on-policy.
            deviation = (torch.exp(self.pi.log_prob(valid.actions) - self.old_log_probs) - 1).abs()
            self.ratio_deviation = deviation.masked_fill(valid.weights == 0, 0).max().item()
        self.loss = surrogate_loss(self.pi, self.old_pi, valid, self.old_log_probs).mean()
        self.kl = mean_kl(self.old_pi, self.pi, valid).mean()
        # Chain rule across the cut: d loss / d outer, then back through the inner loop.
        grad_outer = _grad([self.loss], self.outer)
        self.loss_grad = flatten_tensors(self.adaptation_vjp(grad_outer))
        # With one inner step, d adapted / d expanded is
        # I - fast_lr * Hessian of the inner loss: symmetric, so a backward pass
        # gives its product with a vector.
        self.first_order = learner.first_order
        self.symmetric_adaptation = len(train_batches) == 1
        self.t_loss_grad = time.perf_counter()

    def adaptation_vjp(self, cotangents: TensorList) -> list[torch.Tensor]:
        """``sum_k J_k^T u_k``: per-task cotangents of the adapted parameters, pulled back to the meta-parameters."""
        if self.inner_hessians is None:
            return list(_grad(self.adapted, self.params, cotangents))
        # J = (I - a H_last) ... (I - a H_first) with each H symmetric, so J^T is the reverse product.
        return [u.sum(0) for u in self._inner_steps_product(cotangents, reversed(self.inner_hessians))]

    def _inner_steps_product(self, vectors: TensorList, hessians: Iterable[Callable]) -> TensorList:
        """``(I - fast_lr * H_n) ... (I - fast_lr * H_1) v`` for ``hessians`` in the order ``H_1 ... H_n``."""
        for hessian in hessians:
            vectors = [x - self.fast_lr * hx for x, hx in zip(vectors, hessian(vectors))]
        return vectors

    def kl_hessian_vector_product(self, valid: TaskBatch, damping: float) -> Callable[[torch.Tensor], torch.Tensor]:
        """``v -> H v + damping * v`` with ``H`` the Hessian of the mean KL at the current parameters.

        At the current parameters the new and old distributions coincide, so the
        KL's gradient with respect to the distribution's tensors is zero and its
        Hessian with respect to the meta-parameters is exactly ``J^T F J``: ``J``
        the Jacobian of the distribution's tensors (through the inner loop) and
        ``F`` the KL's Hessian in distribution space. Each product is then two
        passes through the inner-loop graph and two through the policy, all
        built once and reused for every conjugate-gradient iteration.

        :param valid: the tasks' validation data (gives the KL weights).
        :param damping: added multiple of the identity.
        """
        policy_hessian = None
        if self.curvature == "auto":
            # The KL is averaged over tasks.
            weighted = valid._replace(weights=valid.weights / self.num_tasks)
            policy_hessian = batched_kl_hessian(self.policy, weighted, OrderedDict(zip(self.names, self.outer)))
        if policy_hessian is None:
            policy_hessian = self._policy_kl_hessian(valid)

        if self.inner_hessians is not None:

            def adaptation_jvp(tangents: TensorList) -> TensorList:
                return self._inner_steps_product(tangents, self.inner_hessians)

        elif self.first_order:

            def adaptation_jvp(tangents: TensorList) -> TensorList:
                # First order: the adapted parameters move one-for-one with the meta-parameters.
                return tangents

        elif self.symmetric_adaptation:

            def adaptation_jvp(tangents: TensorList) -> TensorList:
                return _grad(self.adapted, self.expanded, tangents)

        else:
            adapted_dummies = [torch.zeros_like(t, requires_grad=True) for t in self.adapted]
            adaptation_vjp = _grad(self.adapted, self.expanded, adapted_dummies, create_graph=True)

            def adaptation_jvp(tangents: TensorList) -> TensorList:
                return _grad(adaptation_vjp, adapted_dummies, tangents)

        def product(vector: torch.Tensor) -> torch.Tensor:
            tangents = [v.expand(self.num_tasks, *v.shape) for v in unflatten_like(vector, self.params)]
            outer_cotangents = policy_hessian(adaptation_jvp(tangents))
            return flatten_tensors(self.adaptation_vjp(outer_cotangents)) + damping * vector

        return product

    def _policy_kl_hessian(self, valid: TaskBatch) -> Callable[[TensorList], TensorList]:
        """KL Hessian products at the adapted parameters, ``J^T F J``, by autograd.

        ``F`` comes from differentiating the KL twice in distribution space; ``J v``
        from differentiating ``J^T u`` (linear in ``u``) with respect to ``u``.
        """
        dist = distribution_tensors(self.pi)
        dist_leaves = [t.detach().requires_grad_() for t in dist]
        kl = mean_kl(self.old_pi, rebuild_distribution(self.pi, dist_leaves), valid).mean()
        kl_grad = _grad([kl], dist_leaves, create_graph=True)
        dist_dummies = [torch.zeros_like(t, requires_grad=True) for t in dist]
        policy_vjp = _grad(dist, self.outer, dist_dummies, create_graph=True)

        def product(adapted_tangents: TensorList) -> TensorList:
            dist_tangents = _grad(policy_vjp, dist_dummies, adapted_tangents)
            dist_cotangents = _grad(kl_grad, dist_leaves, dist_tangents)
            return _grad(dist, self.outer, dist_cotangents)

        return product


class MAMLTRPO(MetaLearner):
    """Model-Agnostic Meta-Learning with TRPO as the outer optimiser.

    Inner loop: ``num_steps`` REINFORCE gradient steps of size ``fast_lr`` per task
    (:attr:`inner_loop`, the same function the sampler adapts with).
    Outer loop: one TRPO step on the post-adaptation surrogate loss, averaged
    over tasks, under a mean-KL trust region. All tasks are processed together:
    their data is stacked and the meta-parameters are expanded to one copy per
    task, so each phase is a single batched forward/backward. Defaults come
    from :data:`maml_rl.hyperparameters.DEFAULTS`.

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
    """

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
    ) -> None:
        if not getattr(policy, "supports_batched_params", False):
            raise TypeError(f"{type(policy).__name__} does not support stacked per-task parameters")
        if curvature not in ("auto", "autograd"):
            raise ValueError(f"curvature must be 'auto' or 'autograd', got {curvature!r}")
        if num_steps < 1:
            raise ValueError(f"MAML needs num_steps >= 1 inner steps, got {num_steps!r}")
        self.device = torch.device(device)
        self.policy = policy.to(self.device)
        self.inner_loop = InnerLoop(fast_lr=fast_lr, num_steps=num_steps, averaging=averaging)
        self.first_order = bool(first_order)
        self.curvature = curvature
        self.max_kl = float(max_kl)
        self.cg_iters = int(cg_iters)
        self.cg_damping = float(cg_damping)
        self.ls_max_steps = int(ls_max_steps)
        self.ls_backtrack_ratio = float(ls_backtrack_ratio)

    @classmethod
    def from_config(cls, policy: Policy, config: Mapping[str, Any], device: str | torch.device = "cpu") -> "MAMLTRPO":
        """Build from a validated configuration's keys (``fast-lr``, ``max-kl``, ...)."""
        return cls(
            policy, fast_lr=config["fast-lr"], num_steps=config["num-steps"], first_order=config["first-order"],
            device=device, averaging=config["loss-averaging"], max_kl=config["max-kl"], cg_iters=config["cg-iters"],
            cg_damping=config["cg-damping"], ls_max_steps=config["ls-max-steps"],
            ls_backtrack_ratio=config["ls-backtrack-ratio"],
        )

    @property
    def fast_lr(self) -> float:
        return self.inner_loop.fast_lr

    @property
    def num_steps(self) -> int:
        return self.inner_loop.num_steps

    @property
    def averaging(self) -> str:
        return self.inner_loop.averaging

    # ------------------------------------------------------------ adaptation
    def adapt(self, train_episodes: TrainEpisodes, first_order: bool | None = None) -> "OrderedDict[str, torch.Tensor]":
        """Every task's adapted parameters, stacked ``[K, ...]``.

        :param train_episodes: ``train_episodes[step][task]``, gathered before inner step ``step``.
        :param first_order: override of the instance's ``first_order``.
        :return: the adapted parameters (in the graph of the meta-parameters unless first order).
        """
        return self._adapt_batches([self.task_batch(step) for step in train_episodes], first_order)

    def _adapt_batches(
        self,
        train_batches: Sequence[TaskBatch],
        first_order: bool | None = None,
    ) -> "OrderedDict[str, torch.Tensor]":
        if first_order is None:
            first_order = self.first_order
        params = OrderedDict(self.policy.named_meta_parameters())
        expanded = expand_params(params, train_batches[0].num_tasks)
        return self.inner_loop.adapt(self.policy, train_batches, expanded, first_order)

    def _adapt_with_hessians(
        self,
        stacked: "OrderedDict[str, torch.Tensor]",
        train_batches: Sequence[TaskBatch],
    ) -> tuple["OrderedDict[str, torch.Tensor]", list[Callable] | None]:
        """Adapted parameters (values only) and each inner step's Hessian products.

        :return: ``(adapted, hessians)``, with ``hessians`` ``None`` when the policy has no closed form.
        """
        hessians = []
        stacked = OrderedDict((name, p.detach()) for name, p in stacked.items())
        for batch in train_batches:
            hessian = batched_reinforce_hessian(self.policy, batch, stacked)
            if hessian is None:
                return stacked, None
            hessians.append(hessian)
            with torch.enable_grad():
                leaves = OrderedDict((name, p.requires_grad_()) for name, p in stacked.items())
                stacked = inner_step(self.policy, batch, leaves, self.inner_loop.fast_lr, first_order=True)
            stacked = OrderedDict((name, p.detach()) for name, p in stacked.items())
        return stacked, hessians

    # ------------------------------------------------------------- meta-step
    def task_batch(self, episodes_list: ValidEpisodes) -> TaskBatch:
        """Stack one batch per task into a :class:`~maml_rl.episodes.TaskBatch` on this device."""
        return self.inner_loop.task_batch(episodes_list, self.device)

    def meta_gradient(
        self,
        train_episodes: TrainEpisodes,
        valid_episodes: ValidEpisodes,
    ) -> torch.Tensor:
        """Gradient of the mean post-adaptation surrogate loss at the current parameters.

        :param train_episodes: ``train_episodes[step][task]``.
        :param valid_episodes: ``valid_episodes[task]``.
        :return: flat vector over :meth:`Policy.named_meta_parameters`, in order.
        """
        train_batches = [self.task_batch(step_episodes) for step_episodes in train_episodes]
        valid = self.task_batch(valid_episodes)
        graph = _MetaGraph(self, OrderedDict(self.policy.named_meta_parameters()), train_batches, valid)
        return graph.loss_grad.detach()

    def kl_hessian_vector_product(
        self,
        train_episodes: TrainEpisodes,
        valid_episodes: ValidEpisodes,
        damping: float = 0.0,
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """Products with the Hessian of the mean post-adaptation KL at the current parameters.

        Exposed for inspection and tests; :meth:`step` builds the same products internally.

        :param train_episodes: ``train_episodes[step][task]``.
        :param valid_episodes: ``valid_episodes[task]``.
        :param damping: added multiple of the identity.
        :return: function mapping a flat vector over the meta-parameters to ``H v + damping v``.
        """
        train_batches = [self.task_batch(step_episodes) for step_episodes in train_episodes]
        valid = self.task_batch(valid_episodes)
        graph = _MetaGraph(self, OrderedDict(self.policy.named_meta_parameters()), train_batches, valid)
        return graph.kl_hessian_vector_product(valid, damping)

    @torch.no_grad()
    def _evaluate(
        self, train_batches: Sequence[TaskBatch], valid: TaskBatch, old_pi: Distribution, old_log_probs: torch.Tensor
    ) -> tuple[float, float]:
        """Surrogate loss and KL at the policy's current parameters (no graph kept)."""
        with torch.enable_grad():
            # The adapted values do not depend on first/second order; skip the graph.
            adapted = self._adapt_batches(train_batches, first_order=True)
        adapted = OrderedDict((name, p.detach()) for name, p in adapted.items())
        pi = self.policy(valid.observations, params=adapted)
        loss = surrogate_loss(pi, old_pi, valid, old_log_probs).mean()
        kl = mean_kl(old_pi, pi, valid).mean()
        return loss.item(), kl.item()

    def _search_direction(
        self,
        params: "OrderedDict[str, torch.Tensor]",
        train_batches: Sequence[TaskBatch],
        valid: TaskBatch,
        behaviour: "OrderedDict[str, torch.Tensor] | None",
        sampled_with: InnerLoop | None,
        timings: dict[str, float],
    ) -> tuple[float, float, torch.Tensor, float, Distribution, torch.Tensor]:
        """Loss, KL, natural-gradient direction and its curvature ``s^T (H + damping) s``.

        Kept in its own frame so that every graph is freed when it returns.
        """
        start = time.perf_counter()
        graph = _MetaGraph(self, params, train_batches, valid, behaviour, sampled_with)
        hvp = graph.kl_hessian_vector_product(valid, self.cg_damping)
        stepdir, residual = conjugate_gradient(hvp, graph.loss_grad, cg_iters=self.cg_iters, return_residual=True)
        # s^T A s = s^T (b - r): the curvature along s without one more product.
        shs = torch.dot(stepdir, graph.loss_grad - residual).item()
        end = time.perf_counter()
        timings["time_adapt"] = graph.t_adapt - start
        timings["time_loss_grad"] = graph.t_loss_grad - graph.t_adapt
        timings["time_cg"] = end - graph.t_loss_grad
        timings["ratio_deviation_before"] = graph.ratio_deviation
        return graph.loss.item(), graph.kl.item(), stepdir, shs, graph.old_pi, graph.old_log_probs

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
        if len(train_episodes) != self.num_steps:
            raise ValueError(f"expected train episodes for {self.num_steps} inner step(s), got {len(train_episodes)}")
        if any(len(step_episodes) != len(valid_episodes) for step_episodes in train_episodes):
            raise ValueError("every inner step needs train episodes for the same tasks as valid_episodes")
        names = [name for name, _ in self.policy.named_meta_parameters()]
        sampled_with = recorded_params(train_episodes[0], names)
        if sampled_with is not None:
            current = expand_params(OrderedDict(self.policy.named_meta_parameters()), len(valid_episodes))
            check_same_params(current, sampled_with, "train_episodes[0]",
                              "Sample new episodes after every step(): each batch serves one update.")
        behaviour = recorded_params(valid_episodes, names)
        if behaviour is not None:
            behaviour = OrderedDict((name, p.to(self.device)) for name, p in behaviour.items())
        start = time.perf_counter()
        train_batches = [self.task_batch(step_episodes) for step_episodes in train_episodes]
        valid = self.task_batch(valid_episodes)
        named = OrderedDict(self.policy.named_meta_parameters())
        params = list(named.values())
        timings: dict[str, float] = {}

        loss_before, kl_before, stepdir, shs, old_pi, old_log_probs = self._search_direction(
            named, train_batches, valid, behaviour, valid_episodes[0].inner_loop, timings
        )
        if not math.isfinite(loss_before):
            raise RuntimeError(f"the surrogate loss is not finite ({loss_before}); check the episodes' advantages")
        t_search = time.perf_counter()

        loss_after, kl_after = loss_before, kl_before
        accepted = False
        ls_steps = 0
        with torch.no_grad():
            old_vector = flatten_tensors(params).clone()
            if shs > 0 and math.isfinite(shs):
                full_step = stepdir * math.sqrt(2.0 * self.max_kl / shs)
                step_size = 1.0
                for _ in range(self.ls_max_steps):
                    ls_steps += 1
                    vector_to_parameters(old_vector - step_size * full_step, params)
                    loss, kl = self._evaluate(train_batches, valid, old_pi, old_log_probs)
                    if loss < loss_before and kl < self.max_kl:
                        accepted = True
                        loss_after, kl_after = loss, kl
                        break
                    step_size *= self.ls_backtrack_ratio
            if not accepted:
                vector_to_parameters(old_vector, params)
        end = time.perf_counter()

        return {
            "loss_before": loss_before,
            "loss_after": loss_after,
            "kl_before": kl_before,
            "kl_after": kl_after,
            "ratio_deviation_before": timings.pop("ratio_deviation_before"),
            "ls_steps": ls_steps,
            "accepted": accepted,
            "time_adapt": timings["time_adapt"],
            "time_loss_grad": timings["time_loss_grad"],
            "time_cg": timings["time_cg"],
            "time_line_search": end - t_search,
            "time_total": end - start,
        }
