"""The sampler against a naive reference, bit for bit, over degenerate and ordinary shapes.

Each sampler runs a sequence of rollouts of different shapes; every result must
equal the reference rollout, stay equal after the later rollouts (episodes that
alias the shared buffers are overwritten by the next call: every bandit config
once trained on garbage that way), and share memory with nothing else.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers.differential import SHAPES, assert_equal_to, buffer_ranges, grouped_by_sampler, overlaps, storages
from helpers.differential_envs import factory
from helpers.naive_sampler import ElementwisePolicy, reference_rollout
from helpers.samplers import DRIFT_SEED

pytestmark = pytest.mark.processes

SEED = DRIFT_SEED


def run_sequence(sampler, policy, discrete, shapes, params_for=None):
    """Roll out ``shapes`` in a row on one sampler; check each result then and at the end."""
    results, references = [], []
    for call, (label, tasks, batch_size, horizon) in enumerate(shapes):
        assert sampler.batch_size == batch_size and sampler.horizon == horizon
        params = params_for(policy, tasks) if params_for else None
        batches = sampler.rollout(tasks, params)
        reference = reference_rollout(factory(discrete, horizon), policy, tasks, batch_size, SEED, call, horizon,
                                      params)
        assert_equal_to(batches, reference, label)
        for earlier in storages(batches):
            assert not any(overlaps(earlier, shared) for shared in buffer_ranges(sampler)), label
        results.append(batches)
        references.append(reference)
    # Nothing a later rollout did may reach an earlier result.
    for batches, reference, (label, *_) in zip(results, references, shapes):
        assert_equal_to(batches, reference, f"{label}, after the later rollouts")
    # The tasks of one rollout share one copy; two rollouts share nothing.
    per_rollout = [storages(batches) for batches in results]
    for i, mine in enumerate(per_rollout):
        for later in per_rollout[i + 1:]:
            assert not any(overlaps(a, b) for a in mine for b in later), "two rollouts' results share memory"
    # Writing into a result changes nothing else.
    results[0][0].observations.add_(1000.0)
    for batches, reference, (label, *_) in zip(results[1:], references[1:], shapes[1:]):
        assert_equal_to(batches, reference, f"{label}, after writing into an earlier result")


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
@pytest.mark.parametrize("num_workers, partial", [(0, False), (1, False), (3, False), (1, True), (3, True)],
                         ids=["in-process", "1-worker", "3-workers", "1-worker-partial", "3-workers-partial"])
def test_rollouts_equal_the_naive_reference(discrete, num_workers, partial, drift_sampler):
    for (batch_size, horizon), shapes in grouped_by_sampler(SHAPES):
        sampler = drift_sampler(discrete, horizon, batch_size, num_workers=num_workers, partial=partial)
        policy = sampler.policy
        with sampler:
            # Each shape twice in a row, so that every sampler makes at least two calls.
            run_sequence(sampler, policy, discrete, shapes + shapes)


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
@pytest.mark.parametrize("num_workers, batched", [(0, True), (3, True), (1, False)],
                         ids=["in-process", "3-workers", "task-by-task"])
def test_per_task_parameters_equal_the_naive_reference(discrete, num_workers, batched, drift_sampler):
    """Different parameters per task take the sampler's batched policy path, or its
    task-by-task path for a policy that cannot stack parameters."""
    shapes = [shape for shape in SHAPES if shape[2] == 3]

    def params_for(policy, tasks):
        return [policy.perturbed(0.1 * k) if k % 2 == 0 else None for k in range(len(tasks))]

    sampler = drift_sampler(discrete, 6, 3, batched, num_workers=num_workers)
    policy = sampler.policy
    with sampler:
        run_sequence(sampler, policy, discrete, shapes + shapes, params_for)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_start_methods_equal_the_naive_reference(start_method, drift_sampler):
    shapes = [shape for shape in SHAPES if shape[2] == 3]
    sampler = drift_sampler(False, 6, 3, num_workers=2, start_method=start_method)
    policy = sampler.policy
    with sampler:
        run_sequence(sampler, policy, False, shapes + shapes)


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "discrete"])
@pytest.mark.parametrize("num_workers, batched", [(0, True), (2, True), (0, False)],
                         ids=["in-process", "2-workers", "task-by-task"])
def test_sample_equals_the_naive_reference(discrete, num_workers, batched, drift_sampler):
    """sample(): the train episodes under the policy's own parameters (call 0), the valid
    episodes under each task's adapted parameters (call 1), as recorded in the episodes."""
    tasks = [{"offset": 0.2, "length": None}, {"offset": -0.5, "length": 1}]
    sampler = drift_sampler(discrete, 6, 3, batched, num_workers=num_workers)
    policy = sampler.policy
    sampler.baseline = LinearFeatureBaseline(3)
    with sampler:
        train, valid = sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.3)
        first = [{name: p.clone() for name, p in batch.behaviour_params.items()} for batch in valid]
        sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.3)  # a second call in a row changes nothing above
    env_fn = factory(discrete, 6)
    assert_equal_to(train[0], reference_rollout(env_fn, policy, tasks, 3, SEED, 0, 6), "train")
    adapted = [batch.behaviour_params for batch in valid]
    assert all(torch.equal(p, first[k][name]) for k, params in enumerate(adapted) for name, p in params.items())
    assert any(not torch.equal(adapted[0][name], p) for name, p in policy.named_parameters())
    assert_equal_to(valid, reference_rollout(env_fn, policy, tasks, 3, SEED, 1, 6, adapted), "valid")


def test_the_reference_is_not_trivially_equal():
    """The harness would notice a wrong seed, call index or noise: the reference differs when they change."""
    tasks = SHAPES[4][1]
    env_fn = factory(False, 6)
    policy = ElementwisePolicy(2, False)
    base = reference_rollout(env_fn, policy, tasks, 3, SEED, 0, 6)
    for other in (reference_rollout(env_fn, policy, tasks, 3, SEED + 1, 0, 6),
                  reference_rollout(env_fn, policy, tasks, 3, SEED, 1, 6),
                  reference_rollout(env_fn, policy, tasks, 3, SEED, 0, 6, [policy.perturbed(0.1)] * 3)):
        assert any(not torch.equal(a["observations"], b["observations"]) for a, b in zip(base, other))
    lengths = np.concatenate([batch["lengths"].numpy() for batch in base])
    assert lengths.min() < lengths.max() == 6  # episodes end at different steps, some at the horizon


@pytest.mark.slow
def test_partial_mode_survives_many_calls_in_a_row(drift_sampler):
    """Partial gathering once drained its semaphore while a worker was between setting its
    flag and releasing: the stale count later stepped a worker twice or let a command run
    ahead of the previous one (IndexError, or seeds read from the tasks' payload)."""
    tasks = [{"offset": 0.1 * k, "length": None} for k in range(3)]
    sampler = drift_sampler(False, 3, 1, num_workers=3, partial=True)
    policy = sampler.policy
    with sampler:
        for call in range(3000):
            batches = sampler.rollout(tasks[: 1 + call % 3])
        reference = reference_rollout(factory(False, 3), policy, tasks[: 1 + call % 3], 1, SEED, call, 3)
        assert_equal_to(batches, reference, "the last call")
