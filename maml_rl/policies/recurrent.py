"""Recurrent policies: the protocol the sampler's trials use, RL²'s inputs, and a GRU policy.

A recurrent policy adapts in its memory rather than in its weights (RL²).
The sampler runs it over *trials* (several episodes of one task back to
back) and calls it one step at a time::

    state = policy.initial_state(n, device)            # [n, *policy.state_shape], float32
    distribution, state = policy.step(inputs, state)   # inputs [n, input_size]

The policy is a ``torch.nn.Module`` (the sampler ships and places its
parameters). Its state is its own (:mod:`maml_rl.policies.trial_state`): here
a float32 tensor, which the sampler records at the starts of BPTT chunks and
restores to continue a trial; a policy whose state is its inputs (a
Transformer's key/value cache) declares ``state_is_inputs`` and is recorded
nothing. What it sees at each step is an :class:`~maml_rl.policies.trial_inputs.InputFormat`.

By default the sampler calls ``step`` once per task, on that task's ``B``
rows (each task's rows in freshly allocated memory), so a task's numbers
never depend on the other tasks of the call, on the backend or on the Ray
actor that runs it. A policy whose arithmetic is row-independent whatever the
batch (elementwise operations, or products arranged as :class:`GRUPolicy`'s)
may set ``supports_task_batches = True``: it then gets ``inputs``
``[K, B, input_size]`` and ``state`` ``[K, B, *state_shape]`` in one call per step
(a state that is not a tensor, such as a Transformer's cache, comes as it is,
its ``K * B`` rows task-major).
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Protocol, Sequence, Tuple, runtime_checkable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Distribution, Independent, Normal

from maml_rl.policies.policy import get_nonlinearity

__all__ = ["GRUPolicy", "HEADS", "RecurrentPolicy", "is_recurrent", "rl2_input_size", "rl2_inputs"]


@runtime_checkable
class RecurrentPolicy(Protocol):
    """What the sampler needs from a policy with state (``is_recurrent = True``),
    beside being a ``torch.nn.Module``."""

    is_recurrent: bool
    #: Shape of one row's state (pack an LSTM's ``(h, c)`` into one tensor).
    state_shape: Tuple[int, ...]

    def initial_state(self, n: int, device: Optional[torch.device] = None) -> torch.Tensor:
        """The float32 state ``[n, *state_shape]`` at the start of a trial, on ``device``
        (the sampler passes its parameters' device)."""

    def step(self, inputs: torch.Tensor, state: torch.Tensor) -> Tuple[Distribution, torch.Tensor]:
        """The action distribution (batch shape ``inputs.shape[:-1]``) and the next state."""


def is_recurrent(policy) -> bool:
    """Whether ``policy`` declares itself recurrent (``is_recurrent = True``)."""
    return bool(getattr(policy, "is_recurrent", False))


def rl2_input_size(observation_size: int, action_size: int) -> int:
    """Width of RL²'s input: observation, previous action (one-hot if discrete), reward, done."""
    return int(observation_size) + int(action_size) + 2


def rl2_inputs(observations: torch.Tensor, previous_actions: torch.Tensor, previous_rewards: torch.Tensor,
               previous_dones: torch.Tensor, num_categories: Optional[int] = None,
               reward_scale: float = 1.0, zero_after_done: bool = False) -> torch.Tensor:
    """RL²'s policy input ``[..., obs + act + 2]``: the observation, the previous
    action (one-hot over ``num_categories`` for a discrete space), the previous
    reward times ``reward_scale`` and whether the previous step ended an episode;
    the three previous values are zero at the start of a trial.

    With ``zero_after_done`` they are zero at every episode's first step too, as
    Meta-World's ``RNNBasedMetaRLWrapper`` under a same-step autoreset shows them
    (metaworld-algorithms' RL²): the policy never sees the done flag set.

    :param observations: ``[..., *obs]``.
    :param previous_actions: ``[..., *act]`` (category indices ``[...]`` if discrete;
        ``-1`` where there is none, a trial's start, gives an all-zero one-hot).
    :param previous_rewards: ``[...]``.
    :param previous_dones: ``[...]``, nonzero where the previous step ended an episode.
    """
    lead = previous_rewards.shape
    obs = observations.reshape(*lead, -1).to(torch.float32)
    if num_categories is not None:
        index = previous_actions.long()
        # A one-hot of category 0 would read "took action 0": a trial's start has no previous action.
        action = F.one_hot(index.clamp(min=0), num_categories).to(torch.float32) * (index >= 0).unsqueeze(-1)
    else:
        action = previous_actions.reshape(*lead, -1).to(torch.float32)
    reward = previous_rewards.to(torch.float32).unsqueeze(-1) * reward_scale
    done = (previous_dones != 0).to(torch.float32).unsqueeze(-1)
    if zero_after_done:
        ended = done != 0
        action, reward, done = (torch.where(ended, torch.zeros_like(x), x) for x in (action, reward, done))
    return torch.cat([obs, action, reward, done], dim=-1)


#: The Gaussian heads of :class:`GRUPolicy`.
HEADS = ("linear", "tanh")

#: The GRU initialisations of :class:`GRUPolicy`.
GRU_INITS = ("pytorch", "xavier")

#: Task blocks start on 64-byte boundaries: a product's rounding depends on where its operands start.
_ALIGN_FLOATS = 16


def _linear(x: torch.Tensor, layer, tasks: bool) -> torch.Tensor:
    """``layer`` on ``[..., in]``, or with ``tasks`` on ``[K, B, in]`` as one batched product per task
    with the weights expanded over ``K``.

    A task's rows then come out the same bits whatever ``K``, the task's place among the others
    and the thread count (measured with torch's MKL build over K 1-39, B 1-40, 1 and 2 threads;
    ``tests/samplers/test_trials.py`` keeps a smaller grid), provided that every task's block starts 64-byte
    aligned (the input width is padded with zeros to a multiple of 16) and that ``K >= 2`` (one
    task is paired with a zero task: torch computes a batch of one another way).
    """
    if not tasks:
        return F.linear(x, layer.weight, layer.bias)
    K, _, width = x.shape
    weight = layer.weight
    padded = -(-width // _ALIGN_FLOATS) * _ALIGN_FLOATS
    if padded != width:
        x, weight = F.pad(x, (0, padded - width)), F.pad(weight, (0, padded - width))
    elif x.data_ptr() % (x.element_size() * _ALIGN_FLOATS) or not x.is_contiguous():
        x = x.clone(memory_format=torch.contiguous_format)
    if K == 1:
        x = torch.cat([x, torch.zeros_like(x)])
    n = x.shape[0]
    return torch.baddbmm(layer.bias.expand(n, 1, -1), x, weight.t().expand(n, -1, -1))[:K]


def _elementwise(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, tasks: bool,
                 width: Optional[int] = None) -> torch.Tensor:
    """``fn`` on ``x``, or with ``tasks`` on ``[K, B, ...]`` so that each task's block ``x[k]`` gets the bits it
    would get alone: on all blocks at once where :func:`exact_on_all_rows` says that is exact, else on each
    block alone. Torch's vectorised loops compute a tensor's trailing elements (and, with threads, each
    chunk's) another way, so a transcendental function (sigmoid) of a task's rows could depend on the other
    tasks' sizes. Arithmetic (+, -, *) is exact either way and is left batched.

    :param width: the width of the rows ``fn`` computes on, when not ``x``'s last dimension (a function of
        positions ``[K, B]`` that computes ``[K, B, width]``).
    """
    if not tasks:
        return fn(x)
    rows = x.shape[-1] if width is None else width
    if x.is_contiguous() and exact_on_all_rows(rows, x.numel() * (1 if width is None else width)):
        return fn(x)
    return torch.stack([fn(block) for block in x.unbind(0)])


def exact_on_all_rows(width: int, numel: int) -> bool:
    """Whether an elementwise function of ``numel`` elements in contiguous rows of ``width`` gives each row the
    same bits on all rows as on its task's rows alone: torch's vectorised loops compute a tensor's tail past the
    last whole vector pair (at most 32 floats) another way, and with threads each chunk's; with rows of a
    multiple of 32 floats on one thread (or under torch's grain of 32,768 elements, one chunk) no row lies in
    a tail either way."""
    return width % 32 == 0 and (torch.get_num_threads() == 1 or numel < 32768)


class GRUPolicy(nn.Module):
    """An MLP encoder, one GRU layer and a Gaussian or categorical head.

    The default sizes are metaworld-algorithms' RL² network (2 x 256 tanh
    encoder, GRU of 256). The Gaussian head is one of:

    * ``"linear"``: a linear mean and a learned state-independent log-std
      (as this package's MLP policies);
    * ``"tanh"``: metaworld-algorithms' RL² head, one linear layer giving the
      mean and the log-std, both passed through tanh (``StdType.MLP_HEAD``,
      ``activate_head``): the mean in [-1, 1], the std state-dependent in
      [e^-1, e]; the Gaussian itself is not squashed.

    :param input_size: width of the policy's input (:func:`rl2_input_size` for RL²).
    :param output_size: action dimension, or number of categories.
    :param categorical: a categorical head (``Discrete`` actions) instead of a Gaussian one.
    :param head: ``"linear"`` or ``"tanh"`` (Gaussian heads only).
    :param gru_init: ``"pytorch"``: the recurrent weights orthogonal as one matrix, the input
        weights and the biases PyTorch's; ``"xavier"``: metaworld-algorithms' (flax's GRU cell with
        ``XAVIER_UNIFORM``, ``ORTHOGONAL`` and ``ZEROS``): per gate, Xavier-uniform input weights and
        orthogonal recurrent ones, zero biases.
    """

    is_recurrent = True
    # All tasks in one call per step: _linear's products and _elementwise's functions
    # give a task's rows the same bits whatever the other tasks of the call (the rule
    # every backend relies on).
    supports_task_batches = True

    def __init__(self, input_size: int, output_size: int, hidden_sizes: Sequence[int] = (256, 256),
                 state_size: int = 256, nonlinearity: Callable[[torch.Tensor], torch.Tensor] | str = "tanh",
                 categorical: bool = False, init_std: float = 1.0, min_std: float = 1e-6,
                 head: str = "linear", gru_init: str = "pytorch") -> None:
        super().__init__()
        if gru_init not in GRU_INITS:
            raise ValueError(f"GRUPolicy: gru_init must be one of {', '.join(map(repr, GRU_INITS))}, got {gru_init!r}")
        if head not in HEADS:
            raise ValueError(f"GRUPolicy: head must be one of {', '.join(map(repr, HEADS))}, got {head!r}")
        if categorical and head != "linear":
            raise ValueError(f"GRUPolicy: a categorical policy has a linear head (logits), got head={head!r}")
        self.head_type = head
        self.input_size, self.output_size = int(input_size), int(output_size)
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.state_size = int(state_size)
        self.state_shape = (self.state_size,)
        self.nonlinearity = get_nonlinearity(nonlinearity)
        self.categorical = bool(categorical)
        self.min_log_std = math.log(min_std)
        sizes = (self.input_size,) + self.hidden_sizes
        self.encoder = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        # nn.GRU's own parameters: training runs whole chunks through its native loop,
        # sampling one step at a time through the same weights (`_cell`).
        self.gru = nn.GRU(sizes[-1], self.state_size)
        state_dependent_std = head == "tanh"
        self.head = nn.Linear(self.state_size, self.output_size * (2 if state_dependent_std else 1))
        if not self.categorical and not state_dependent_std:
            self.sigma = nn.Parameter(torch.full((self.output_size,), math.log(init_std)))
        for layer in (*self.encoder, self.head):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
        if gru_init == "pytorch":
            nn.init.orthogonal_(self.gru.weight_hh_l0)
        else:
            with torch.no_grad():  # flax's cell has one dense layer per gate: each is initialised alone
                for ih, hh in zip(self.gru.weight_ih_l0.chunk(3), self.gru.weight_hh_l0.chunk(3)):
                    ih.copy_(nn.init.xavier_uniform_(torch.empty_like(ih)))
                    hh.copy_(nn.init.orthogonal_(torch.empty_like(hh)))
                nn.init.zeros_(self.gru.bias_ih_l0)
                nn.init.zeros_(self.gru.bias_hh_l0)

    def initial_state(self, n: int, device: Optional[torch.device] = None) -> torch.Tensor:
        return torch.zeros((n, self.state_size), device=device if device is not None else self.head.weight.device)

    def _encode(self, x: torch.Tensor, tasks: bool = False) -> torch.Tensor:
        for layer in self.encoder:
            x = _elementwise(self.nonlinearity, _linear(x, layer, tasks), tasks)
        return x

    def _cell(self, x: torch.Tensor, h: torch.Tensor, tasks: bool) -> torch.Tensor:
        """One GRU step with ``nn.GRU``'s equations and weights (gate order r, z, n)."""
        gru = self.gru
        gi = _linear(x, _Affine(gru.weight_ih_l0, gru.bias_ih_l0), tasks)
        gh = _linear(h, _Affine(gru.weight_hh_l0, gru.bias_hh_l0), tasks)
        i_r, i_z, i_n = gi.chunk(3, -1)
        h_r, h_z, h_n = gh.chunk(3, -1)
        r = _elementwise(torch.sigmoid, i_r + h_r, tasks)
        z = _elementwise(torch.sigmoid, i_z + h_z, tasks)
        n = _elementwise(torch.tanh, i_n + r * h_n, tasks)
        return (1 - z) * n + z * h

    def distribution(self, features: torch.Tensor, tasks: bool = False) -> Distribution:
        """The head's distribution of the GRU's outputs ``[..., H]``."""
        out = _linear(features, self.head, tasks)
        if self.categorical:
            return Categorical(logits=out, validate_args=False)
        if self.head_type == "tanh":
            mean, log_std = _elementwise(torch.tanh, out, tasks).chunk(2, -1)
            scale = _elementwise(torch.exp, log_std.clamp(min=self.min_log_std), tasks)
            return Independent(Normal(mean, scale, validate_args=False), 1, validate_args=False)
        scale = self.sigma.clamp(min=self.min_log_std).exp()
        return Independent(Normal(out, scale, validate_args=False), 1, validate_args=False)

    def step(self, inputs: torch.Tensor, state: torch.Tensor) -> Tuple[Distribution, torch.Tensor]:
        """One step on ``[N, in]`` (or ``[K, B, in]``) inputs and the matching state."""
        tasks = inputs.dim() == 3
        h = self._cell(self._encode(inputs, tasks), state, tasks)
        return self.distribution(h, tasks), h

    def forward_trials(self, inputs: torch.Tensor, state: torch.Tensor,
                       chunk: Optional[int] = None) -> Tuple[Distribution, torch.Tensor]:
        """The distributions ``[T, N]`` along whole trials ``inputs`` ``[T, N, in]``
        from ``state`` ``[N, H]``, for training. With ``chunk``, gradients are
        truncated every ``chunk`` steps (truncated BPTT): the state entering a
        chunk is carried, detached. Also returns the state after the last step."""
        x = self._encode(inputs)
        h = state.unsqueeze(0)
        T = x.shape[0]
        chunk = T if chunk is None else max(1, int(chunk))
        outputs = []
        for lo in range(0, T, chunk):
            if lo:
                h = h.detach()
            out, h = self.gru(x[lo:lo + chunk], h)
            outputs.append(out)
        return self.distribution(torch.cat(outputs)), h.squeeze(0)


class _Affine:
    """A weight and bias in ``nn.Linear``'s attribute names, for :func:`_linear`."""

    __slots__ = ("weight", "bias")

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor) -> None:
        self.weight, self.bias = weight, bias
