"""A causal Transformer trial policy: one token per step of the trial, a key/value cache while sampling.

Each step of a trial is one token: the policy's input row (the observation, the previous action, reward
and done flag, optionally the attempt index: the learner's :class:`~maml_rl.policies.trial_inputs.InputFormat`)
embedded, plus a sinusoidal encoding of the step's position in the trial. Pre-LayerNorm blocks of causal
self-attention and an MLP follow (the defaults, d_model 64, 2 layers, 4 heads, are in the range of TrMRL's
and AMAGO's), then a Gaussian or categorical head.

The context is the whole trial by default, or with ``window`` the last ``window`` tokens at every layer (a
sliding-window mask, as AMAGO's rolling cache). While sampling, :meth:`TransformerPolicy.step` decodes one
token per row with a per-layer :class:`KVCache` (a step attends over the cached keys: its cost grows with the
context, not its square); for training, :meth:`TransformerPolicy.forward_trials` runs whole trials in one
causal pass. The state is a function of the inputs seen (``state_is_inputs``): the sampler records none and
the learner rebuilds each trial from its :class:`~maml_rl.data.trials.TrialBatch`.
"""

from __future__ import annotations

import math
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Distribution, Independent, Normal

from maml_rl.policies.policy import get_nonlinearity
from maml_rl.policies.recurrent import _elementwise, _linear

__all__ = ["ATTENTION", "KVCache", "TransformerPolicy"]

#: How the update may compute attention over whole trials (:class:`TransformerPolicy`'s ``attention``).
ATTENTION = ("math", "fused")


class KVCache(NamedTuple):
    """Each row's keys and values at every layer, ``[n, heads, capacity, head_size]``, the first
    ``positions[row]`` columns of a row holding its tokens (columns past them are unused)."""

    keys: Tuple[torch.Tensor, ...]
    values: Tuple[torch.Tensor, ...]
    positions: torch.Tensor  # [n] int64: tokens seen, the position of the row's next token

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]


def positional_encoding(positions: torch.Tensor, size: int) -> torch.Tensor:
    """``[..., size]`` sinusoidal encodings of integer ``positions`` (Vaswani et al.), computed on their device."""
    half = torch.arange(0, size, 2, device=positions.device, dtype=torch.float32)
    angles = positions.to(torch.float32).unsqueeze(-1) * torch.exp(half * (-math.log(10000.0) / size))
    out = torch.zeros((*positions.shape, size), device=positions.device)
    out[..., 0::2] = torch.sin(angles)
    out[..., 1::2] = torch.cos(angles[..., : size // 2])
    return out


class _Encoder(nn.Module):
    """A step's input row to its token: ``hidden_sizes`` layers with ``nonlinearity``, then a linear map to
    ``d_model`` (none: one linear embedding, as TrMRL's)."""

    def __init__(self, input_size: int, hidden_sizes: Sequence[int], d_model: int,
                 nonlinearity: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        sizes = (input_size, *hidden_sizes)
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.out = nn.Linear(sizes[-1], d_model)
        self.nonlinearity = nonlinearity

    def forward(self, x: torch.Tensor, ops: "_TaskOps" = None) -> torch.Tensor:
        ops = ops or _PLAIN
        for layer in self.hidden:
            x = ops.per_task(self.nonlinearity, ops.linear(x, layer))
        return ops.linear(x, self.out)


class _Block(nn.Module):
    """Pre-LayerNorm: ``x + attention(LN(x))``, then ``x + MLP(LN(x))``."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads, self.head_size = num_heads, d_model // num_heads
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def heads(self, h: torch.Tensor, ops: "_TaskOps" = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys, values ``[..., heads, head_size]`` of normalised ``h`` ``[..., d]``."""
        q, k, v = (ops or _PLAIN).linear(h, self.qkv).chunk(3, -1)
        shape = (*h.shape[:-1], self.num_heads, self.head_size)
        return q.reshape(shape), k.reshape(shape), v.reshape(shape)

    def finish(self, x: torch.Tensor, attended: torch.Tensor, ops: "_TaskOps" = None) -> torch.Tensor:
        """The block's output from its input and the attention's ``[..., d]``."""
        ops = ops or _PLAIN
        x = x + ops.linear(attended, self.out)
        first, activation, second = self.mlp
        h = ops.per_task(activation, ops.linear(ops.rowwise(self.norm2, x), first))
        return x + ops.linear(h, second)


class TransformerPolicy(nn.Module):
    """A causal Transformer over a trial's steps with a Gaussian (linear mean, learned log-std) or
    categorical head.

    :param input_size: width of one step's input row (the input format's ``size``).
    :param output_size: action dimension, or number of categories.
    :param hidden_sizes: the token encoder's hidden layers (with ``nonlinearity``) before ``d_model``.
    :param window: attend to at most this many tokens (the current one included) at every layer;
        ``None``: the whole trial.
    :param attention: how :meth:`forward_trials` (the update) attends over whole trials: ``"math"``, the
        explicit ``T x T`` scores, masked, softmaxed and multiplied; or ``"fused"``, torch's
        ``scaled_dot_product_attention``, the same numbers to rounding without the scores in memory (on one CPU
        core about 6x faster at 1,500 tokens, forward and backward). Sampling (:meth:`step`) is the same either way.
    """

    is_recurrent = True
    #: All tasks in one call per step (the cache's rows flat): see :meth:`step`.
    supports_task_batches = True
    #: The state is the inputs seen: nothing recorded, the update reruns each whole trial.
    state_is_inputs = True

    def __init__(self, input_size: int, output_size: int, d_model: int = 64, num_layers: int = 2,
                 num_heads: int = 4, window: Optional[int] = None, categorical: bool = False,
                 init_std: float = 1.0, min_std: float = 1e-6, hidden_sizes: Sequence[int] = (),
                 nonlinearity: Callable[[torch.Tensor], torch.Tensor] | str = "tanh",
                 attention: str = "math") -> None:
        super().__init__()
        if attention not in ATTENTION:
            raise ValueError(f"TransformerPolicy: attention must be one of {', '.join(ATTENTION)}, got {attention!r}")
        if d_model % num_heads or d_model % 2:
            raise ValueError(f"TransformerPolicy: d_model ({d_model}) must be even and a multiple of num_heads "
                             f"({num_heads})")
        if window is not None and (isinstance(window, bool) or int(window) < 1):
            raise ValueError(f"TransformerPolicy: window must be None (the whole trial) or an int >= 1, got {window!r}")
        self.input_size, self.output_size = int(input_size), int(output_size)
        self.d_model, self.num_layers, self.num_heads = int(d_model), int(num_layers), int(num_heads)
        self.window = None if window is None else int(window)
        self.attention = attention
        self.categorical = bool(categorical)
        self.min_log_std = math.log(min_std)
        self.embed = _Encoder(self.input_size, tuple(int(h) for h in hidden_sizes), self.d_model,
                              get_nonlinearity(nonlinearity))
        self.blocks = nn.ModuleList(_Block(self.d_model, self.num_heads) for _ in range(self.num_layers))
        self.norm = nn.LayerNorm(self.d_model)
        self.head = nn.Linear(self.d_model, self.output_size)
        if not self.categorical:
            self.sigma = nn.Parameter(torch.full((self.output_size,), math.log(init_std)))

    # --------------------------------------------------------------- state
    def initial_state(self, n: int, device: Optional[torch.device] = None) -> KVCache:
        device = device if device is not None else self.head.weight.device
        empty = tuple(torch.zeros((n, self.num_heads, 0, self.d_model // self.num_heads), device=device)
                      for _ in range(self.num_layers))
        return KVCache(empty, empty, torch.zeros(n, dtype=torch.int64, device=device))

    def select_state(self, mask: torch.Tensor, new: KVCache, old: KVCache) -> KVCache:
        """Rows ``mask`` at ``new``'s positions, the others at ``old``'s. The caches' columns are shared: the
        larger one holds both (a step writes only past each row's position; a reset cache is empty)."""
        cache = new if new.capacity >= old.capacity else old
        return KVCache(cache.keys, cache.values, torch.where(mask, new.positions, old.positions))

    def state_rows(self, state: KVCache, rows: slice, copy: bool) -> KVCache:
        """Views of the cache's rows, even with ``copy``: a row spans a multiple of 16 columns of 4-byte
        floats, so every row starts 64-byte aligned, as in fresh memory, and a step's products give the
        same bits; copying the whole cache for every task at every step would cost more than the step."""
        take = (lambda a: a[rows].clone()) if copy else (lambda a: a[rows])
        return KVCache(tuple(a[rows] for a in state.keys), tuple(a[rows] for a in state.values),
                       take(state.positions))

    def cat_states(self, states: Sequence[KVCache]) -> KVCache:
        positions = torch.cat([s.positions for s in states])
        adjacent = _adjacent([s.keys for s in states]), _adjacent([s.values for s in states])
        if all(part is not None for part in adjacent):
            # Consecutive rows of one cache (state_rows's views, stepped in place): that cache, not a copy.
            return KVCache(*adjacent, positions)
        capacity = max(s.capacity for s in states)
        grown = [_grow(s, capacity) for s in states]
        return KVCache(tuple(torch.cat(parts) for parts in zip(*(s.keys for s in grown))),
                       tuple(torch.cat(parts) for parts in zip(*(s.values for s in grown))),
                       torch.cat([s.positions for s in grown]))

    def state_bytes(self, n: int, steps: int) -> int:
        """Keys and values of every layer for ``steps`` tokens (the cache's capacity doubles as it fills)."""
        return 2 * 2 * self.num_layers * n * self.d_model * max(int(steps), 1) * 4

    # -------------------------------------------------------------- layers
    def distribution(self, x: torch.Tensor, ops: Optional["_TaskOps"] = None) -> Distribution:
        """The head's distribution of the final tokens ``x``; with a step's task batches, of batch shape the
        call's ``[K, B]``."""
        ops = ops or _PLAIN
        out = ops.unflat(ops.linear(ops.rowwise(self.norm, x), self.head))
        if self.categorical:
            return Categorical(logits=out, validate_args=False)
        scale = self.sigma.clamp(min=self.min_log_std).exp()
        return Independent(Normal(out, scale, validate_args=False), 1, validate_args=False)

    def step(self, inputs: torch.Tensor, state: KVCache) -> Tuple[Distribution, KVCache]:
        """One token per row at each row's position, attending over its cache: ``inputs`` ``[n, in]``, or
        ``[K, B, in]`` for ``K`` tasks of ``B`` rows in one call (``supports_task_batches``; the cache's rows
        stay flat, task-major), where a task's rows get the same bits whatever the other tasks of the call."""
        tasks = inputs.shape[:2] if inputs.dim() == 3 else None
        ops = _TaskOps(tasks)
        inputs = inputs.reshape(-1, inputs.shape[-1])
        positions = state.positions
        n = inputs.shape[0]
        needed = int(positions.max()) + 1 if n else 0
        if needed > state.capacity:
            state = _grow(state, max(needed, 2 * state.capacity, 16))
        x = self.embed(inputs, ops) + ops.per_task(lambda p: positional_encoding(p, self.d_model), positions,
                                                   self.d_model // 2)
        # Rows at one position share one product across tasks, which gives each task the bits of its own products
        # (a batched product's items do not depend on the batch) unless a task's product would be a batch of one
        # query (one head, one row), which torch computes another way: with one head, each task alone.
        parts = [slice(0, n)] if self.num_heads > 1 else ops.parts(n)
        groups = [(part, _groups(positions[part], self.window)) for part in parts]
        lockstep = len(parts) == 1 and len(groups[0][1]) == 1  # every row at one position
        rows = None if lockstep else torch.arange(n, device=inputs.device)
        for block, keys, values in zip(self.blocks, state.keys, state.values):
            q, k, v = block.heads(ops.rowwise(block.norm1, x), ops)  # [n, heads, head_size]
            if lockstep:
                position = groups[0][1][0][2] - 1
                keys[:, :, position] = k
                values[:, :, position] = v
            else:
                keys[rows, :, positions] = k
                values[rows, :, positions] = v
            attended = [_attend(block, q[part], keys[part], values[part], part_groups)
                        for part, part_groups in groups]
            attended = attended[0] if len(attended) == 1 else torch.cat(attended)
            x = block.finish(x, attended.reshape(n, self.d_model), ops)
        return self.distribution(x, ops), KVCache(state.keys, state.values, positions + 1)

    def forward_trials(self, inputs: torch.Tensor, state: Optional[KVCache] = None,
                       chunk: Optional[int] = None) -> Tuple[Distribution, None]:
        """The distributions ``[T, N]`` along whole trials ``inputs`` ``[T, N, in]``, in one causal pass
        from the trials' starts (``state`` and ``chunk`` are the recurrent protocol's; none applies)."""
        if state is not None or chunk is not None:
            raise ValueError("TransformerPolicy.forward_trials runs whole trials from their start: its state is its "
                             "inputs, so give state=None and chunk=None")
        T, N = inputs.shape[:2]
        x = self.embed(inputs.transpose(0, 1)) + positional_encoding(torch.arange(T, device=inputs.device),
                                                                      self.d_model)
        whole_causal = self.attention == "fused" and self.window is None  # the kernel's own causal mask
        allowed = None if whole_causal else causal_mask(T, self.window, inputs.device)
        for block in self.blocks:
            q, k, v = (a.transpose(1, 2) for a in block.heads(block.norm1(x)))  # [N, heads, T, head_size]
            if self.attention == "fused":
                attended = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=whole_causal)
            else:
                scores = q @ k.transpose(-1, -2) / math.sqrt(block.head_size)
                scores = scores.masked_fill(~allowed, float("-inf"))
                attended = scores.softmax(-1) @ v
            x = block.finish(x, attended.transpose(1, 2).reshape(N, T, self.d_model))
        return self.distribution(x.transpose(0, 1)), None


def _attend(block: _Block, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
            groups: List[tuple]) -> torch.Tensor:
    """One step's attention of queries ``q`` ``[n, heads, head_size]`` over their rows' cached keys and values,
    each row up to its own position: ``groups`` (:func:`_groups`) share one product each."""
    attended = torch.empty_like(q)
    for index, lo, hi in groups:
        qs = q if index is None else q[index]
        ks, vs = (keys, values) if index is None else (keys[index], values[index])
        # Batched products of one query row each: the bits of the einsums they replaced (checked on the committed
        # runs), in about two thirds of their time at a 1,000-token context.
        scores = (qs.unsqueeze(-2) @ ks[:, :, lo:hi].transpose(-1, -2)).squeeze(-2) / math.sqrt(block.head_size)
        out = (scores.softmax(-1).unsqueeze(-2) @ vs[:, :, lo:hi]).squeeze(-2)
        if index is None:
            attended = out
        else:
            attended[index] = out
    return attended


class _TaskOps:
    """The arithmetic of a step on flat rows, arranged for ``tasks`` ``(K, B)`` (``None``: one plain call) so
    that a task's rows get the same bits whatever the other tasks of the call, as :class:`GRUPolicy`'s do:
    linear maps as one batched product per task (:func:`~maml_rl.policies.recurrent._linear`); row-wise
    functions (LayerNorm) on all rows at once, since torch computes each row alone; elementwise functions
    (GELU, sinusoids, the encoder's nonlinearity) on all rows at once where that is exact, else on each task's
    block alone (:func:`~maml_rl.policies.recurrent._elementwise`)."""

    def __init__(self, tasks: Optional[Tuple[int, int]]) -> None:
        self.tasks = tasks

    def linear(self, x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
        if self.tasks is None:
            return F.linear(x, layer.weight, layer.bias)
        return _linear(x.reshape(*self.tasks, x.shape[-1]), layer, True).reshape(x.shape[0], -1)

    def rowwise(self, norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def per_task(self, fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                 width: Optional[int] = None) -> torch.Tensor:
        """``fn`` elementwise on ``x`` ``[n, ...]``, or (``width``) a function of ``x`` ``[n]`` computed
        elementwise on ``[n, width]``."""
        if self.tasks is None:
            return fn(x)
        out = _elementwise(fn, self.unflat(x), True, width)  # [K, B, ...]
        return out.reshape(x.shape[0], *out.shape[2:])

    def parts(self, n: int) -> List[slice]:
        """Each task's rows (all rows for a plain call)."""
        if self.tasks is None:
            return [slice(0, n)]
        B = self.tasks[1]
        return [slice(k * B, (k + 1) * B) for k in range(self.tasks[0])]

    def unflat(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.tasks is None else x.reshape(*self.tasks, *x.shape[1:])


_PLAIN = _TaskOps(None)


def causal_mask(length: int, window: Optional[int], device=None) -> torch.Tensor:
    """``[T, T]`` bool: query ``i`` may attend to key ``j`` (``j <= i``, and ``j > i - window``)."""
    i = torch.arange(length, device=device).unsqueeze(1)
    j = torch.arange(length, device=device).unsqueeze(0)
    allowed = j <= i
    return allowed if window is None else allowed & (j > i - window)


def _groups(positions: torch.Tensor, window: Optional[int]) -> List[tuple]:
    """``(rows, lo, hi)`` for each distinct position: the cache columns its rows attend to; ``rows`` is
    ``None`` when every row is at one position (one product for all)."""
    if len(positions) and bool(positions[0] == positions[-1]) and bool((positions == positions[0]).all()):
        distinct = [int(positions[0])]  # lockstep: torch.unique's sort is a tenth of a small step
    else:
        distinct = torch.unique(positions).tolist()
    out = []
    for p in distinct:
        lo = 0 if window is None else max(0, p + 1 - window)
        index = None if len(distinct) == 1 else torch.nonzero(positions == p).squeeze(1)
        out.append((index, lo, p + 1))
    return out


def _adjacent(parts: Sequence[Tuple[torch.Tensor, ...]]) -> Optional[Tuple[torch.Tensor, ...]]:
    """Each layer's tensors of ``parts`` as one tensor without copying, when they are consecutive row blocks
    of one contiguous tensor (same storage, shapes and strides, each starting where the previous ends);
    otherwise ``None``."""
    out = []
    for layer in zip(*parts):
        first = layer[0]
        if not first.is_contiguous():
            return None
        end = first.data_ptr()
        for a in layer:
            if (a.data_ptr() != end or a.shape[1:] != first.shape[1:] or a.stride() != first.stride()
                    or a.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()):
                return None
            end += a.shape[0] * a.stride(0) * a.element_size()
        out.append(first.as_strided((sum(a.shape[0] for a in layer), *first.shape[1:]), first.stride()))
    return tuple(out)


def _grow(state: KVCache, capacity: int) -> KVCache:
    """``state`` with room for ``capacity`` tokens per row (zeros past the old columns)."""
    extra = capacity - state.capacity
    if extra <= 0:
        return state
    pad = lambda a: F.pad(a, (0, 0, 0, extra))  # noqa: E731
    return KVCache(tuple(map(pad, state.keys)), tuple(map(pad, state.values)), state.positions)
