"""The causal Transformer trial policy: its cached decoding against its full pass and against a naive
per-token recomputation, on the sampler's trials (episodes ending at the first step included), across
worker layouts; and the evaluation switch that resets a trial policy's context at each attempt."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from maml_rl.policies import GRUPolicy, rl2_input_size
from maml_rl.policies.trial_inputs import InputFormat
from maml_rl.policies.transformer import TransformerPolicy
from maml_rl.samplers import MultiTaskSampler

#: float32 tolerance of the cached decoding against the one-pass one: the same products summed in another
#: order (a softmax over a different number of masked zeros), about 1e-7 measured.
ATOL = RTOL = 1e-5


def decode(policy, inputs):
    """The means (or logits) of step-by-step decoding with the key/value cache, ``[T, N, out]``."""
    state = policy.initial_state(inputs.shape[1])
    out = []
    with torch.no_grad():
        for x in inputs:
            distribution, state = policy.step(x, state)
            out.append(distribution.logits if policy.categorical else distribution.mean)
    return torch.stack(out)


def naive(policy, inputs):
    """The same network written out token by token: each query attends to its keys one by one (those within the
    window), no mask, no cache; ``[T, N, out]``."""
    T, N = inputs.shape[:2]
    out = torch.zeros(T, N, policy.output_size)
    with torch.no_grad():
        for n in range(N):
            x = [policy.embed(inputs[t, n]) for t in range(T)]
            for t in range(T):  # sinusoids by hand
                angle = [t / 10000 ** (2 * (i // 2) / policy.d_model) for i in range(policy.d_model)]
                x[t] = x[t] + torch.tensor([math.sin(a) if i % 2 == 0 else math.cos(a) for i, a in enumerate(angle)])
            for block in policy.blocks:
                H, D = block.num_heads, block.head_size
                qkv = [block.qkv(block.norm1(v)) for v in x]
                q = [a[:H * D].view(H, D) for a in qkv]
                k = [a[H * D:2 * H * D].view(H, D) for a in qkv]
                v = [a[2 * H * D:].view(H, D) for a in qkv]
                new = []
                for t in range(T):
                    first = 0 if policy.window is None else max(0, t - policy.window + 1)
                    heads = []
                    for h in range(H):
                        scores = torch.stack([q[t][h] @ k[j][h] / math.sqrt(D) for j in range(first, t + 1)])
                        weights = torch.exp(scores - scores.max())
                        weights = weights / weights.sum()
                        heads.append(sum(w * v[j][h] for w, j in zip(weights, range(first, t + 1))))
                    new.append(block.finish(x[t], torch.cat(heads)))
                x = new
            for t in range(T):
                out[t, n] = policy.head(policy.norm(x[t]))
    return out


@pytest.mark.parametrize("attention", ["math", "fused"])
@pytest.mark.parametrize("window", [None, 1, 3])
@pytest.mark.parametrize("length", [1, 2, 7, 20])
def test_cached_decoding_equals_the_one_pass_and_the_naive_recomputation(window, length, attention):
    torch.manual_seed(length)
    policy = TransformerPolicy(5, 2, d_model=16, num_layers=2, num_heads=4, window=window, attention=attention)
    inputs = torch.randn(length, 3, 5)
    distribution, state = policy.forward_trials(inputs)
    assert state is None
    full = distribution.mean.detach()
    assert full.shape == (length, 3, 2)
    torch.testing.assert_close(decode(policy, inputs), full, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(naive(policy, inputs), full, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("window", [None, 4])
def test_fused_attention_trains_as_the_explicit_scores(window):
    """The update's two ways of attending over whole trials give the same log-probabilities and gradients to
    float32 rounding (long trials, a categorical head, several trials of a batch)."""
    torch.manual_seed(2)
    math_policy = TransformerPolicy(5, 3, d_model=16, num_layers=2, num_heads=4, window=window, categorical=True)
    fused_policy = TransformerPolicy(5, 3, d_model=16, num_layers=2, num_heads=4, window=window, categorical=True,
                                     attention="fused")
    fused_policy.load_state_dict(math_policy.state_dict())
    inputs, actions = torch.randn(60, 4, 5), torch.randint(0, 3, (60, 4))
    grads = []
    for policy in (math_policy, fused_policy):
        log_probs = policy.forward_trials(inputs)[0].log_prob(actions)
        log_probs.sum().backward()
        grads.append((log_probs.detach(), [p.grad.clone() for p in policy.parameters()]))
    torch.testing.assert_close(grads[1][0], grads[0][0], atol=ATOL, rtol=RTOL)
    for fused, explicit in zip(grads[1][1], grads[0][1]):
        torch.testing.assert_close(fused, explicit, atol=1e-4, rtol=1e-4)
    assert not all(torch.equal(a, b) for a, b in zip(grads[1][1], grads[0][1]))  # two computations, not one


def test_a_window_forgets_what_left_it_and_the_whole_trial_does_not():
    torch.manual_seed(0)
    inputs = torch.randn(6, 1, 5)
    changed = inputs.clone()
    changed[0] += 1.0  # the first token only
    for window, same_at_end in ((3, True), (None, False)):
        policy = TransformerPolicy(5, 2, d_model=8, num_layers=1, num_heads=2, window=window)
        a, b = decode(policy, inputs), decode(policy, changed)
        assert not torch.equal(a[0], b[0])
        # One layer: token 5 sees tokens 3-5 through a window of 3, none of which changed.
        assert torch.equal(a[5], b[5]) == same_at_end


def test_a_categorical_head_after_a_token_encoder_decodes_as_it_trains():
    torch.manual_seed(1)
    policy = TransformerPolicy(4, 3, d_model=8, num_layers=2, num_heads=2, categorical=True, hidden_sizes=(6,),
                               nonlinearity="relu")
    assert len(policy.embed.hidden) == 1
    inputs = torch.randn(5, 2, 4)
    torch.testing.assert_close(decode(policy, inputs), policy.forward_trials(inputs)[0].logits.detach(),
                               atol=ATOL, rtol=RTOL)


def test_misuse_is_refused():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        TransformerPolicy(4, 2, d_model=10, num_heads=4)
    with pytest.raises(ValueError, match="window must be None"):
        TransformerPolicy(4, 2, d_model=8, num_heads=2, window=0)
    with pytest.raises(ValueError, match="attention must be one of math, fused, got 'flash'"):
        TransformerPolicy(4, 2, d_model=8, num_heads=2, attention="flash")
    policy = TransformerPolicy(4, 2, d_model=8, num_heads=2)
    with pytest.raises(ValueError, match="state=None and chunk=None"):
        policy.forward_trials(torch.zeros(3, 1, 4), chunk=2)


def _transformer(attempt=False, window=None):
    torch.manual_seed(0)
    return TransformerPolicy(InputFormat(attempt=attempt).size(2, 2), 2, d_model=8, num_layers=2, num_heads=2,
                             window=window)


def _sampled(policy, episodes, horizon, fmt, **kwargs):
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": horizon}, 2, policy, seed=4, **kwargs) as sampler:
        return sampler.rollout_trials(sampler.sample_tasks(2), episodes, inputs=fmt)


@pytest.mark.parametrize("episodes, horizon, attempt, window", [(3, 1, False, None), (4, 1, True, 2),
                                                                (2, 5, True, None), (1, 1, False, None)])
def test_the_samplers_cached_log_probs_are_the_updates_one_pass(episodes, horizon, attempt, window):
    """Trials sampled with the cache (episodes that end at their first step included) give the log-probs that
    the update's causal pass over the TrialBatch's rebuilt inputs gives; nothing is recorded but them."""
    policy = _transformer(attempt, window)
    fmt = InputFormat(reward_scale=0.5, attempt=attempt)
    for batch in _sampled(policy, episodes, horizon, fmt):
        assert batch.chunk_states is None and batch.final_state is None
        assert batch.inputs == ("rl2+attempt" if attempt else "rl2") and batch.reward_scale == 0.5
        inputs = batch.policy_inputs()
        if attempt:  # the last column counts the episodes before each step
            assert torch.equal(inputs[..., -1], batch.episode_index.float())
        with torch.no_grad():
            log_probs = policy.forward_trials(inputs)[0].log_prob(batch.actions)
        valid = batch.mask > 0
        assert int(valid.sum()) == episodes * horizon * 2
        torch.testing.assert_close(log_probs[valid], batch.log_probs[valid], atol=ATOL, rtol=RTOL)


def test_a_continuation_of_a_transformers_trial_is_refused():
    policy = _transformer()
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 2}, 1, policy, seed=4) as sampler:
        tasks = sampler.sample_tasks(1)
        with pytest.raises(ValueError, match="state is its inputs"):
            sampler.rollout_trials(tasks, 1, start={"state": np.zeros((1, 1)), "actions": np.zeros((1, 2)),
                                                    "rewards": np.zeros(1), "dones": np.zeros(1)})


@pytest.mark.slow
@pytest.mark.parametrize("partial", [False, True], ids=["lockstep", "partial"])
def test_same_seed_same_bits_on_zero_and_two_workers(partial):
    fmt = InputFormat(reward_scale=0.1)
    runs = [_sampled(_transformer(), 3, 4, fmt, num_workers=workers, partial=partial and workers > 0)
            for workers in (0, 2)]
    for a, b in zip(*runs):
        for name in ("observations", "actions", "rewards", "dones", "lengths", "log_probs"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("make", [lambda: _transformer(), lambda: GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)],
                         ids=["transformer", "gru"])
def test_resetting_the_context_each_attempt_repeats_the_first_attempt(make):
    """A deterministic policy (mean actions) on a deterministic env (2D navigation starts at the origin): with
    its context reset at each episode, every attempt takes attempt 0's actions; with its memory, it does not."""
    torch.manual_seed(0)
    policy = make()
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 4}, 1, policy, seed=4) as sampler:
        tasks = sampler.sample_tasks(2)
        reset = sampler.rollout_trials(tasks, 3, actions="mean", reset_each_episode=True)
        kept = sampler.rollout_trials(tasks, 3, actions="mean")
    for batch in reset:
        assert batch.context_reset and torch.equal(batch.lengths, torch.tensor([12]))
        attempts = batch.actions[:, 0].reshape(3, 4, 2)
        assert torch.equal(attempts[1], attempts[0]) and torch.equal(attempts[2], attempts[0])
        with pytest.raises(ValueError, match="not one trial's"):
            batch.policy_inputs()
    for batch, other in zip(kept, reset):
        assert torch.equal(batch.actions[:4], other.actions[:4])  # the first attempt is the same either way
        assert not torch.equal(batch.actions[4:8], batch.actions[:4])


@pytest.mark.slow
@pytest.mark.parametrize("make", [lambda: _transformer(), lambda: GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)],
                         ids=["transformer", "gru"])
def test_the_context_reset_in_partial_mode_gives_lockstep_bits(make):
    """In partial mode a waiting slot's done flag may still be its worker's to write: the reset read it and, by
    timing, reset the slot's state early (runs differed from one another). Now only stepping slots reset: three
    calls in partial mode on 2 workers equal lockstep in this process, bit for bit."""
    torch.manual_seed(0)
    policy = make()
    runs = []
    for workers, partial in ((0, False), (2, True)):
        with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 7}, 3, policy, seed=1, num_workers=workers,
                              partial=partial) as sampler:
            tasks = sampler.sample_tasks(4)
            runs.append([sampler.rollout_trials(tasks, 3, reset_each_episode=True) for _ in range(3)])
    for want, got in zip(*runs):
        for a, b in zip(want, got):
            for name in ("observations", "actions", "rewards", "log_probs"):
                assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_the_memory_check_counts_the_key_value_cache_the_policy_declares(monkeypatch):
    """The pool's check is given the cache of a whole trial (keys and values of every layer, room to double),
    and refuses a trial whose cache cannot fit, before any step."""
    from maml_rl.samplers.backends import local
    from maml_rl.samplers.workers.memory import InsufficientMemoryError

    asked = []

    def spy(**kwargs):
        asked.append(kwargs["buffer_bytes"])
        raise InsufficientMemoryError("stop here")

    monkeypatch.setattr(local, "check_memory", spy)
    S, rows = 4 * 2, 10 * 50
    for d_model in (8, 64):
        policy = TransformerPolicy(InputFormat().size(2, 2), 2, d_model=d_model, num_layers=3, num_heads=2)
        with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 50}, 2, policy, seed=0, num_workers=0) as s:
            with pytest.raises(InsufficientMemoryError, match="stop here"):
                s.rollout_trials(s.sample_tasks(4), 10)
    # Twice (the check's margin for a copy) keys + values x 3 layers x 2 (doubling) x rows x d_model floats.
    assert asked[1] - asked[0] == 2 * (2 * 3 * 2 * S * rows * (64 - 8) * 4)


class _PerTaskTransformer(TransformerPolicy):
    """The same policy called once per task on its rows of the cache (a sequence model without task batches)."""

    supports_task_batches = False


class _CopyingTransformer(_PerTaskTransformer):
    """The same policy with each task's cache rows copied into fresh memory and joined with ``torch.cat``
    (the generic state handling's way)."""

    def state_rows(self, state, rows, copy):
        take = (lambda a: a[rows].clone()) if copy else (lambda a: a[rows])
        return type(state)(tuple(map(take, state.keys)), tuple(map(take, state.values)), take(state.positions))

    def cat_states(self, states):
        capacity = max(s.capacity for s in states)

        def join(parts):
            return torch.cat([torch.nn.functional.pad(a, (0, 0, 0, capacity - a.shape[2])) for a in parts])

        return type(states[0])(tuple(map(join, zip(*(s.keys for s in states)))),
                               tuple(map(join, zip(*(s.values for s in states)))),
                               torch.cat([s.positions for s in states]))


@pytest.mark.parametrize("d_model, heads", [(8, 2), (6, 3)])
def test_tasks_stepped_on_views_of_one_cache_give_the_bits_of_copied_rows(d_model, heads):
    """The sampler steps each task on its rows of the cache in place (no copy per task and step): the same
    bits as copies in fresh memory, over three tasks and a trial long enough for the cache to grow twice."""
    runs = []
    for cls in (_PerTaskTransformer, _CopyingTransformer):
        torch.manual_seed(0)
        policy = cls(rl2_input_size(2, 2), 2, d_model=d_model, num_layers=2, num_heads=heads)
        with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 12}, 3, policy, seed=4) as sampler:
            runs.append(sampler.rollout_trials(sampler.sample_tasks(3), 3))
    for a, b in zip(*runs):
        assert a.log_probs.shape[0] > 32
        for name in ("observations", "actions", "log_probs"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_a_tasks_rows_of_the_cache_are_views_and_join_without_a_copy():
    policy = _transformer()
    state = policy.initial_state(6)
    with torch.no_grad():
        _, state = policy.step(torch.zeros(6, policy.input_size), state)
    parts = [policy.state_rows(state, slice(k, k + 2), copy=bool(k)) for k in (0, 2, 4)]
    joined = policy.cat_states(parts)
    for a, b in zip(joined.keys + joined.values, state.keys + state.values):
        assert a.data_ptr() == b.data_ptr() and a.shape == b.shape
    assert torch.equal(joined.positions, state.positions)
    # Parts out of order, or of different caches, are joined by a copy.
    swapped = policy.cat_states([parts[1], parts[0], parts[2]])
    assert swapped.keys[0].data_ptr() != state.keys[0].data_ptr()
    assert torch.equal(swapped.keys[0][:2], state.keys[0][2:4])
    assert torch.equal(swapped.positions, state.positions[[2, 3, 0, 1, 4, 5]])


def _step_tasks(policy, inputs, masks):
    """Means (or logits) ``[T, K, B, out]`` and the final cache of stepping ``K`` tasks' rows together from a
    fresh cache; at step ``t`` only the rows of ``masks[t]`` ``[K, B]`` advance (partial mode)."""
    K, B = inputs.shape[1:3]
    state, out = policy.initial_state(K * B), []
    with torch.no_grad():
        for x, mask in zip(inputs, masks):
            distribution, stepped = policy.step(x.clone(), state)
            out.append(distribution.logits if policy.categorical else distribution.mean)
            state = policy.select_state(mask.reshape(-1), stepped, state)
    return torch.stack(out), state


# Two threads in the full tier: under pytest-xdist the second thread waits for a core the other worker holds, a
# scheduler tick at every product, so each group costs seconds there (the one-task and five-task groups only).
THREADS_AND_GROUPS = {1: ((0, 1), (3, 4), (1, 3), (2, 7)), 2: ((0, 1), (2, 7))}


@pytest.mark.parametrize("num_threads", [1, pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("categorical, hidden, d_model, heads", [
    (False, (), 16, 4), (True, (6,), 16, 4),
    (False, (), 64, 4),  # every elementwise function on all rows at once (rows of 32 floats or more)
    (True, (32,), 32, 1),  # one head: each task's own attention products; sinusoids task by task
])
def test_one_call_for_all_tasks_gives_each_task_the_bits_of_its_own_call(categorical, hidden, d_model, heads,
                                                                          num_threads):
    """The sampler steps every task in one call (supports_task_batches); a task's numbers must not depend on the
    other tasks of the call (how many, where it sits) or the thread count, since workers and Ray actors group
    tasks differently: groups of 1, 2 and 5 of 7 tasks (first, middle, last; an odd group pairs its last task with
    a zero one), called alone, equal their rows of the whole call bit for bit, over a trial long enough for the
    cache to grow twice, with rows at different positions (partial mode); the whole call on one thread, the groups
    on one and (the one-task and five-task groups) on two."""
    torch.manual_seed(5)
    policy = TransformerPolicy(InputFormat().size(2, 2), 3, d_model=d_model, num_layers=2, num_heads=heads,
                               categorical=categorical, hidden_sizes=hidden)
    threads = torch.get_num_threads()
    try:
        for B, T in ((1, 20), (3, 40)):
            inputs = torch.randn(T, 7, B, policy.input_size)
            masks = torch.rand(T, 7, B) < 0.7
            masks[:8] = True  # every row has a token before any waits
            torch.set_num_threads(1)
            whole, whole_state = _step_tasks(policy, inputs, masks)
            assert int(whole_state.positions.max()) > 16 and bool((whole_state.positions != T).any())
            torch.set_num_threads(num_threads)
            for lo, hi in THREADS_AND_GROUPS[num_threads]:
                part, part_state = _step_tasks(policy, inputs[:, lo:hi], masks[:, lo:hi])
                assert torch.equal(part, whole[:, lo:hi]), (B, num_threads, lo, hi)
                rows = slice(lo * B, hi * B)
                assert torch.equal(part_state.positions, whole_state.positions[rows])
                for a, b in zip(part_state.keys + part_state.values, whole_state.keys + whole_state.values):
                    for row, position in enumerate(part_state.positions.tolist()):  # its tokens' columns
                        assert torch.equal(a[row, :, :position], b[rows][row, :, :position]), (B, lo, hi)
    finally:
        torch.set_num_threads(threads)
    # Not the per-row call's bits (other kernels), but the same numbers to rounding.
    flat = decode(policy, inputs[:, 0])
    torch.testing.assert_close(flat, _step_tasks(policy, inputs[:, :1], torch.ones(T, 1, B, dtype=bool))[0][:, 0],
                               atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("num_threads", [1, 2])
def test_functions_on_all_rows_give_each_task_block_its_own_bits(num_threads):
    """What a step's one call for all tasks rests on (``_TaskOps``): LayerNorm on all rows equals it on each
    task's block alone at any width; GELU, tanh, sin and cos do at the widths the step runs them on all rows
    (multiples of 32 floats, on one thread or under torch's grain), and the step keeps to those. A torch whose
    kernels break this fails here, not in a seeded run's bits."""
    from maml_rl.policies.recurrent import exact_on_all_rows
    from maml_rl.policies.transformer import _TaskOps

    generator = torch.Generator().manual_seed(3)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(num_threads)
        for width in (1, 5, 16, 17, 32, 33, 64, 96, 256):
            norm = torch.nn.LayerNorm(width)
            with torch.no_grad():
                norm.weight.normal_(generator=generator), norm.bias.normal_(generator=generator)
            for K, B in ((2, 1), (3, 5), (7, 3), (20, 1)):
                x = torch.randn(K, B, width, generator=generator) * 3
                ops = _TaskOps((K, B))
                flat = x.reshape(K * B, width)
                functions = [lambda a: torch.nn.functional.layer_norm(a, (width,), norm.weight, norm.bias)]
                if exact_on_all_rows(width, flat.numel()):
                    functions += [torch.nn.functional.gelu, torch.tanh, torch.sin, torch.cos]
                elif width % 32 == 0:
                    assert num_threads > 1 and flat.numel() >= 32768
                with torch.no_grad():
                    for fn in functions:
                        blocks = torch.stack([fn(block) for block in x])
                        assert torch.equal(fn(flat).reshape(K, B, width), blocks), (width, K, B, fn)
                        assert torch.equal(ops.per_task(fn, flat).reshape(K, B, width), blocks), (width, K, B, fn)
    finally:
        torch.set_num_threads(threads)
