"""PEARL through train.py and test.py: seeded runs repeat, a resume is exact (replays included),
test.py's online adaptation is written as the other algorithms' results are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from maml_rl.app.results import read_record

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.processes, pytest.mark.slow]

TINY = {
    "algorithm": "pearl", "env-name": "2DNavigation-v0",
    "env-kwargs": {"low": -0.5, "high": 0.5, "max_episode_steps": 10},
    "gamma": 0.99, "hidden-sizes": [16, 16], "nonlinearity": "relu", "fast-batch-size": 1, "meta-batch-size": 2,
    "num-batches": 3, "latent-size": 3, "context-hidden-sizes": [16], "num-train-tasks": 4,
    "num-initial-steps": 30, "num-steps-prior": 10, "num-steps-posterior": 10, "num-extra-rl-steps-posterior": 20,
    "num-train-steps-per-itr": 4, "tasks-per-update": 3, "sac-batch-size": 8, "embedding-batch-size": 6,
    "replay-capacity": 45, "sac-reward-scale": 10.0, "eval-trajectories": 3, "num-exp-traj-eval": 1,
}


def train(folder: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "train.py"), "--output-folder", str(folder), "--num-workers", "0",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def config_file(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "pearl.yaml"
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return path


def checkpoint_learner(folder: Path) -> dict:
    return torch.load(folder / "checkpoint.pt", weights_only=False)["metalearner"]


def assert_same(a, b, where="state"):
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif torch.is_tensor(a):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


def test_a_resumed_run_is_the_uninterrupted_one_replays_included(tmp_path):
    config = config_file(tmp_path)
    train(tmp_path / "whole", "--config", str(config), "--seed", "3")
    train(tmp_path / "again", "--config", str(config), "--seed", "3")
    train(tmp_path / "split", "--config", str(config), "--seed", "3", "--num-batches", "1")
    train(tmp_path / "split", "--resume", "--num-batches", "3")
    whole, again, split = (torch.load(tmp_path / name / "policy.th") for name in ("whole", "again", "split"))
    for name in whole:
        assert torch.equal(whole[name], again[name]) and torch.equal(whole[name], split[name]), name
    state = checkpoint_learner(tmp_path / "whole")
    assert_same(state, checkpoint_learner(tmp_path / "split"))
    # The replays are in the checkpoint, wrapped round at their capacity (30 initial + 3 iterations of 40 > 45).
    sizes = [task["size"] for task in state["replay"]["tasks"]]
    assert max(sizes) == 45 and min(sizes) >= 30
    rows = [line for line in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    assert rows == (tmp_path / "split" / "metrics.jsonl").read_text().splitlines() or all(
        {k: v for k, v in yaml.safe_load(a).items() if not k.startswith("time")}
        == {k: v for k, v in yaml.safe_load(b).items() if not k.startswith("time")}
        for a, b in zip(rows, (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()))


def test_the_run_seed_changes_the_run(tmp_path):
    config = config_file(tmp_path, **{"num-batches": 1})
    train(tmp_path / "a", "--config", str(config), "--seed", "3")
    train(tmp_path / "b", "--config", str(config), "--seed", "4")
    a, b = torch.load(tmp_path / "a" / "policy.th"), torch.load(tmp_path / "b" / "policy.th")
    assert not torch.equal(a["actor.mean.weight"], b["actor.mean.weight"])
    state_a, state_b = checkpoint_learner(tmp_path / "a"), checkpoint_learner(tmp_path / "b")
    assert not torch.equal(state_a["replay"]["tasks"][0]["actions"], state_b["replay"]["tasks"][0]["actions"])


def test_test_py_writes_the_return_of_every_trajectory(tmp_path):
    config = config_file(tmp_path, **{"num-batches": 1})
    train(tmp_path / "run", "--config", str(config), "--seed", "3")
    done = subprocess.run([sys.executable, str(ROOT / "test.py"), "--config", str(tmp_path / "run" / "config.json"),
                           "--meta-batch-size", "3", "--num-batches", "2", "--fast-batch-size", "2",
                           "--eval-actions", "mean", "--num-workers", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(PEARL)" in done.stdout and "trajectory 0, z from the prior" in done.stdout
    with np.load(tmp_path / "run" / "results.npz", allow_pickle=True) as results:
        assert results["returns_per_step"].shape == (3, 6)  # trajectories x tasks
        assert results["train_returns"].shape == (6, 2) and results["valid_returns"].shape == (6, 2)
        assert (results["returns_per_step"] < 0).all()  # 2D navigation: minus distances
        record = read_record(results)
    assert record["settings"]["protocol"] == "pearl-posterior"
    assert record["settings"]["eval-trajectories"] == 3 and record["settings"]["num-exp-traj-eval"] == 1


def tiny_policy_and_learner():
    """TINY's PEARL policy and learner on 2D navigation with 10-step episodes, seed 1."""
    import gymnasium as gym

    import maml_rl.envs  # noqa: F401
    from maml_rl.app.config_files import validate_config
    from maml_rl.metalearners import PEARL

    config = validate_config({**TINY, "seed": 1})
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
    assert collections >= 2 and len(devices) == collections + TINY["eval-trajectories"]
    assert all(d == torch.device("cpu") for d in devices), devices


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pearl_trains_resumes_and_evaluates_on_cuda(tmp_path):
    config = config_file(tmp_path, **{"num-batches": 1})
    train(tmp_path / "run", "--config", str(config), "--seed", "3", "--device", "cuda")
    train(tmp_path / "run", "--resume", "--num-batches", "2", "--device", "cuda")
    for device in ("cuda", "cpu"):
        done = subprocess.run([sys.executable, str(ROOT / "test.py"), "--config", str(tmp_path / "run" / "config.json"),
                               "--meta-batch-size", "2", "--num-batches", "1", "--num-workers", "0",
                               "--device", device], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]


def test_pearl_configs_are_checked(tmp_path):
    from maml_rl.app.config_files import ConfigError, validate_config

    with pytest.raises(ConfigError, match="out of num-train-tasks"):
        validate_config({**TINY, "meta-batch-size": 5})
    with pytest.raises(ConfigError, match="gae-lambda.*has no effect with algorithm 'pearl'"):
        validate_config({**TINY, "gae-lambda": 0.9})
