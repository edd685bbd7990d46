"""The trials' differential harness: ``rollout_trials`` against the naive reference's trials
(``helpers.naive_trials.reference_trials``), bit for bit, over degenerate and ordinary shapes.

Used by ``samplers/test_trials.py`` and, on a Ray cluster, ``samplers/test_ray_backend.py``.
"""

from __future__ import annotations

import torch

from maml_rl.data.trials import TrialBatch
from maml_rl.policies.recurrent import rl2_input_size

from helpers.differential_envs import factory
from helpers.naive_trials import CountingRecurrentPolicy, TaskByTaskRecurrentPolicy, reference_trials
from helpers.samplers import drift_sampler

SEED = 5
OBS, ACT, CATEGORIES = 3, 2, 3

# label, tasks, trials per task, horizon, episodes per trial
SHAPES = [
    ("one task, one trial, one episode", [{"offset": 0.3, "length": 4}], 1, 6, 1),
    ("one task, one trial", [{"offset": -0.2, "length": None}], 1, 6, 3),
    ("episodes of different lengths", [{"offset": 0.1, "length": None}, {"offset": 0.5, "length": 9}], 2, 6, 3),
    ("all episodes end at step 1", [{"offset": 0.4, "length": 1}, {"offset": -0.4, "length": 1}], 3, 6, 4),
    ("horizon 1", [{"offset": 0.1, "length": None}, {"offset": -0.8, "length": 5}], 2, 1, 3),
    ("one trial per task", [{"offset": 0.2, "length": 2}, {"offset": -0.3, "length": None},
                            {"offset": 0.9, "length": 20}], 1, 6, 2),
]


def recurrent_policy(discrete, batched=True, rl2=True):
    """The reference's counting recurrent policy, reading RL²'s inputs (``rl2``) or the bare observations."""
    action_size = CATEGORIES if discrete else ACT
    width = rl2_input_size(OBS, action_size) if rl2 else OBS
    cls = CountingRecurrentPolicy if batched else TaskByTaskRecurrentPolicy
    return cls(width, action_size, discrete)


def assert_trials_equal(batches, reference, label, chunk=None):
    assert len(batches) == len(reference), label
    for k, (got, want) in enumerate(zip(batches, reference)):
        assert isinstance(got, TrialBatch)
        assert got.task == want["task"], (label, k)
        assert torch.equal(got.lengths, want["lengths"]), (label, k, got.lengths, want["lengths"])
        for name in ("observations", "actions", "rewards", "dones", "log_probs"):
            mine = getattr(got, name)
            assert mine.dtype == want[name].dtype, (label, k, name, mine.dtype, want[name].dtype)
            assert torch.equal(mine, want[name]), (label, k, name)
        assert torch.equal(got.final_state, want["final_state"]), (label, k)
        if chunk:
            for c in range(got.chunk_states.shape[0]):
                t = c * chunk
                for b, n in enumerate(want["lengths"].tolist()):
                    if t < n:
                        assert torch.equal(got.chunk_states[c, b], want["states"][t, b]), (label, k, c, b)


def run_shapes(discrete, shapes, batched=True, chunk=2, actions="sample", inputs="rl2", **kwargs):
    """Roll out ``shapes`` as trials, those sharing a sampler (batch size, horizon) twice in a row on one:
    each call equals its reference then and after the later calls. ``kwargs`` go to the sampler."""
    by_sampler = {}
    for shape in shapes:
        by_sampler.setdefault((shape[2], shape[3]), []).append(shape)
    for (batch_size, horizon), group in by_sampler.items():
        policy = recurrent_policy(discrete, batched)
        with drift_sampler(discrete, horizon, batch_size, policy=policy, seed=SEED, **kwargs) as sampler:
            results = []
            # Each shape twice in a row: two calls on one sampler.
            for call, (label, tasks, _, _, episodes) in enumerate(group + group):
                batches = sampler.rollout_trials(tasks, episodes, reward_scale=0.1, chunk=chunk, actions=actions,
                                                 inputs=inputs)
                reference = reference_trials(factory(discrete, horizon), policy, tasks, batch_size, SEED, call,
                                             horizon, episodes, reward_scale=0.1, mean=actions == "mean",
                                             autoreset=inputs == "rl2-autoreset")
                assert_trials_equal(batches, reference, label, chunk)
                results.append((batches, reference, label))
            for batches, reference, label in results:
                assert_trials_equal(batches, reference, f"{label}, after the later calls", chunk)
