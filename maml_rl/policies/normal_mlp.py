"""Gaussian MLP policy for continuous actions."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
import torch.nn as nn
from torch.distributions import Independent, Normal

from maml_rl.policies.normal_mlp_hessian import NormalMLPKLHessian, NormalMLPNLLHessian
from maml_rl.policies.policy import Params, Policy, get_nonlinearity, is_elementwise, linear


class NormalMLPPolicy(Policy):
    """``N(mu(s), diag(sigma^2))`` with an MLP mean and a state-independent log-std.

    Parameters are named ``layer1.weight``, ``layer1.bias``, ..., ``mu.weight``,
    ``mu.bias`` and ``sigma`` (the log standard deviation).

    :param input_size: flattened observation size.
    :param output_size: action dimension.
    :param hidden_sizes: widths of the hidden layers.
    :param nonlinearity: activation (callable or name, see :func:`get_nonlinearity`).
    :param init_std: initial standard deviation.
    :param min_std: lower bound on the standard deviation.
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        hidden_sizes: Sequence[int] = (),
        nonlinearity: Callable[[torch.Tensor], torch.Tensor] | str = torch.tanh,
        init_std: float = 1.0,
        min_std: float = 1e-6,
    ) -> None:
        super().__init__(input_size, output_size)
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.nonlinearity = get_nonlinearity(nonlinearity)
        self.min_log_std = math.log(min_std)
        self.num_layers = len(self.hidden_sizes)

        sizes = (self.input_size,) + self.hidden_sizes
        for i in range(self.num_layers):
            self.add_module(f"layer{i + 1}", nn.Linear(sizes[i], sizes[i + 1]))
        self.mu = nn.Linear(sizes[-1], self.output_size)
        self.sigma = nn.Parameter(torch.full((self.output_size,), math.log(init_std)))
        self.reset_parameters()

    def forward(self, observations: torch.Tensor, params: Params | None = None) -> Independent:
        """Action distribution; batch shape is the observations' leading shape.

        :param observations: ``[..., obs_dim]``, or ``[..., K, N, obs_dim]`` with stacked ``params``.
        :param params: parameters to evaluate at (module's own when ``None``).
        """
        params = self.get_params(params)
        num_tasks = self._num_tasks(params)
        x, moved_shape = self._task_major(observations, num_tasks)
        for i in range(1, self.num_layers + 1):
            x = self.nonlinearity(linear(x, params[f"layer{i}.weight"], params[f"layer{i}.bias"]))
        mu = self._undo_task_major(linear(x, params["mu.weight"], params["mu.bias"]), moved_shape)
        log_std = params["sigma"].clamp(min=self.min_log_std)
        if log_std.dim() == 2:
            # [K, act] -> [K, 1, act] to broadcast against [..., K, N, act].
            log_std = log_std.unsqueeze(-2)
        # Argument validation costs several reductions per call on large batches.
        return Independent(Normal(loc=mu, scale=log_std.exp(), validate_args=False), 1, validate_args=False)

    def nll_hessian(
        self, observations: torch.Tensor, actions: torch.Tensor, weights: torch.Tensor, params: Params
    ) -> NormalMLPNLLHessian | None:
        """Exact products by :class:`~maml_rl.policies.normal_mlp_hessian.NormalMLPNLLHessian`.

        Available for stacked values of every parameter and a named (elementwise)
        nonlinearity; ``None`` otherwise.
        """
        if not self._has_closed_form_hessians(params):
            return None
        return NormalMLPNLLHessian(self, params, observations, actions, weights)

    def kl_hessian(
        self, observations: torch.Tensor, weights: torch.Tensor, params: Params
    ) -> NormalMLPKLHessian | None:
        """Exact products by :class:`~maml_rl.policies.normal_mlp_hessian.NormalMLPKLHessian` (when
        :meth:`nll_hessian` has them too)."""
        if not self._has_closed_form_hessians(params):
            return None
        return NormalMLPKLHessian(self, params, observations, weights)

    def _has_closed_form_hessians(self, params: Params) -> bool:
        # Stacked values of every parameter, and a named activation (known to act elementwise).
        names = {name for name, _ in self.named_parameters()}
        return is_elementwise(self.nonlinearity) and set(params) == names and self._num_tasks(params) is not None
