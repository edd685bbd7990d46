"""Exact Hessian-vector products for the Gaussian MLP policy: inner loss and KL.

The inner loop of second-order MAML differentiates through a REINFORCE step,
so every conjugate-gradient iteration of the outer TRPO step multiplies by the
Hessian of the inner loss, twice. Autograd does this by differentiating its own
backward pass (reverse over reverse), which redoes work that does not depend
on the vector. Here the forward and backward passes at the current parameters
are run once and cached; each product is then Pearlmutter's R-operator, one
forward and one backward pass that are linear in the vector (Pearlmutter, 1994,
"Fast exact multiplication by the Hessian").

The outer step's KL divergence at the current parameters has the Hessian
``J^T F J`` (``F`` the Fisher information of the Gaussian in mean and log-std),
whose products need only a forward and a backward pass.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from maml_rl.policies.policy import Params


def _elementwise_derivatives(
    nonlinearity: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor, second: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``f(z)``, ``f'(z)`` and, if ``second``, ``f''(z)`` (``None`` when zero everywhere, as for ReLU)."""
    with torch.enable_grad():
        z = z.detach().requires_grad_()
        h = nonlinearity(z)
        (d1,) = torch.autograd.grad(h.sum(), z, create_graph=second)
        d2 = None
        if second and d1.requires_grad:
            (d2,) = torch.autograd.grad(d1.sum(), z, allow_unused=True)
    if d2 is not None and not bool(d2.any()):
        d2 = None
    return h.detach(), d1.detach(), d2


class _Forward:
    """The policy's mean at stacked parameters, keeping each layer's input and activation derivatives."""

    def __init__(self, policy: torch.nn.Module, params: Params, observations: torch.Tensor, second: bool) -> None:
        num_layers = policy.num_layers
        self.weights_in = [params[f"layer{i}.weight"].detach() for i in range(1, num_layers + 1)]
        self.weight_out = params["mu.weight"].detach()
        self.inputs = [observations.detach()]
        self.d1: list[torch.Tensor] = []
        self.d2: list[torch.Tensor | None] = []
        for i in range(1, num_layers + 1):
            bias = params[f"layer{i}.bias"].detach().unsqueeze(1)
            z = torch.baddbmm(bias, self.inputs[-1], self.weights_in[i - 1].mT)
            h, first, curvature = _elementwise_derivatives(policy.nonlinearity, z, second)
            self.inputs.append(h)
            self.d1.append(first)
            self.d2.append(curvature)
        self.mu = torch.baddbmm(params["mu.bias"].detach().unsqueeze(1), self.inputs[-1], self.weight_out.mT)

        log_std = params["sigma"].detach()
        # Below the policy's bound the log-std is clamped: no derivatives there.
        self.sigma_mask = (log_std >= policy.min_log_std).to(log_std.dtype).unsqueeze(1)  # [K, 1, act]
        self.precision = torch.exp(-2.0 * log_std.clamp(min=policy.min_log_std)).unsqueeze(1)  # 1 / sigma^2

    def r_forward(
        self, v: dict[str, torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor | None], torch.Tensor]:
        """Directional derivatives along ``v`` of the pre-activations, the layer inputs and the mean."""
        r_z: list[torch.Tensor] = []
        r_h: list[torch.Tensor | None] = [None]
        for i, weight in enumerate(self.weights_in):
            z = torch.baddbmm(v[f"layer{i + 1}.bias"].unsqueeze(1), self.inputs[i], v[f"layer{i + 1}.weight"].mT)
            if r_h[i] is not None:
                z = z.baddbmm_(r_h[i], weight.mT)
            r_z.append(z)
            r_h.append(self.d1[i] * z)
        r_mu = torch.baddbmm(v["mu.bias"].unsqueeze(1), self.inputs[-1], v["mu.weight"].mT)
        if r_h[-1] is not None:
            r_mu = r_mu.baddbmm_(r_h[-1], self.weight_out.mT)
        return r_z, r_h, r_mu


def _bmm_t(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a^T b`` per task: ``[K, N, p]`` and ``[K, N, q]`` -> ``[K, p, q]`` (a sum over samples)."""
    return torch.bmm(a.transpose(1, 2), b)


class NormalMLPNLLHessian:
    """``v -> H v`` for ``H`` the Hessian of ``sum_k sum_t w[k, t] * -log pi(a[k, t] | s[k, t]; theta_k)``.

    ``theta_k`` are stacked per-task parameters of a
    :class:`~maml_rl.policies.NormalMLPPolicy`; ``H`` is block diagonal over
    tasks. Built once at fixed parameters and data, it may be applied to any
    number of vectors.

    :param policy: the policy (gives the layer count, nonlinearity and log-std bound).
    :param params: stacked ``[K, ...]`` values of every parameter of the policy, by name.
    :param observations: ``[K, N, obs_dim]``.
    :param actions: ``[K, N, act_dim]``.
    :param weights: ``[K, N]`` per-sample weights (advantage times averaging weight).
    """

    def __init__(
        self,
        policy: torch.nn.Module,
        params: Params,
        observations: torch.Tensor,
        actions: torch.Tensor,
        weights: torch.Tensor,
    ) -> None:
        self.names = list(params.keys())
        self.forward = forward = _Forward(policy, params, observations, second=True)
        # d/d mu of the loss is -w (a - mu) / sigma^2.
        self.residual = actions.detach() - forward.mu  # [K, N, act]
        self.weighted_precision = weights.detach().unsqueeze(-1) * forward.precision  # [K, N, act]
        self.delta_out = -self.weighted_precision * self.residual

        # Backward pass: the loss's derivative with respect to each hidden layer's output and
        # pre-activation. The f'' terms only ever appear multiplied by the former.
        num_layers = len(forward.weights_in)
        grad_h = torch.bmm(self.delta_out, forward.weight_out)
        self.delta: list[torch.Tensor] = [torch.empty(0)] * num_layers
        self.curvature: list[torch.Tensor | None] = [None] * num_layers
        for i in reversed(range(num_layers)):
            self.delta[i] = forward.d1[i] * grad_h
            if forward.d2[i] is not None:
                self.curvature[i] = forward.d2[i] * grad_h
            if i > 0:
                grad_h = torch.bmm(self.delta[i], forward.weights_in[i])

    def __call__(self, tangents: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The product with one stacked direction.

        :param tangents: ``[K, ...]`` tensors in the order of ``params``.
        :return: ``H v`` in the same layout.
        """
        v = dict(zip(self.names, tangents))
        forward = self.forward
        r_z, r_h, r_mu = forward.r_forward(v)

        # R-backward, starting from d/d mu = -w (a - mu) exp(-2 log_std).
        r_log_std = v["sigma"].unsqueeze(1) * forward.sigma_mask
        r_delta_out = self.weighted_precision * (r_mu + 2.0 * self.residual * r_log_std)
        out: dict[str, torch.Tensor] = {
            "sigma": (-2.0 * self.delta_out * (r_mu + self.residual * r_log_std)).sum(1) * forward.sigma_mask[:, 0],
            "mu.weight": _bmm_t(r_delta_out, forward.inputs[-1]),
            "mu.bias": r_delta_out.sum(1),
        }
        if r_h[-1] is not None:
            out["mu.weight"] = out["mu.weight"].baddbmm_(self.delta_out.mT, r_h[-1])
        num_layers = len(forward.weights_in)
        if num_layers:
            r_grad_h = torch.bmm(r_delta_out, forward.weight_out).baddbmm_(self.delta_out, v["mu.weight"])
        for i in reversed(range(num_layers)):
            r_delta = forward.d1[i] * r_grad_h
            if self.curvature[i] is not None:
                r_delta = r_delta.addcmul_(self.curvature[i], r_z[i])
            weight_grad = _bmm_t(r_delta, forward.inputs[i])
            if r_h[i] is not None:
                weight_grad = weight_grad.baddbmm_(self.delta[i].mT, r_h[i])
            out[f"layer{i + 1}.weight"] = weight_grad
            out[f"layer{i + 1}.bias"] = r_delta.sum(1)
            if i > 0:
                r_grad_h = torch.bmm(r_delta, forward.weights_in[i]).baddbmm_(self.delta[i], v[f"layer{i + 1}.weight"])
        return [out[name] for name in self.names]


class NormalMLPKLHessian:
    """``v -> H v`` for ``H`` the Hessian of ``sum_k sum_t w[k, t] KL(pi_old || pi(theta_k))``.

    Taken at the current parameters, where ``pi_old = pi(theta_k)``: there the KL's gradient vanishes and its Hessian is ``J^T F J``: ``J`` the
    Jacobian of the mean and log-std, ``F`` = ``w / sigma^2`` on the mean and
    ``2 w`` on the log-std (the Gaussian's Fisher information, no cross terms).

    :param policy: the policy.
    :param params: stacked ``[K, ...]`` values of every parameter of the policy, by name.
    :param observations: ``[K, N, obs_dim]``.
    :param weights: ``[K, N]`` per-sample weights of the KL.
    """

    def __init__(
        self, policy: torch.nn.Module, params: Params, observations: torch.Tensor, weights: torch.Tensor
    ) -> None:
        self.names = list(params.keys())
        self.forward = _Forward(policy, params, observations, second=False)
        weights = weights.detach()
        self.weighted_precision = weights.unsqueeze(-1) * self.forward.precision  # [K, N, act]
        self.log_std_fisher = 2.0 * weights.sum(1, keepdim=True) * self.forward.sigma_mask[:, 0]  # [K, act]

    def __call__(self, tangents: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The product with one stacked direction (``[K, ...]`` tensors in the order of ``params``)."""
        v = dict(zip(self.names, tangents))
        forward = self.forward
        _, r_h, r_mu = forward.r_forward(v)
        # Backward pass of F J v through the mean.
        u = self.weighted_precision * r_mu
        out: dict[str, torch.Tensor] = {
            "sigma": self.log_std_fisher * v["sigma"],
            "mu.weight": _bmm_t(u, forward.inputs[-1]),
            "mu.bias": u.sum(1),
        }
        grad_h = u
        weight = forward.weight_out
        for i in reversed(range(len(forward.weights_in))):
            delta = forward.d1[i] * torch.bmm(grad_h, weight)
            out[f"layer{i + 1}.weight"] = _bmm_t(delta, forward.inputs[i])
            out[f"layer{i + 1}.bias"] = delta.sum(1)
            grad_h, weight = delta, forward.weights_in[i]
        return [out[name] for name in self.names]
