"""A group of a call's tasks, evaluated alone as a Ray actor evaluates its share (``RolloutRequest.group``),
gives the actions of the whole call's policy evaluation, bit for bit: the whole call is the reference."""

from collections import OrderedDict

import numpy as np
import pytest
import torch

from maml_rl.policies import NormalMLPPolicy
from maml_rl.policies.task_params import TaskParams
from maml_rl.samplers.rollout.actions import ActionFunction, at_call_phase
from maml_rl.samplers.rollout.noise import call_noise
from maml_rl.samplers.rollout.request import RolloutRequest
from maml_rl.samplers.rollout.torch_settings import rollout_torch_settings
from maml_rl.samplers.workers.buffers import BufferSpec

K = 10


def _setup(obs_size, batch_size, per_task):
    torch.manual_seed(0)
    policy = NormalMLPPolicy(obs_size, 4, hidden_sizes=(100, 100))
    if per_task:  # each task its own parameters, as after adaptation
        rows = [OrderedDict((n, p.detach() + 0.01 * torch.randn_like(p)) for n, p in policy.named_parameters())
                for _ in range(K)]
        params = TaskParams(tuple(range(K)), tuple(rows))
    else:  # every task the policy's own (before adaptation)
        params = TaskParams.own(K)
    request = RolloutRequest(tuple(range(K)), params, seed=3, call=0, batch_size=batch_size)
    spec = BufferSpec(horizon=4, observation_shape=(obs_size,), observation_dtype=np.dtype(np.float32),
                      action_shape=(4,), action_dtype=np.dtype(np.float32))
    noise = call_noise(3, 0, 4, K * batch_size, (4,), False)
    observations = np.random.default_rng(1).normal(size=(4, K * batch_size, obs_size)).astype(np.float32)
    return policy, request, spec, noise, observations


@pytest.mark.parametrize("per_task", [False, True])
@pytest.mark.parametrize("obs_size, batch_size", [(39, 3), (39, 10), (20, 3), (39, 1)])
def test_a_group_of_tasks_alone_gives_the_whole_calls_actions(obs_size, batch_size, per_task):
    """Meta-World's 39 inputs with 3 episodes a task rounded differently in groups not starting at the whole
    call's phase (5 of 6 groups, before at_call_phase)."""
    policy, request, spec, noise, observations = _setup(obs_size, batch_size, per_task)
    B = batch_size
    with rollout_torch_settings():
        whole = ActionFunction(policy, request, "cpu", noise, 1, spec)
        expected = [whole(observations[t], noise[t], t) for t in range(4)]
        for lo, hi in [(0, 4), (1, 2), (2, 4), (3, 7), (5, 10), (6, 10), (8, 10), (9, 10)]:
            group = ActionFunction(policy, request.group(lo, hi), "cpu", noise[:, lo * B:hi * B], 1, spec)
            for t in range(4):
                got = group(observations[t, lo * B:hi * B], noise[t, lo * B:hi * B], t)
                assert got.tobytes() == expected[t][lo * B:hi * B].tobytes(), (lo, hi, t)


def test_at_call_phase_places_a_copy_at_the_whole_calls_phase():
    x = torch.arange(2 * 3 * 5, dtype=torch.float32).view(2, 3, 5)
    assert at_call_phase(x, 0) is x  # the first task: as it is
    for first_task in range(1, 20):
        placed = at_call_phase(x, first_task)
        assert torch.equal(placed, x) and placed.shape == x.shape and placed.is_contiguous()
        # 15 floats a task: the group's first element sits where task first_task's would in a whole call's
        # tensor (torch's allocator starts those at 64 bytes), modulo 64 bytes
        assert x.data_ptr() % 64 == 0 and placed.data_ptr() % 64 == (first_task * 15 * 4) % 64
    empty = torch.zeros(0, 3, 5)
    assert at_call_phase(empty, 3).shape == (0, 3, 5)
