"""The meta-learner seam: a new algorithm is a subclass of ``MetaLearner`` in one table entry,
and ``train.py`` runs it, checkpoints its state and resumes it exactly, with no change."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
import torch

from maml_rl.app.runs.checkpoints import read_checkpoint
from maml_rl.data.stats import mean_returns
from maml_rl.metalearners import METALEARNERS, GradientMetaLearner, MAMLTRPO, MetaLearner, ProMP, RL2PPO
from maml_rl.app.config_files import ConfigError
from maml_rl.metalearners.base import Evaluation

from helpers.scripts import evaluate, train


class Rollouts(NamedTuple):
    """RandomSearch's own batch type: train.py hands it back to the learner and reads none of it."""

    episodes: list


class RandomSearch(MetaLearner):
    """A made-up, gradient-free meta-learner: each update nudges the parameters along seeded noise,
    scaled by the batch's mean return. Its own state (the update count, which seeds the noise) must
    survive a resume."""

    def __init__(self, policy, device="cpu", **_shared):
        self.policy = policy
        self.updates = 0

    def sample(self, sampler, tasks, gamma=0.95, device="cpu"):
        return Rollouts(sampler.rollout(tasks, gamma=gamma, device=device))

    def batch_stats(self, batch):
        returns = float(mean_returns(batch.episodes).mean())
        return {"env_steps": int(sum(int(b.lengths.sum()) for b in batch.episodes)),
                "return_before": returns, "return_after": returns}

    def update(self, batch):
        score = float(torch.stack([b.rewards.sum(0).mean() for b in batch.episodes]).mean())
        generator = torch.Generator().manual_seed(1000 + self.updates)
        with torch.no_grad():
            for p in self.policy.parameters():
                p.add_(1e-3 * score * torch.randn(p.shape, generator=generator))
        self.updates += 1
        return {"score": score}

    def state_dict(self):
        return {"updates": self.updates}

    def load_state_dict(self, state):
        self.updates = state["updates"]


@pytest.fixture
def random_search(monkeypatch):
    monkeypatch.setitem(METALEARNERS, "random-search", RandomSearch)  # registering is this one line


def test_every_shipped_learner_is_a_metalearner():
    assert all(issubclass(learner, MetaLearner) for learner in METALEARNERS.values())
    assert issubclass(MAMLTRPO, GradientMetaLearner) and issubclass(ProMP, GradientMetaLearner)
    assert not issubclass(RL2PPO, GradientMetaLearner) and RL2PPO.recurrent and not MAMLTRPO.recurrent


def test_a_new_learner_trains_checkpoints_and_resumes_exactly_through_train_py(random_search, tmp_path, small_config):
    config = small_config(tmp_path, **{"algorithm": "random-search", "num-batches": 3})

    def run(folder, *extra):
        train.main(["--config", str(config), "--output-folder", str(folder), "--num-workers", "0", "--seed", "4",
                    *extra])
        return torch.load(Path(folder) / "policy.th", weights_only=True)

    whole = run(tmp_path / "whole")
    two = run(tmp_path / "parts", "--num-batches", "2")
    assert not all(torch.equal(whole[k], two[k]) for k in whole)  # each update moves the policy
    assert read_checkpoint(tmp_path / "parts" / "checkpoint.pt")["metalearner"] == {"updates": 2}
    train.main(["--output-folder", str(tmp_path / "parts"), "--resume", "--num-batches", "3", "--num-workers", "0"])
    parts = torch.load(tmp_path / "parts" / "policy.th", weights_only=True)
    assert all(torch.equal(whole[k], parts[k]) for k in whole)


def test_a_learner_without_state_refuses_one():
    learner = MAMLTRPO.__new__(MAMLTRPO)
    assert learner.state_dict() == {}
    with pytest.raises(ValueError, match="keeps no state"):
        learner.load_state_dict({"moments": 1})


class EvaluatedRandomSearch(RandomSearch):
    """The same learner with an evaluation protocol: one stage, the current policy's returns."""

    def evaluate(self, sampler, tasks, gamma, device="cpu", *, actions="sample", num_steps=None,
                 evaluation_episodes=1):
        episodes = sampler.rollout(tasks, gamma=gamma, device=device, actions=actions)
        return Evaluation(torch.stack([b.total_rewards for b in episodes])[None].numpy(), None)


def test_test_py_evaluates_through_the_learner_and_refuses_one_without_a_protocol(random_search, monkeypatch,
                                                                                  tmp_path, small_config):
    config = small_config(tmp_path, **{"algorithm": "random-search", "num-batches": 1})
    train.main(["--config", str(config), "--output-folder", str(tmp_path / "run"), "--num-workers", "0"])
    argv = ["--config", str(tmp_path / "run" / "config.json"), "--num-batches", "2", "--meta-batch-size", "3",
            "--num-workers", "0", "--output", str(tmp_path / "results.npz")]
    with pytest.raises(ConfigError, match="RandomSearch .*defines no evaluate"):
        evaluate.main(argv)
    assert not (tmp_path / "results.npz").exists()
    monkeypatch.setitem(METALEARNERS, "random-search", EvaluatedRandomSearch)
    results = evaluate.main(argv)
    assert results["returns_per_step"].shape[:2] == (1, 6)  # one stage, 2 batches x 3 tasks
