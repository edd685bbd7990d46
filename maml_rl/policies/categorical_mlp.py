"""Categorical MLP policy for discrete actions."""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn as nn
from torch.distributions import Categorical

from maml_rl.policies.policy import Params, Policy, get_nonlinearity, linear


class CategoricalMLPPolicy(Policy):
    """``Categorical(logits=MLP(s))``.

    Parameters are named ``layer1.weight``, ``layer1.bias``, ..., the last
    (logits) layer being ``layer{len(hidden_sizes) + 1}``.

    :param input_size: flattened observation size.
    :param output_size: number of actions.
    :param hidden_sizes: widths of the hidden layers.
    :param nonlinearity: activation (callable or name, see :func:`get_nonlinearity`).
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        hidden_sizes: Sequence[int] = (),
        nonlinearity: Callable[[torch.Tensor], torch.Tensor] | str = torch.tanh,
    ) -> None:
        super().__init__(input_size, output_size)
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.nonlinearity = get_nonlinearity(nonlinearity)
        self.num_layers = len(self.hidden_sizes) + 1

        sizes = (self.input_size,) + self.hidden_sizes + (self.output_size,)
        for i in range(self.num_layers):
            self.add_module(f"layer{i + 1}", nn.Linear(sizes[i], sizes[i + 1]))
        self.reset_parameters()

    def forward(self, observations: torch.Tensor, params: Params | None = None) -> Categorical:
        """Action distribution; batch shape is the observations' leading shape.

        :param observations: ``[..., obs_dim]``, or ``[..., K, N, obs_dim]`` with stacked ``params``.
        :param params: parameters to evaluate at (module's own when ``None``).
        """
        params = self.get_params(params)
        num_tasks = self._num_tasks(params)
        x, moved_shape = self._task_major(observations, num_tasks)
        for i in range(1, self.num_layers):
            x = self.nonlinearity(linear(x, params[f"layer{i}.weight"], params[f"layer{i}.bias"]))
        last = self.num_layers
        logits = linear(x, params[f"layer{last}.weight"], params[f"layer{last}.bias"])
        return Categorical(logits=self._undo_task_major(logits, moved_shape), validate_args=False)
