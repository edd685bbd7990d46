"""Exact Hessian-vector products of a Gaussian MLP's weighted negative log-likelihood.

The inner loop of second-order MAML differentiates through a REINFORCE step,
so every conjugate-gradient iteration of the outer TRPO step multiplies by the
Hessian of the inner loss, twice. Autograd does this by differentiating its own
backward pass (reverse over reverse), which redoes work that does not depend
on the vector. Here the forward and backward passes at the current parameters
are run once and cached; each product is then Pearlmutter's R-operator, one
forward and one backward pass that are linear in the vector (Pearlmutter, 1994,
"Fast exact multiplication by the Hessian").
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from maml_rl.policies.policy import Params


def _elementwise_derivatives(
    nonlinearity: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``f(z)``, ``f'(z)`` and ``f''(z)`` (``None`` when zero everywhere, as for ReLU)."""
    with torch.enable_grad():
        z = z.detach().requires_grad_()
        h = nonlinearity(z)
        (d1,) = torch.autograd.grad(h.sum(), z, create_graph=True)
        d2 = None
        if d1.requires_grad:
            (d2,) = torch.autograd.grad(d1.sum(), z, allow_unused=True)
    if d2 is not None and not bool(d2.any()):
        d2 = None
    return h.detach(), d1.detach(), d2


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
        num_layers = policy.num_layers
        params = {name: p.detach() for name, p in params.items()}
        self.weights_in = [params[f"layer{i}.weight"] for i in range(1, num_layers + 1)]
        self.weight_out = params["mu.weight"]

        # Forward pass, keeping each layer's input and the activation's derivatives.
        self.inputs = [observations.detach()]
        self.d1: list[torch.Tensor] = []
        d2: list[torch.Tensor | None] = []
        for i in range(1, num_layers + 1):
            z = torch.baddbmm(params[f"layer{i}.bias"].unsqueeze(1), self.inputs[-1], params[f"layer{i}.weight"].mT)
            h, first, second = _elementwise_derivatives(policy.nonlinearity, z)
            self.inputs.append(h)
            self.d1.append(first)
            d2.append(second)
        mu = torch.baddbmm(params["mu.bias"].unsqueeze(1), self.inputs[-1], self.weight_out.mT)

        # d/d mu of the loss is -w (a - mu) / sigma^2; log-std below the policy's bound is clamped.
        log_std = params["sigma"]
        self.sigma_mask = (log_std >= policy.min_log_std).to(log_std.dtype).unsqueeze(1)  # [K, 1, act]
        precision = torch.exp(-2.0 * log_std.clamp(min=policy.min_log_std)).unsqueeze(1)
        self.residual = actions.detach() - mu  # [K, N, act]
        weights = weights.detach().unsqueeze(-1)
        self.weighted_precision = weights * precision  # [K, N, act]
        self.delta_out = -self.weighted_precision * self.residual

        # Backward pass: the loss's derivative with respect to each hidden layer's output and
        # pre-activation. The f'' terms only ever appear multiplied by the former.
        grad_h = torch.bmm(self.delta_out, self.weight_out)
        self.delta: list[torch.Tensor] = [torch.empty(0)] * num_layers
        self.curvature: list[torch.Tensor | None] = [None] * num_layers
        for i in reversed(range(num_layers)):
            self.delta[i] = self.d1[i] * grad_h
            if d2[i] is not None:
                self.curvature[i] = d2[i] * grad_h
            if i > 0:
                grad_h = torch.bmm(self.delta[i], self.weights_in[i])

    def __call__(self, tangents: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The product with one stacked direction.

        :param tangents: ``[K, ...]`` tensors in the order of ``params``.
        :return: ``H v`` in the same layout.
        """
        v = dict(zip(self.names, tangents))
        num_layers = len(self.weights_in)
        # R-forward: directional derivatives of each pre-activation and layer output.
        r_z: list[torch.Tensor] = []
        r_h: list[torch.Tensor | None] = [None]
        for i in range(num_layers):
            z = torch.baddbmm(v[f"layer{i + 1}.bias"].unsqueeze(1), self.inputs[i], v[f"layer{i + 1}.weight"].mT)
            if r_h[i] is not None:
                z = z.baddbmm_(r_h[i], self.weights_in[i].mT)
            r_z.append(z)
            r_h.append(self.d1[i] * z)
        r_mu = torch.baddbmm(v["mu.bias"].unsqueeze(1), self.inputs[-1], v["mu.weight"].mT)
        if r_h[-1] is not None:
            r_mu = r_mu.baddbmm_(r_h[-1], self.weight_out.mT)

        # R-backward, starting from d/d mu = -w (a - mu) exp(-2 log_std).
        r_log_std = v["sigma"].unsqueeze(1) * self.sigma_mask
        r_delta_out = self.weighted_precision * (r_mu + 2.0 * self.residual * r_log_std)
        out: dict[str, torch.Tensor] = {
            "sigma": (-2.0 * self.delta_out * (r_mu + self.residual * r_log_std)).sum(1) * self.sigma_mask.squeeze(1),
            "mu.weight": _bmm_t(r_delta_out, self.inputs[-1]),
            "mu.bias": r_delta_out.sum(1),
        }
        if r_h[-1] is not None:
            out["mu.weight"] = out["mu.weight"].baddbmm_(self.delta_out.mT, r_h[-1])
        if num_layers:
            r_grad_h = torch.bmm(r_delta_out, self.weight_out).baddbmm_(self.delta_out, v["mu.weight"])
        for i in reversed(range(num_layers)):
            r_delta = self.d1[i] * r_grad_h
            if self.curvature[i] is not None:
                r_delta = r_delta.addcmul_(self.curvature[i], r_z[i])
            weight_grad = _bmm_t(r_delta, self.inputs[i])
            if r_h[i] is not None:
                weight_grad = weight_grad.baddbmm_(self.delta[i].mT, r_h[i])
            out[f"layer{i + 1}.weight"] = weight_grad
            out[f"layer{i + 1}.bias"] = r_delta.sum(1)
            if i > 0:
                r_grad_h = torch.bmm(r_delta, self.weights_in[i]).baddbmm_(self.delta[i], v[f"layer{i + 1}.weight"])
        return [out[name] for name in self.names]
