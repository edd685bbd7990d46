"""The graph of one meta-update: meta-gradients and KL Hessian products through the inner loop.

:class:`MetaGraph` adapts every task from the meta-parameters and evaluates
the policy at the adapted parameters, then differentiates through the
adaptation: :meth:`MetaGraph.gradient` pulls a loss's gradient back to the
meta-parameters, :meth:`MetaGraph.kl_hessian_vector_product` gives products
with the Hessian of the mean KL, without third-order derivatives.

When the policy has closed-form products with its inner loss's Hessian
(:meth:`Policy.nll_hessian`), the inner loop keeps no graph: its Jacobian,
``prod_k (I - fast_lr * H_k)`` over the inner steps, is applied through those
products. Otherwise (or with ``curvature="autograd"``) autograd's backward
pass through the inner loop is differentiated.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Iterable, Sequence

import torch
from torch.distributions import Distribution

from maml_rl.metalearners.gradient.adaptation import InnerLoop, inner_step
from maml_rl.data.episodes import TaskBatch
from maml_rl.metalearners.gradient.losses import batched_kl_hessian, batched_reinforce_hessian, mean_kl
from maml_rl.policies.policy import Params, Policy, expand_params
from maml_rl.utils.torch_utils import distribution_tensors, flatten_tensors, rebuild_distribution, unflatten_like

__all__ = ["CURVATURES", "MetaGraph"]

TensorList = Sequence[torch.Tensor]

#: How the inner loop's second derivatives are formed (see :class:`MetaGraph`).
CURVATURES = ("auto", "autograd")


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


def _adapt_with_hessians(
    policy: Policy, inner_loop: InnerLoop, stacked: Params, train_batches: Sequence[TaskBatch]
) -> tuple[Params, list[Callable] | None]:
    """Adapted parameters (values only) and each inner step's Hessian products.

    :return: ``(adapted, hessians)``, with ``hessians`` ``None`` when the policy has no closed form.
    """
    hessians = []
    stacked = OrderedDict((name, p.detach()) for name, p in stacked.items())
    for batch in train_batches:
        hessian = batched_reinforce_hessian(policy, batch, stacked)
        if hessian is None:
            return stacked, None
        hessians.append(hessian)
        with torch.enable_grad():
            leaves = OrderedDict((name, p.requires_grad_()) for name, p in stacked.items())
            stacked = inner_step(policy, batch, leaves, inner_loop.fast_lr, first_order=True)
        stacked = OrderedDict((name, p.detach()) for name, p in stacked.items())
    return stacked, hessians


class MetaGraph:
    """Graphs of one meta-update, from the meta-parameters to the post-adaptation policy.

    Three pieces are kept separate so that products with the KL Hessian can be
    formed without third-order derivatives:

    * ``expanded -> adapted``: the inner loop, from ``K`` stride-0 copies of the
      meta-parameters to the stacked adapted parameters;
    * ``adapted_params -> pi``: the policy at (a detached copy of) the adapted parameters;
    * ``pi -> KL``: the KL divergence as a function of the distribution's tensors.

    :param policy: the meta-trained policy.
    :param inner_loop: the adaptation.
    :param params: the meta-parameters, ``policy.named_meta_parameters()``.
    :param train_batches: the tasks' data before each inner step.
    :param observations: the tasks' validation observations, where :attr:`pi` is evaluated.
    :param first_order: the adapted parameters move one-for-one with the meta-parameters.
    :param curvature: one of :data:`CURVATURES`; ``"auto"`` uses the policy's
        closed-form Hessian products when it has them.
    :ivar adapted_params: the adapted parameters, stacked ``[K, ...]``, as leaves of :attr:`pi`'s graph.
    :ivar pi: the policy at :attr:`adapted_params`.
    """

    def __init__(
        self,
        policy: Policy,
        inner_loop: InnerLoop,
        params: Params,
        train_batches: Sequence[TaskBatch],
        observations: torch.Tensor,
        *,
        first_order: bool,
        curvature: str,
    ) -> None:
        self.policy = policy
        self.fast_lr = inner_loop.fast_lr
        self.first_order = first_order
        self.curvature = curvature
        self.params = list(params.values())
        self.num_tasks = train_batches[0].num_tasks
        expanded = expand_params(params, self.num_tasks)
        self.expanded = list(expanded.values())
        self.inner_hessians = None
        if not first_order and curvature == "auto":
            adapted, self.inner_hessians = _adapt_with_hessians(policy, inner_loop, expanded, train_batches)
        if self.inner_hessians is None:
            adapted = inner_loop.adapt(policy, train_batches, expanded, first_order)
        self.adapted = list(adapted.values())
        # With one inner step, d adapted / d expanded is I - fast_lr * Hessian of the
        # inner loss: symmetric, so a backward pass gives its product with a vector.
        self.symmetric_adaptation = len(train_batches) == 1

        self.adapted_params = OrderedDict((name, p.detach().requires_grad_()) for name, p in adapted.items())
        self.outer = list(self.adapted_params.values())
        self.pi = policy(observations, params=self.adapted_params)

    def gradient(self, loss: torch.Tensor) -> torch.Tensor:
        """``d loss / d meta-parameters`` of a scalar function of :attr:`pi`, as a flat vector.

        The chain rule across the cut: ``d loss / d adapted``, then back through the inner loop.
        """
        return flatten_tensors(self.adaptation_vjp(_grad([loss], self.outer)))

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

    def _adaptation_jvp(self) -> Callable[[TensorList], TensorList]:
        """``v -> J v``: per-task tangents of the adapted parameters from tangents of the expanded ones."""
        if self.inner_hessians is not None:
            return lambda tangents: self._inner_steps_product(tangents, self.inner_hessians)
        if self.first_order:
            return lambda tangents: tangents
        if self.symmetric_adaptation:
            return lambda tangents: _grad(self.adapted, self.expanded, tangents)
        # J v from differentiating J^T u (linear in u) with respect to u.
        adapted_dummies = [torch.zeros_like(t, requires_grad=True) for t in self.adapted]
        adaptation_vjp = _grad(self.adapted, self.expanded, adapted_dummies, create_graph=True)
        return lambda tangents: _grad(adaptation_vjp, adapted_dummies, tangents)

    def kl_hessian_vector_product(
        self, old_pi: Distribution, valid: TaskBatch, damping: float
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """``v -> H v + damping * v`` with ``H`` the Hessian of the mean KL at the current parameters.

        At the current parameters the new and old distributions coincide, so the
        KL's gradient with respect to the distribution's tensors is zero and its
        Hessian with respect to the meta-parameters is exactly ``J^T F J``: ``J``
        the Jacobian of the distribution's tensors (through the inner loop) and
        ``F`` the KL's Hessian in distribution space. Each product is then two
        passes through the inner-loop graph and two through the policy, all
        built once and reused for every conjugate-gradient iteration.

        :param old_pi: the old policy of the KL, equal to :attr:`pi` in value.
        :param valid: the tasks' validation data (gives the KL weights).
        :param damping: added multiple of the identity.
        """
        policy_hessian = None
        if self.curvature == "auto":
            # The KL is averaged over tasks.
            weighted = valid._replace(weights=valid.weights / self.num_tasks)
            policy_hessian = batched_kl_hessian(self.policy, weighted, self.adapted_params)
        if policy_hessian is None:
            policy_hessian = self._policy_kl_hessian(old_pi, valid)
        adaptation_jvp = self._adaptation_jvp()

        def product(vector: torch.Tensor) -> torch.Tensor:
            tangents = [v.expand(self.num_tasks, *v.shape) for v in unflatten_like(vector, self.params)]
            outer_cotangents = policy_hessian(adaptation_jvp(tangents))
            return flatten_tensors(self.adaptation_vjp(outer_cotangents)) + damping * vector

        return product

    def _policy_kl_hessian(self, old_pi: Distribution, valid: TaskBatch) -> Callable[[TensorList], TensorList]:
        """KL Hessian products at the adapted parameters, ``J^T F J``, by autograd.

        ``F`` comes from differentiating the KL twice in distribution space; ``J v``
        from differentiating ``J^T u`` (linear in ``u``) with respect to ``u``.
        """
        dist = distribution_tensors(self.pi)
        dist_leaves = [t.detach().requires_grad_() for t in dist]
        kl = mean_kl(old_pi, rebuild_distribution(self.pi, dist_leaves), valid).mean()
        kl_grad = _grad([kl], dist_leaves, create_graph=True)
        dist_dummies = [torch.zeros_like(t, requires_grad=True) for t in dist]
        policy_vjp = _grad(dist, self.outer, dist_dummies, create_graph=True)

        def product(adapted_tangents: TensorList) -> TensorList:
            dist_tangents = _grad(policy_vjp, dist_dummies, adapted_tangents)
            dist_cotangents = _grad(kl_grad, dist_leaves, dist_tangents)
            return _grad(dist, self.outer, dist_cotangents)

        return product
