"""Base class for policies that can be evaluated with explicit (adapted) parameters."""

from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Callable, Iterator, Mapping, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Distribution

from maml_rl.utils.echo import echo
from maml_rl.utils.torch_utils import gradient_step

Params = Mapping[str, torch.Tensor]

_NONLINEARITIES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "elu": F.elu,
    "selu": F.selu,
    "gelu": F.gelu,
    "silu": F.silu,
    "leakyrelu": F.leaky_relu,
    "softplus": F.softplus,
}


def get_nonlinearity(
    nonlinearity: str | Callable[[torch.Tensor], torch.Tensor],
) -> Callable[[torch.Tensor], torch.Tensor]:
    """Activation function from its name (case-insensitive, ``_``/``-`` ignored) or as given.

    :param nonlinearity: a name such as ``"tanh"``, ``"ReLU"``, ``"leaky_relu"``, or a callable.
    :raises ValueError: for an unknown name.
    """
    if callable(nonlinearity):
        return nonlinearity
    key = str(nonlinearity).lower().replace("_", "").replace("-", "")
    if key not in _NONLINEARITIES:
        raise ValueError(
            f"unknown nonlinearity {echo(nonlinearity)}; valid names are: {', '.join(sorted(_NONLINEARITIES))}"
        )
    return _NONLINEARITIES[key]


def is_elementwise(nonlinearity: Callable[[torch.Tensor], torch.Tensor]) -> bool:
    """Whether ``nonlinearity`` is one of the named activations, all of which act elementwise."""
    return any(nonlinearity is fn for fn in _NONLINEARITIES.values())


def stack_params(params_list: Sequence[Params]) -> "OrderedDict[str, torch.Tensor]":
    """Stack ``K`` parameter dicts into one dict with a leading task axis.

    :param params_list: parameter dicts with identical names and shapes.
    :return: dict whose tensors have shape ``[K, *shape]``.
    """
    if len(params_list) == 0:
        raise ValueError("stack_params needs at least one parameter dict")
    names = list(params_list[0].keys())
    return OrderedDict((name, torch.stack([params[name] for params in params_list], dim=0)) for name in names)


def expand_params(params: Params, num_tasks: int) -> "OrderedDict[str, torch.Tensor]":
    """``num_tasks`` copies of one parameter dict as stride-0 views (no memory copy).

    Gradients with respect to the returned tensors are per task, and they flow
    back to ``params`` summed over tasks.

    :param params: parameter dict with unstacked tensors.
    :param num_tasks: number of copies ``K``.
    """
    return OrderedDict((name, p.expand(num_tasks, *p.shape)) for name, p in params.items())


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Affine layer for shared ``[out, in]`` or per-task ``[K, out, in]`` weights.

    :param x: ``[..., in]`` inputs, or ``[K, N, in]`` for per-task weights.
    :param weight: ``[out, in]`` or ``[K, out, in]``.
    :param bias: ``[out]``, ``[K, out]`` or ``None``.
    """
    if weight.dim() == 2:
        return F.linear(x, weight, bias)
    if bias is None:
        return torch.bmm(x, weight.transpose(-1, -2))
    return torch.baddbmm(bias.unsqueeze(-2), x, weight.transpose(-1, -2))


def meta_parameters(policy: torch.nn.Module):
    """The ``(name, parameter)`` pairs that adapt: ``policy.named_meta_parameters()``
    where the policy defines it, else its parameters that require gradients."""
    named = getattr(policy, "named_meta_parameters", None)
    return named() if named is not None else ((n, p) for n, p in policy.named_parameters() if p.requires_grad)


def takes_params(policy: nn.Module) -> bool:
    """Whether ``policy(observations, params=...)`` can be called: its forward names
    ``params`` or takes ``**kwargs`` (a signature that cannot be read is given the benefit)."""
    try:
        parameters = inspect.signature(policy.forward).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "params" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def require_params_argument(policy: nn.Module, why: str) -> None:
    """Refuse, before any rollout, per-task parameters for a policy whose forward takes no
    ``params=``: it failed deep in the rollout or the inner loss with a bare TypeError."""
    if not takes_params(policy):
        name = type(policy).__name__
        raise TypeError(
            f"{why}, but {name}.forward() takes no params= argument: give it one "
            f"(forward(self, observations, params=None), using the dict's tensors in place of the module's own "
            f"when given), or call rollout(tasks) without params (sample(tasks, num_steps=0) does no adaptation)"
        )


class Policy(nn.Module):
    """A stochastic policy ``pi(a | s; params)``.

    Subclasses implement :meth:`forward` with an optional ``params`` dict so the
    same module can be evaluated at adapted parameters. When every tensor of
    ``params`` carries a leading task axis ``K`` (see :func:`stack_params`),
    observations ``[..., K, N, obs_dim]`` are evaluated under each task's own
    parameters in one batched computation.

    :param input_size: flattened observation size.
    :param output_size: action dimension (continuous) or number of actions (discrete).
    """

    supports_batched_params: bool = True

    def __init__(self, input_size: int, output_size: int) -> None:
        super().__init__()
        self.input_size = int(input_size)
        self.output_size = int(output_size)

    def reset_parameters(self) -> None:
        """Xavier-uniform weights and zero biases for every linear layer."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def named_meta_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """Parameters adapted in the inner loop (all trainable ones)."""
        for name, param in self.named_parameters():
            if param.requires_grad:
                yield name, param

    def meta_parameters(self) -> Iterator[nn.Parameter]:
        for _, param in self.named_meta_parameters():
            yield param

    def get_params(self, params: Params | None = None) -> "OrderedDict[str, torch.Tensor]":
        """The dict ``forward`` evaluates: ``params`` completed with the module's own parameters.

        :param params: explicit (possibly adapted or stacked) parameters, or ``None``.
        """
        full = OrderedDict(self.named_parameters())
        if params is not None:
            full.update(params)
        return full

    def update_params(
        self,
        loss: torch.Tensor,
        params: Params | None = None,
        step_size: float = 0.5,
        first_order: bool = False,
    ) -> "OrderedDict[str, torch.Tensor]":
        """One gradient-descent step on ``loss``, keeping the graph for meta-gradients.

        With stacked per-task ``params`` and ``loss`` the sum of the tasks' losses,
        each task gets its own gradient step.

        :param loss: scalar loss computed with ``params``.
        :param params: parameters to update; the module's trainable parameters when ``None``.
        :param step_size: learning rate of the step.
        :param first_order: do not differentiate through the gradient (first-order MAML).
        :return: the updated parameters, by name.
        """
        if params is None:
            params = OrderedDict(self.named_meta_parameters())
        return gradient_step(loss, params, step_size, first_order)

    def forward(self, observations: torch.Tensor, params: Params | None = None) -> Distribution:
        raise NotImplementedError

    def nll_hessian(
        self, observations: torch.Tensor, actions: torch.Tensor, weights: torch.Tensor, params: Params
    ) -> Callable[[Sequence[torch.Tensor]], list[torch.Tensor]] | None:
        """Closed-form products with the Hessian of ``-(log pi(actions) * weights).sum()``.

        Subclasses may return a function ``v -> H v`` over stacked ``[K, ...]``
        parameters (in the order of ``params``); ``None``, the default, means
        none is available and callers differentiate twice with autograd.

        :param observations: ``[K, N, obs_dim]``.
        :param actions: ``[K, N, ...]``.
        :param weights: ``[K, N]``.
        :param params: stacked values of every parameter, by name.
        """
        return None

    def kl_hessian(
        self, observations: torch.Tensor, weights: torch.Tensor, params: Params
    ) -> Callable[[Sequence[torch.Tensor]], list[torch.Tensor]] | None:
        """Closed-form products with the Hessian of ``(KL(pi(params) || pi(theta)) * weights).sum()`` at ``params``.

        As :meth:`nll_hessian`: ``None`` (the default) when none is available.

        :param observations: ``[K, N, obs_dim]``.
        :param weights: ``[K, N]``.
        :param params: stacked values of every parameter, by name.
        """
        return None

    # ----------------------------------------------------------- helpers
    @staticmethod
    def _num_tasks(params: Params) -> int | None:
        """``K`` when the weight matrices carry a task axis, else ``None``."""
        for name, p in params.items():
            if name.endswith("weight"):
                return p.shape[0] if p.dim() == 3 else None
        return None

    def _task_major(self, observations: torch.Tensor, num_tasks: int | None) -> tuple[torch.Tensor, torch.Size | None]:
        """Reshape ``[..., K, N, in]`` to ``[K, M, in]`` for the batched matmuls.

        :return: the reshaped input and the shape needed to undo it (``None`` when nothing moved).
        """
        x = observations.reshape(*observations.shape[: observations.dim() - self._obs_ndim(observations)], -1)
        if num_tasks is None:
            return x, None
        if x.dim() < 3 or x.shape[-3] != num_tasks:
            raise ValueError(
                f"parameters are stacked for {num_tasks} tasks, so observations must be [..., {num_tasks}, N, "
                f"{self.input_size}]; got shape {tuple(observations.shape)}"
            )
        if x.dim() == 3:
            return x, None
        moved = x.movedim(-3, 0)
        return moved.reshape(num_tasks, -1, x.shape[-1]), moved.shape

    def _obs_ndim(self, observations: torch.Tensor) -> int:
        # Observations whose trailing axes multiply to input_size are flattened;
        # a plain vector observation has one such axis.
        if observations.shape[-1] == self.input_size:
            return 1
        size = 1
        for ndim in range(1, observations.dim() + 1):
            size *= observations.shape[-ndim]
            if size == self.input_size:
                return ndim
        raise ValueError(f"observations of shape {tuple(observations.shape)} do not end with {self.input_size} features")

    @staticmethod
    def _undo_task_major(out: torch.Tensor, moved_shape: torch.Size | None) -> torch.Tensor:
        if moved_shape is None:
            return out
        return out.reshape(*moved_shape[:-1], out.shape[-1]).movedim(0, -3)
