"""Per-task replay: ring order, seeded sampling, state round trips, the memory check, checkpointable tasks."""

from __future__ import annotations

import pytest
import torch

from maml_rl.data.replay import MultiTaskReplay, ReplayMemoryError, TaskReplay
from maml_rl.data.transitions import Transitions
from maml_rl.metalearners.pearl.task_encoding import decode_task, encode_task


def transitions(n: int, start: float = 0.0) -> Transitions:
    values = start + torch.arange(n, dtype=torch.float32)
    return Transitions(values[:, None].repeat(1, 2), values[:, None], values, values[:, None].repeat(1, 2) + 0.5,
                       torch.zeros(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool))


def test_the_replay_keeps_the_newest_rows_and_overwrites_the_oldest():
    replay = TaskReplay(5, (2,), (1,))
    replay.add(transitions(3))
    assert replay.size == 3 and replay.newest(2)["rewards"].tolist() == [1.0, 2.0]
    replay.add(transitions(4, start=3))  # 0..6 into 5 rows: 2..6 remain
    assert replay.size == 5
    assert sorted(replay.data["rewards"].tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert replay.newest(3)["rewards"].tolist() == [4.0, 5.0, 6.0]
    replay.add(transitions(12, start=100))  # more than it holds at once: the newest 5
    assert sorted(replay.data["rewards"].tolist()) == [107.0, 108.0, 109.0, 110.0, 111.0]
    assert replay.newest(5)["rewards"].tolist() == [107.0, 108.0, 109.0, 110.0, 111.0]
    replay.clear()
    with pytest.raises(ValueError, match="empty replay"):
        replay.sample(1, torch.Generator())


def test_replay_sampling_is_a_function_of_the_generator_and_survives_a_state_round_trip():
    def filled():
        replay = MultiTaskReplay(3, 50, (2,), (1,))
        for i in range(3):
            replay[i].add(transitions(20 + 25 * i, start=100 * i))
        return replay

    a, b = filled(), filled()
    draws_a = a.sample([2, 0, 2], 7, torch.Generator().manual_seed(5))
    draws_b = b.sample([2, 0, 2], 7, torch.Generator().manual_seed(5))
    for name in draws_a:
        assert torch.equal(draws_a[name], draws_b[name])
    assert draws_a["rewards"].shape == (3, 7)
    assert (draws_a["rewards"][1] < 100).all() and (draws_a["rewards"][0] >= 200).all()
    # Task 2 wrapped round (70 rows into 50): only rows 220..269 remain.
    assert (draws_a["rewards"][0] >= 220).all() and a[2].size == 50
    other = torch.Generator().manual_seed(6)
    assert not torch.equal(a.sample([0], 7, other)["rewards"], b.sample([0], 7, torch.Generator().manual_seed(5))["rewards"])
    restored = MultiTaskReplay(3, 50, (2,), (1,), check=False)
    restored.load_state_dict(a.state_dict())
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    first, again = a.sample([0, 1, 2], 11, g1), restored.sample([0, 1, 2], 11, g2)
    for name, value in first.items():
        assert torch.equal(value, again[name])
    restored[2].add(transitions(3, start=900))
    a[2].add(transitions(3, start=900))
    assert torch.equal(restored[2].newest(10)["rewards"], a[2].newest(10)["rewards"])


def test_a_replay_that_would_not_fit_is_refused_before_allocating(monkeypatch):
    import maml_rl.data.replay as replay_module

    monkeypatch.setattr(replay_module, "available_memory_bytes", lambda: 10 * 2**30)
    with pytest.raises(ReplayMemoryError, match=r"lower the capacity to at most [\d,]+ per task \(config: replay-capacity\)"):
        MultiTaskReplay(100, 10_000_000, (20,), (6,))
    # The rows a run can collect, not the capacity, are what counts.
    MultiTaskReplay(100, 10_000_000, (20,), (6,), rows_per_task=50_000)


def test_a_damaged_replay_state_is_refused():
    replay = MultiTaskReplay(2, 10, (2,), (1,))
    replay[0].add(transitions(4))
    state = replay.state_dict()
    state["tasks"][0]["rewards"] = torch.zeros(3)
    with pytest.raises(ValueError, match="replay state 'rewards' has shape"):
        MultiTaskReplay(2, 10, (2,), (1,)).load_state_dict(state)
    with pytest.raises(ValueError, match="of 2 tasks for a replay of 3"):
        MultiTaskReplay(3, 10, (2,), (1,)).load_state_dict(replay.state_dict())


def test_tasks_round_trip_through_plain_data_and_objects_are_refused():
    import numpy as np

    task = {"goal": np.array([0.25, -0.5]), "velocity": np.float64(1.5), "name": "x", "pair": (1, [2.0])}
    back = decode_task(encode_task(task))
    assert back["goal"].dtype == np.float64 and np.array_equal(back["goal"], task["goal"])
    assert back["velocity"] == 1.5 and back["name"] == "x" and back["pair"] == (1, [2.0])
    with pytest.raises(TypeError, match="plain data only"):
        encode_task({"handle": object()})
