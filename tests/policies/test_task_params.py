"""TaskParams, the one form of per-task parameters: against plain per-task dicts built by hand."""

from __future__ import annotations

import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

from maml_rl.policies import NormalMLPPolicy
from maml_rl.policies.task_params import OWN, TaskParams


def make_policy(seed: int = 0) -> NormalMLPPolicy:
    torch.manual_seed(seed)
    return NormalMLPPolicy(3, 2, hidden_sizes=(4,))


def shifted(policy, shift: float) -> "OrderedDict[str, torch.Tensor]":
    return OrderedDict((name, p.detach() + shift) for name, p in policy.named_parameters())


def own(policy) -> "OrderedDict[str, torch.Tensor]":
    return OrderedDict((name, p.detach()) for name, p in policy.named_parameters())


def test_none_and_one_dict_for_every_task():
    policy = make_policy()
    assert TaskParams.from_argument(policy, None, 3) == TaskParams((OWN, OWN, OWN))
    a = shifted(policy, 1.0)
    params = TaskParams.from_argument(policy, a, 3)
    assert params.index == (0, 0, 0) and len(params.rows) == 1 and params.rows[0] is a


def test_sharing_is_told_by_object_once_and_equal_values_stay_apart():
    policy = make_policy()
    a, b = shifted(policy, 1.0), shifted(policy, 1.0)  # equal values, two objects
    params = TaskParams.from_argument(policy, [a, None, b, a], 4)
    assert params.index == (0, OWN, 1, 0)
    assert params.rows[0] is a and params.rows[1] is b
    for k, expected in enumerate([a, None, b, a]):
        assert params.row_of(k) is expected


def test_missing_meta_parameters_are_completed_with_the_policys_own():
    policy = make_policy()
    partial = {"mu.bias": torch.full((2,), 5.0)}
    params = TaskParams.from_argument(policy, [partial, partial], 2)
    assert params.index == (0, 0)
    row = params.rows[0]
    assert list(row) == [name for name, _ in policy.named_parameters()]
    assert torch.equal(row["mu.bias"], torch.full((2,), 5.0))
    for name, p in policy.named_parameters():
        if name != "mu.bias":
            assert torch.equal(row[name], p.detach())


def test_misuse_is_refused_with_what_to_do():
    policy = make_policy()
    with pytest.raises(ValueError, match="got 1 parameter sets for 2 tasks"):
        TaskParams.from_argument(policy, [shifted(policy, 0.0)], 2)
    with pytest.raises(ValueError, match="not parameters of the policy"):
        TaskParams.from_argument(policy, {"bogus": torch.zeros(1)}, 1)
    with pytest.raises(ValueError, match="TaskParams of 3 tasks for 2 tasks"):
        TaskParams.from_argument(policy, TaskParams.own(3), 2)
    with pytest.raises(ValueError, match="names rows"):
        TaskParams((0, 1), (shifted(policy, 0.0),))

    class NoParams(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, observations):
            return observations

    with pytest.raises(TypeError, match="takes no params= argument"):
        TaskParams.from_argument(NoParams(), {"w": torch.zeros(1)}, 1)
    # The policy's own parameters need no params= argument.
    assert TaskParams.from_argument(NoParams(), None, 2).index == (OWN, OWN)


@pytest.mark.parametrize("index", [(0, 1, OWN, 0), (OWN,), (1,), (0, 0, 0)])
def test_batched_equals_each_tasks_dict_stacked_by_hand(index):
    policy = make_policy()
    rows = [shifted(policy, 0.5), shifted(policy, -2.0)]
    per_task = [own(policy) if i == OWN else rows[i] for i in index]
    params = TaskParams.from_argument(policy, [None if i == OWN else rows[i] for i in index], len(index))
    batched = params.batched(policy)
    for name, _ in policy.named_parameters():
        expected = torch.stack([p[name] for p in per_task])
        assert torch.equal(batched[name], expected), name
    if len(set(index)) == 1 and len(index) > 1:
        # One row for every task: stride-0 copies, no memory per task.
        assert all(t.stride(0) == 0 for t in batched.values())


def test_stacked_rows_from_the_learner_are_used_as_they_are():
    policy = make_policy()
    stacked = OrderedDict((name, torch.stack([p.detach() + s for s in (0.0, 1.0, 2.0)]))
                          for name, p in policy.named_parameters())
    params = TaskParams.from_stacked(stacked)
    assert params.index == (0, 1, 2)
    for k in range(3):
        for name in stacked:
            assert torch.equal(params.row_of(k)[name], stacked[name][k])
    batched = params.batched(policy)
    assert all(batched[name] is stacked[name] for name in stacked)
    # A group of them stacks its own rows.
    group = params.group(1, 3)
    assert group.index == (1, 2)
    for name in stacked:
        assert torch.equal(group.batched(policy)[name], stacked[name][1:3])


def test_policy_output_under_batched_rows_equals_one_call_per_task():
    policy = make_policy()
    rows = [shifted(policy, 0.1), shifted(policy, -0.1)]
    params = TaskParams.from_argument(policy, [rows[0], None, rows[1]], 3)
    observations = torch.randn(3, 5, 3, generator=torch.Generator().manual_seed(0))
    batched = policy(observations, params=params.batched(policy))
    for k in range(3):
        p = params.row_of(k)
        alone = policy(observations[k]) if p is None else policy(observations[k], params=p)
        torch.testing.assert_close(batched.mean[k], alone.mean, rtol=0, atol=1e-6)


def test_behaviour_copies_one_per_row_detached():
    policy = make_policy()
    a = OrderedDict((name, (p.detach() + 1.0).requires_grad_()) for name, p in policy.named_parameters())
    params = TaskParams.from_argument(policy, [a, None, a], 3)
    copies = params.behaviour(policy)
    assert copies[0] is copies[2] and copies[0] is not copies[1]
    for name, p in policy.named_parameters():
        assert torch.equal(copies[0][name], a[name].detach()) and not copies[0][name].requires_grad
        assert torch.equal(copies[1][name], p.detach())
        assert copies[0][name].data_ptr() != a[name].data_ptr()  # a copy: later changes do not reach it
    with torch.no_grad():
        next(iter(a.values())).add_(1.0)
    assert not torch.equal(next(iter(copies[0].values())), next(iter(a.values())))


def test_the_wire_form_keeps_the_values_and_each_group_its_index():
    policy = make_policy()
    rows = [shifted(policy, 0.25), shifted(policy, 4.0)]
    params = TaskParams.from_argument(policy, [rows[0], rows[1], None, rows[1]], 4)
    sent = pickle.loads(pickle.dumps(params.rows_to_numpy()))
    for lo, hi in ((0, 4), (1, 3), (2, 3), (3, 4)):
        group = pickle.loads(pickle.dumps(params.group(lo, hi).index_only()))
        assert group.rows is None and group.index == params.index[lo:hi]
        received = group.with_numpy_rows(sent)
        for k in range(hi - lo):
            want, got = params.row_of(lo + k), received.row_of(k)
            if want is None:
                assert got is None
            else:
                assert all(torch.equal(got[name], want[name]) for name in want)
                assert all(isinstance(got[name], torch.Tensor) for name in want)
    assert all(isinstance(a, np.ndarray) for row in sent for a in row.values())


def test_degenerate_one_task():
    policy = make_policy()
    a = shifted(policy, 3.0)
    params = TaskParams.from_argument(policy, [a], 1)
    assert params.num_tasks == 1 and params.index == (0,)
    assert all(torch.equal(params.batched(policy)[name], a[name][None]) for name in a)
    assert TaskParams.own(1).behaviour(policy)[0].keys() == a.keys()
