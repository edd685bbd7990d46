"""PEARL through train.py and test.py: a run's replays are checkpointed wrapped round at their capacity, the
seed changes the run, test.py's online adaptation is written as the other algorithms' results are (seeded runs
repeat and a resume is exact, replays included: test_learner_contract.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from maml_rl.app.results import read_record

from helpers import ROOT
from helpers.runs import PEARL_TINY, load_policy, pearl_config, read_learner_state, run
from helpers.scripts import evaluate


def test_the_replays_are_checkpointed_wrapped_round_at_their_capacity(reference_runs):
    state = read_learner_state(reference_runs("pearl"))
    # 30 initial steps + 40 per iteration on the tasks collected on > a capacity of 45.
    sizes = [task["size"] for task in state["replay"]["tasks"]]
    assert max(sizes) == 45 and min(sizes) >= 30


def test_the_run_seed_changes_the_run(reference_runs, tmp_path):
    run(pearl_config(tmp_path), tmp_path / "b", "--seed", str(reference_runs.SEED + 1))
    a, b = load_policy(reference_runs("pearl")), load_policy(tmp_path / "b")
    assert not torch.equal(a["actor.mean.weight"], b["actor.mean.weight"])
    state_a, state_b = read_learner_state(reference_runs("pearl")), read_learner_state(tmp_path / "b")
    assert not torch.equal(state_a["replay"]["tasks"][0]["actions"], state_b["replay"]["tasks"][0]["actions"])


def test_test_py_writes_the_return_of_every_trajectory(reference_runs, tmp_path, capsys):
    capsys.readouterr()
    evaluate.main(["--config", str(reference_runs("pearl") / "config.json"), "--meta-batch-size", "3",
                   "--num-batches", "2", "--fast-batch-size", "2", "--eval-actions", "mean", "--num-workers", "0",
                   "--output", str(tmp_path / "results.npz")])
    out = capsys.readouterr().out
    assert "(PEARL)" in out and "trajectory 0, z from the prior" in out
    with np.load(tmp_path / "results.npz", allow_pickle=True) as results:
        assert results["returns_per_step"].shape == (3, 6)  # trajectories x tasks
        assert results["train_returns"].shape == (6, 2) and results["valid_returns"].shape == (6, 2)
        assert (results["returns_per_step"] < 0).all()  # 2D navigation: minus distances
        record = read_record(results)
    assert record["settings"]["protocol"] == "pearl-posterior"
    assert record["settings"]["eval-trajectories"] == 3 and record["settings"]["num-exp-traj-eval"] == 1


def tiny_policy_and_learner():
    """PEARL_TINY's policy and learner on 2D navigation with 10-step episodes, seed 1."""
    import gymnasium as gym

    import maml_rl.envs  # noqa: F401
    from maml_rl.app.config_files import validate_config
    from maml_rl.metalearners import PEARL

    config = validate_config({**PEARL_TINY, "seed": 1})
    policy = PEARL.make_policy(gym.make("2DNavigation-v0", max_episode_steps=10), config)
    return policy, PEARL.from_config(policy, config, device="cpu")


def test_pearl_refuses_a_sampler_without_z_and_foreign_tasks():
    from maml_rl.samplers import MultiTaskSampler

    policy, learner = tiny_policy_and_learner()
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 10}, 1, policy, seed=1, num_workers=0,
                          conditioning_size=3) as sampler:
        with pytest.raises(ValueError, match="pass what learner.sample_tasks"):
            learner.sample(sampler, sampler.sample_tasks(2))
    with pytest.raises(TypeError, match="failed when called on one observation"):
        MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 10}, 1, policy, seed=1, num_workers=0)


def test_pearl_collects_and_evaluates_where_its_weights_are():
    """The sampler runs the policy on the learner's device in collection and evaluation, whatever ``device``
    the caller passes (a CUDA learner that let the sampler default to the CPU failed at its first step)."""
    from maml_rl.samplers import MultiTaskSampler

    policy, learner = tiny_policy_and_learner()
    devices = []
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 10}, 1, policy, seed=1, num_workers=0,
                          conditioning_size=3) as sampler:
        real = sampler.rollout_transitions

        def recording(*args, **kwargs):
            devices.append(kwargs.get("device"))
            return real(*args, **kwargs)

        sampler.rollout_transitions = recording
        learner.sample(sampler, learner.sample_tasks(sampler, 2), device="not-a-device")
        collections = len(devices)
        learner.evaluate(sampler, sampler.sample_tasks(2), device="not-a-device")
    assert collections >= 2 and len(devices) == collections + PEARL_TINY["eval-trajectories"]
    assert all(d == torch.device("cpu") for d in devices), devices


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pearl_trains_resumes_and_evaluates_on_cuda(tmp_path):
    # The scripts in subprocesses: CUDA is then never initialised in the test process.
    def script(name, *args):
        done = subprocess.run([sys.executable, str(ROOT / f"{name}.py"), "--num-workers", "0", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]

    config = pearl_config(tmp_path, **{"num-batches": 1})
    script("train", "--output-folder", str(tmp_path / "run"), "--config", str(config), "--seed", "3",
           "--device", "cuda")
    script("train", "--output-folder", str(tmp_path / "run"), "--resume", "--num-batches", "2", "--device", "cuda")
    for device in ("cuda", "cpu"):
        script("test", "--config", str(tmp_path / "run" / "config.json"), "--meta-batch-size", "2", "--num-batches",
               "1", "--device", device)


def test_pearl_configs_are_checked(tmp_path):
    from maml_rl.app.config_files import ConfigError, validate_config

    with pytest.raises(ConfigError, match="out of num-train-tasks"):
        validate_config({**PEARL_TINY, "meta-batch-size": 5})
    with pytest.raises(ConfigError, match="gae-lambda.*has no effect with algorithm 'pearl'"):
        validate_config({**PEARL_TINY, "gae-lambda": 0.9})
