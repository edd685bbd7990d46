"""The MuJoCo fast path (one mujoco.batch call per worker per step) against
the naive reference sampler: gymnasium envs stepped one at a time, in plain
loops (tests/helpers/naive_sampler.py), bit for bit, for the five envs that opt in."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import maml_rl.envs  # noqa: F401
from maml_rl.envs import make_env
from maml_rl.envs.mujoco.ant import AntVelEnv
from maml_rl.samplers import EnvOutputError, MultiTaskSampler, PolicyOutputError
from maml_rl.samplers.workers.batched_child_env import mujoco, mujoco_batch

if mujoco_batch is None and not os.environ.get("MAML_RL_REQUIRE_FAST_PATH"):
    # CI's main run sets MAML_RL_REQUIRE_FAST_PATH: there these tests fail rather than skip.
    pytest.skip(f"the MuJoCo fast path needs mujoco.batch (MuJoCo >= 4.0); this environment has MuJoCo "
                f"{mujoco.__version__} (the metaworld extra installs 3.3.0)", allow_module_level=True)
from maml_rl.samplers import usable_cpus
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

from helpers.differential import assert_equal_to, buffer_ranges, overlaps, storages
from helpers.naive_sampler import ElementwisePolicy, reference_rollout

FAST_ENVS = ["HalfCheetahVel-v5", "HalfCheetahDir-v5", "AntVel-v5", "AntDir-v5", "AntPos-v5"]
SEED = 5
HORIZON = 40


def policy_for(env_id):
    policy = ElementwisePolicy(gym.make(env_id).action_space.shape[0], discrete=False)
    with torch.no_grad():
        policy.log_scale.fill_(1.5)  # wide actions: Ant falls over, at different steps
    return policy


def fast_sampler(env_id, policy, batch_size, horizon=HORIZON, **kwargs):
    sampler = MultiTaskSampler(env_id, {}, batch_size, policy, None, seed=SEED, max_episode_steps=horizon,
                               mujoco_batch=True, **kwargs)
    assert sampler.mujoco_batch
    return sampler


def check_against_reference(sampler, env_fn, policy, tasks, calls, horizon=HORIZON):
    """``calls`` rollouts in a row, each equal to the naive reference; the lengths seen."""
    lengths = []
    for call in range(calls):
        batches = sampler.rollout(tasks)
        reference = reference_rollout(env_fn, policy, tasks, sampler.batch_size, SEED, call, horizon)
        assert_equal_to(batches, reference, f"rollout {call}")
        lengths += [int(n) for batch in batches for n in batch.lengths]
    return lengths


@pytest.mark.parametrize("env_id", FAST_ENVS)
@pytest.mark.parametrize("num_workers, partial", [(0, False), (1, True), (3, False), (3, True)])
def test_fast_path_equals_the_naive_reference(env_id, num_workers, partial):
    policy = policy_for(env_id)
    with fast_sampler(env_id, policy, 2, num_workers=num_workers, partial=partial) as sampler:
        tasks = sampler.sample_tasks(3)
        lengths = check_against_reference(sampler, make_env(env_id, max_episode_steps=HORIZON), policy, tasks, 2)
    if env_id.startswith("Ant"):
        # Full episodes with early termination: some end early, at different steps.
        assert min(lengths) < HORIZON and len(set(lengths)) > 2, lengths
    else:
        assert set(lengths) == {HORIZON}


@pytest.mark.slow
@pytest.mark.parametrize("env_id", FAST_ENVS)
@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_fast_path_under_each_start_method(env_id, start_method):
    policy = policy_for(env_id)
    with fast_sampler(env_id, policy, 2, num_workers=3, partial=True, start_method=start_method) as sampler:
        tasks = sampler.sample_tasks(2)
        check_against_reference(sampler, make_env(env_id, max_episode_steps=HORIZON), policy, tasks, 1)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_fast_path_results_share_nothing_and_stay_put(num_workers):
    """The trust issue's aliasing checks, on the fast path: a result equals its
    reference after later rollouts of other shapes, and shares no memory with
    the buffers or with another result."""
    policy = policy_for("AntVel-v5")
    env_fn = make_env("AntVel-v5", max_episode_steps=HORIZON)
    with fast_sampler("AntVel-v5", policy, 1, num_workers=num_workers) as sampler:
        shapes = [sampler.sample_tasks(1), sampler.sample_tasks(3), sampler.sample_tasks(1)]
        results = [sampler.rollout(tasks) for tasks in shapes]
        references = [reference_rollout(env_fn, policy, tasks, 1, SEED, call, HORIZON)
                      for call, tasks in enumerate(shapes)]
        for call, (batches, reference) in enumerate(zip(results, references)):
            assert_equal_to(batches, reference, f"rollout {call}, after the later ones")
            for storage in storages(batches):
                assert not any(overlaps(storage, shared) for shared in buffer_ranges(sampler))
        first, last = storages(results[0]), storages(results[2])
        assert not any(overlaps(a, b) for a in first for b in last)


class FallingAnt(AntVelEnv):
    """An Ant whose healthy height range no state is in: every episode ends at its first step."""

    healthy_z_range = (5.0, 6.0)


def falling_ant(max_episode_steps=HORIZON):
    return gym.wrappers.TimeLimit(FallingAnt(), max_episode_steps)


@pytest.mark.slow
@pytest.mark.parametrize("num_workers", [0, 2])
def test_fast_path_degenerate_shapes(num_workers):
    policy = policy_for("AntVel-v5")
    # One task and one episode; horizon 1; two calls in a row on one sampler.
    for horizon in (1, 7):
        with fast_sampler("AntVel-v5", policy, 1, horizon, num_workers=num_workers) as sampler:
            tasks = sampler.sample_tasks(1)
            lengths = check_against_reference(sampler, make_env("AntVel-v5", max_episode_steps=horizon), policy,
                                              tasks, 2, horizon)
            assert max(lengths) <= horizon
    # Every episode ending at its first step.
    with MultiTaskSampler(None, None, 3, policy, None, env_fn=falling_ant, seed=SEED, num_workers=num_workers,
                          mujoco_batch=True) as sampler:
        tasks = sampler.sample_tasks(2)
        lengths = check_against_reference(sampler, falling_ant, policy, tasks, 2)
    assert set(lengths) == {1}


@pytest.mark.slow
def test_fast_path_keeps_the_envs_time_limit_and_end_reasons():
    """A TimeLimit shorter than the sampler's horizon truncates, with the same
    end reasons in both paths (the sampler reads them to tell an unended episode)."""
    policy = policy_for("AntDir-v5")
    reasons = {}
    for fast in (False, True):
        with MultiTaskSampler("AntDir-v5", {"max_episode_steps": 18}, 4, policy, None, seed=SEED,
                              max_episode_steps=30, num_workers=2, mujoco_batch=fast) as sampler:
            tasks = sampler.sample_tasks(2)
            batches = sampler.rollout(tasks)
            reference = reference_rollout(make_env("AntDir-v5", max_episode_steps=18), policy, tasks, 4, SEED, 0, 30)
            assert_equal_to(batches, reference, f"fast={fast}")
            reasons[fast] = sampler.rollout_backend.pool.views.end_reason[:8].copy()
            lengths = [int(n) for batch in batches for n in batch.lengths]
            assert max(lengths) == 18 and min(lengths) < 18, lengths
    np.testing.assert_array_equal(reasons[False], reasons[True])
    assert set(reasons[True]) == {1, 2}  # terminated and truncated


@pytest.mark.slow
def test_fast_path_through_sample_and_per_task_parameters():
    """sample(): adapted per-task parameters drive the second rollout through the fast path."""
    policy = policy_for("HalfCheetahVel-v5")
    from maml_rl.data.baseline import LinearFeatureBaseline

    out = {}
    for fast in (False, True):
        with MultiTaskSampler("HalfCheetahVel-v5", {}, 2, policy, LinearFeatureBaseline(20), seed=SEED,
                              max_episode_steps=15, num_workers=2, mujoco_batch=fast) as sampler:
            tasks = sampler.sample_tasks(3)
            out[fast] = sample_adapt_sample(sampler, tasks, num_steps=1, fast_lr=0.1)
    (train_a, valid_a), (train_b, valid_b) = out[False], out[True]
    for a, b in zip(train_a[0] + valid_a, train_b[0] + valid_b):
        for name in ("observations", "actions", "rewards", "lengths"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert not torch.equal(train_b[0][0].actions, valid_b[0].actions)


def test_the_fast_path_is_taken_where_it_can_be(caplog):
    policy = policy_for("HalfCheetahDir-v5")
    with caplog.at_level(logging.INFO, logger="maml_rl"):
        with MultiTaskSampler("HalfCheetahDir-v5", {}, 2, policy, None, num_workers=0) as sampler:
            assert sampler.mujoco_batch
            sampler.rollout(sampler.sample_tasks(1))
            assert type(sampler.rollout_backend.pool.child).__name__ == "BatchedChildEnv"
        # By default the fast path runs in this process on one Batch thread per
        # usable CPU (the benchmark's choice); other envs get worker processes.
        with MultiTaskSampler("AntDir-v5", {}, 2, policy_for("AntDir-v5"), None) as sampler:
            assert sampler.num_workers == 0 and sampler.batch_threads == usable_cpus()
        with MultiTaskSampler("AntDir-v5", {}, 2, policy_for("AntDir-v5"), None, mujoco_batch=False) as sampler:
            assert sampler.num_workers == usable_cpus() and sampler.batch_threads is None
        with MultiTaskSampler("AntDir-v5", {}, 2, policy_for("AntDir-v5"), None, num_workers=2) as sampler:
            assert sampler.num_workers == 2 and sampler.batch_threads == 1
        with MultiTaskSampler("2DNavigation-v0", {}, 2, ElementwisePolicy(2, False), None) as sampler:
            assert not sampler.mujoco_batch and sampler.num_workers == usable_cpus()
    assert caplog.records == []  # nothing to say about a non-MuJoCo env


def test_a_wrapper_the_fast_path_would_skip_means_the_per_env_path(caplog):
    def clipped():
        return gym.wrappers.ClipReward(gym.make("HalfCheetahVel-v5"), -0.5, 0.5)

    policy = policy_for("HalfCheetahVel-v5")
    with caplog.at_level(logging.INFO, logger="maml_rl"):
        with MultiTaskSampler(None, None, 2, policy, None, env_fn=clipped, seed=SEED, num_workers=0) as sampler:
            assert not sampler.mujoco_batch
            tasks = sampler.sample_tasks(2)
            check_against_reference(sampler, clipped, policy, tasks, 1, horizon=200)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1 and "ClipReward" in messages[0] and "one env at a time" in messages[0]
    with pytest.raises(ValueError, match="ClipReward"):
        MultiTaskSampler(None, None, 2, policy, None, env_fn=clipped, num_workers=0, mujoco_batch=True)
    with pytest.raises(ValueError, match="implements neither .*VectorisedMujocoEnv nor .*BatchSteppedEnv"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, ElementwisePolicy(2, False), None, mujoco_batch=True)
    with pytest.raises(ValueError, match="mujoco_batch must be"):
        MultiTaskSampler("2DNavigation-v0", {}, 2, ElementwisePolicy(2, False), None, mujoco_batch="yes")
    with pytest.raises(ValueError, match="batch_threads must be a positive int"):
        MultiTaskSampler("HalfCheetahVel-v5", {}, 2, policy, None, batch_threads=0)


@pytest.mark.slow
def test_without_mujoco_batch_the_per_env_path_is_used_with_one_log_line(tmp_path):
    """A MuJoCo without mujoco.batch (before 4.0): the import really fails, in a
    fresh interpreter, and the sampler says so once and samples as before."""
    script = tmp_path / "old_mujoco.py"
    script.write_text(textwrap.dedent("""
        import logging, sys
        sys.modules["mujoco.batch"] = None  # `from mujoco import batch` now raises ImportError
        logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(message)s")
        import torch
        from maml_rl.samplers import MultiTaskSampler
        from maml_rl.policies import NormalMLPPolicy

        if __name__ == "__main__":
            policy = NormalMLPPolicy(125, 8, hidden_sizes=(8,))
            with MultiTaskSampler("AntVel-v5", {}, 2, policy, None, seed=0, num_workers=2,
                                  max_episode_steps=5) as sampler:
                batches = sampler.rollout(sampler.sample_tasks(2))
                batches = sampler.rollout(sampler.sample_tasks(2))
                print("fast path:", sampler.mujoco_batch, "lengths:", [b.lengths.tolist() for b in batches])
            try:
                MultiTaskSampler("AntVel-v5", {}, 2, policy, None, mujoco_batch=True)
            except ValueError as error:
                print("refused:", error)
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    logs = [line for line in result.stderr.splitlines() if line.startswith("LOG maml_rl")]
    assert len(logs) == 1, result.stderr
    assert "no mujoco.batch" in logs[0] and "one env at a time" in logs[0]
    assert "fast path: False" in result.stdout
    assert "refused: mujoco_batch=True, but the MuJoCo fast path cannot step AntVel-v5" in result.stdout


def test_a_nan_action_is_refused_alike_on_both_paths():
    """A policy emitting NaN is named at the first step, before any env (and
    MuJoCo, which would reset the unstable simulation) sees the action; the
    env used to be blamed after the rollout for a non-finite reward."""
    policy = policy_for("HalfCheetahVel-v5")
    with torch.no_grad():
        policy.b[2] = float("nan")
    messages = []
    for fast in (False, True):
        with MultiTaskSampler("HalfCheetahVel-v5", {}, 2, policy, None, seed=SEED, num_workers=0,
                              max_episode_steps=10, mujoco_batch=fast) as sampler:
            with warnings.catch_warnings(), pytest.raises(PolicyOutputError) as error:
                warnings.simplefilter("error")  # no warning from MuJoCo: it never got the NaN
                sampler.rollout(sampler.sample_tasks(1))
            messages.append(str(error.value))
    assert messages[0].startswith("the policy ElementwisePolicy returned the non-finite action [")
    assert "nan" in messages[0] and "at step 0 in env slot 0 (task 0: {'velocity'" in messages[0]
    assert "in 2 running slot(s) of that step; no env was stepped with it" in messages[0]
    assert messages[0] == messages[1]
