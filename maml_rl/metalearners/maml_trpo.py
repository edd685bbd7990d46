"""MAML with a trust-region (TRPO) meta-update, batched over tasks."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import Callable, Iterable, Sequence

import torch
from torch.distributions import Distribution
from torch.nn.utils import vector_to_parameters

from maml_rl.episodes import BatchEpisodes, TaskBatch, check_loss_averaging
from maml_rl.losses import (
    batched_kl_hessian,
    batched_reinforce_hessian,
    batched_reinforce_loss,
    mean_kl,
    reinforce_loss,
    surrogate_loss,
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
    ) -> None:
        self.names = list(params.keys())
        self.params = list(params.values())
        num_tasks = valid.num_tasks
        self.num_tasks = num_tasks
        expanded = expand_params(params, num_tasks)
        self.expanded = list(expanded.values())
        self.fast_lr = learner.fast_lr
        self.policy = learner.policy
        self.curvature = learner.curvature
        self.inner_hessians = None
        if not learner.first_order and learner.curvature == "auto":
            adapted, self.inner_hessians = learner._adapt_with_hessians(expanded, train_batches)
        if self.inner_hessians is None:
            adapted = learner._adapt_stacked(expanded, train_batches, first_order=learner.first_order)
        self.adapted = list(adapted.values())
        self.t_adapt = time.perf_counter()

        outer = OrderedDict((name, p.detach().requires_grad_()) for name, p in adapted.items())
        self.outer = list(outer.values())
        self.pi = learner.policy(valid.observations, params=outer)
        self.old_pi = detach_distribution(self.pi)
        self.old_log_probs = self.old_pi.log_prob(valid.actions)
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


class MAMLTRPO:
    """Model-Agnostic Meta-Learning with TRPO as the outer optimiser.

    Inner loop: ``num_steps`` REINFORCE gradient steps of size ``fast_lr`` per task.
    Outer loop: one TRPO step on the post-adaptation surrogate loss, averaged
    over tasks, under a mean-KL trust region. All tasks are processed together:
    their data is stacked and the meta-parameters are expanded to one copy per
    task, so each phase is a single batched forward/backward.

    :param policy: policy supporting stacked per-task parameters.
    :param fast_lr: inner-loop step size.
    :param num_steps: number of inner gradient steps.
    :param first_order: ignore second-order terms through the inner steps.
    :param device: device the policy and the data are put on.
    :param curvature: ``"auto"`` applies the inner loop's second derivatives through the
        policy's closed-form Hessian products when it has them (exact, and faster);
        ``"autograd"`` always differentiates autograd's backward pass.
    """

    def __init__(
        self,
        policy: Policy,
        fast_lr: float = 0.5,
        num_steps: int = 1,
        first_order: bool = False,
        device: str | torch.device = "cpu",
        curvature: str = "auto",
        averaging: str = "step",
    ) -> None:
        if not getattr(policy, "supports_batched_params", False):
            raise TypeError(f"{type(policy).__name__} does not support stacked per-task parameters")
        self.device = torch.device(device)
        self.policy = policy.to(self.device)
        self.fast_lr = float(fast_lr)
        self.num_steps = int(num_steps)
        self.first_order = bool(first_order)
        if curvature not in ("auto", "autograd"):
            raise ValueError(f"curvature must be 'auto' or 'autograd', got {curvature!r}")
        self.curvature = curvature
        self.averaging = check_loss_averaging(averaging)

    # ------------------------------------------------------------ adaptation
    def adapt(
        self,
        train_episodes: BatchEpisodes | Sequence[BatchEpisodes],
        first_order: bool | None = None,
    ) -> "OrderedDict[str, torch.Tensor]":
        """Adapted parameters for one task: one REINFORCE step per batch given.

        :param train_episodes: the task's batch(es), ``train_episodes[step]`` gathered before inner step ``step``.
        :param first_order: override of the instance's ``first_order``.
        :return: the adapted parameters (in the graph of the meta-parameters unless first order).
        """
        if first_order is None:
            first_order = self.first_order
        if isinstance(train_episodes, BatchEpisodes):
            train_episodes = [train_episodes]
        params = OrderedDict(self.policy.named_meta_parameters())
        for episodes in train_episodes:
            loss = reinforce_loss(self.policy, episodes.to(self.device), params=params, averaging=self.averaging)
            params = self.policy.update_params(loss, params=params, step_size=self.fast_lr, first_order=first_order)
        return params

    def adapt_batched(
        self,
        train_batches: Sequence[TaskBatch],
        params: "OrderedDict[str, torch.Tensor] | None" = None,
        first_order: bool | None = None,
    ) -> "OrderedDict[str, torch.Tensor]":
        """Adapted parameters of ``K`` tasks at once, stacked ``[K, ...]``.

        :param train_batches: ``train_batches[step]`` holds all tasks' data for inner step ``step``.
        :param params: meta-parameters to adapt from (the policy's own when ``None``).
        :param first_order: override of the instance's ``first_order``.
        """
        if first_order is None:
            first_order = self.first_order
        if params is None:
            params = OrderedDict(self.policy.named_meta_parameters())
        expanded = expand_params(params, train_batches[0].num_tasks)
        return self._adapt_stacked(expanded, train_batches, first_order)

    def _adapt_stacked(
        self,
        stacked: "OrderedDict[str, torch.Tensor]",
        train_batches: Sequence[TaskBatch],
        first_order: bool,
    ) -> "OrderedDict[str, torch.Tensor]":
        for batch in train_batches:
            # The sum over tasks differentiates into each task's own gradient.
            loss = batched_reinforce_loss(self.policy, batch, stacked).sum()
            stacked = self.policy.update_params(loss, params=stacked, step_size=self.fast_lr, first_order=first_order)
        return stacked

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
                loss = batched_reinforce_loss(self.policy, batch, leaves).sum()
                stacked = self.policy.update_params(loss, params=leaves, step_size=self.fast_lr, first_order=True)
            stacked = OrderedDict((name, p.detach()) for name, p in stacked.items())
        return stacked, hessians

    # ------------------------------------------------------------- meta-step
    def task_batch(self, episodes_list: Sequence[BatchEpisodes]) -> TaskBatch:
        """Stack one batch per task into a :class:`~maml_rl.episodes.TaskBatch` on this device."""
        batch = TaskBatch.from_episodes(episodes_list, self.averaging)
        return TaskBatch(*(t.to(self.device) for t in batch))

    def meta_gradient(
        self,
        train_episodes: Sequence[Sequence[BatchEpisodes]],
        valid_episodes: Sequence[BatchEpisodes],
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
        train_episodes: Sequence[Sequence[BatchEpisodes]],
        valid_episodes: Sequence[BatchEpisodes],
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
            adapted = self.adapt_batched(train_batches, first_order=True)
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
        cg_iters: int,
        cg_damping: float,
        timings: dict[str, float],
    ) -> tuple[float, float, torch.Tensor, float, Distribution, torch.Tensor]:
        """Loss, KL, natural-gradient direction and its curvature ``s^T (H + damping) s``.

        Kept in its own frame so that every graph is freed when it returns.
        """
        start = time.perf_counter()
        graph = _MetaGraph(self, params, train_batches, valid)
        hvp = graph.kl_hessian_vector_product(valid, cg_damping)
        stepdir, residual = conjugate_gradient(hvp, graph.loss_grad, cg_iters=cg_iters, return_residual=True)
        # s^T A s = s^T (b - r): the curvature along s without one more product.
        shs = torch.dot(stepdir, graph.loss_grad - residual).item()
        end = time.perf_counter()
        timings["time_adapt"] = graph.t_adapt - start
        timings["time_loss_grad"] = graph.t_loss_grad - graph.t_adapt
        timings["time_cg"] = end - graph.t_loss_grad
        return graph.loss.item(), graph.kl.item(), stepdir, shs, graph.old_pi, graph.old_log_probs

    def step(
        self,
        train_episodes: Sequence[Sequence[BatchEpisodes]],
        valid_episodes: Sequence[BatchEpisodes],
        max_kl: float = 1e-3,
        cg_iters: int = 10,
        cg_damping: float = 1e-2,
        ls_max_steps: int = 10,
        ls_backtrack_ratio: float = 0.5,
    ) -> dict[str, float | int | bool]:
        """One TRPO meta-update of the policy's parameters.

        :param train_episodes: ``train_episodes[step][task]``, gathered before inner step ``step``
            (advantages computed).
        :param valid_episodes: ``valid_episodes[task]``, gathered with the adapted parameters.
        :param max_kl: trust-region radius on the mean KL divergence.
        :param cg_iters: conjugate-gradient iterations.
        :param cg_damping: damping added to the KL Hessian.
        :param ls_max_steps: maximum number of line-search steps.
        :param ls_backtrack_ratio: step shrink factor between line-search steps.
        :return: ``loss_before``, ``loss_after``, ``kl_before``, ``kl_after`` (at the final
            parameters), ``ls_steps`` (number of line-search trials evaluated), ``accepted`` (whether
            the parameters moved) and timings in seconds: ``time_adapt`` (inner loop),
            ``time_loss_grad`` (outer loss and meta-gradient), ``time_cg`` (conjugate gradient),
            ``time_line_search`` and ``time_total``.
        """
        if len(train_episodes) != self.num_steps:
            raise ValueError(f"expected train episodes for {self.num_steps} inner step(s), got {len(train_episodes)}")
        if any(len(step_episodes) != len(valid_episodes) for step_episodes in train_episodes):
            raise ValueError("every inner step needs train episodes for the same tasks as valid_episodes")
        start = time.perf_counter()
        train_batches = [self.task_batch(step_episodes) for step_episodes in train_episodes]
        valid = self.task_batch(valid_episodes)
        named = OrderedDict(self.policy.named_meta_parameters())
        params = list(named.values())
        timings: dict[str, float] = {}

        loss_before, kl_before, stepdir, shs, old_pi, old_log_probs = self._search_direction(
            named, train_batches, valid, cg_iters, cg_damping, timings
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
                full_step = stepdir * math.sqrt(2.0 * max_kl / shs)
                step_size = 1.0
                for _ in range(ls_max_steps):
                    ls_steps += 1
                    vector_to_parameters(old_vector - step_size * full_step, params)
                    loss, kl = self._evaluate(train_batches, valid, old_pi, old_log_probs)
                    if loss < loss_before and kl < max_kl:
                        accepted = True
                        loss_after, kl_after = loss, kl
                        break
                    step_size *= ls_backtrack_ratio
            if not accepted:
                vector_to_parameters(old_vector, params)
        end = time.perf_counter()

        return {
            "loss_before": loss_before,
            "loss_after": loss_after,
            "kl_before": kl_before,
            "kl_after": kl_after,
            "ls_steps": ls_steps,
            "accepted": accepted,
            "time_adapt": timings["time_adapt"],
            "time_loss_grad": timings["time_loss_grad"],
            "time_cg": timings["time_cg"],
            "time_line_search": end - t_search,
            "time_total": end - start,
        }
