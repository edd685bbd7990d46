"""RL²-PPO: train.py and test.py with ``algorithm: rl2-ppo``, exact resume, the
learner's refusals, and PPO's clipped objective against a hand computation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from maml_rl.metalearners import MAMLTRPO, RL2PPO
from maml_rl.policies import GRUPolicy, NormalMLPPolicy, rl2_input_size
from maml_rl.samplers import MultiTaskSampler

from conftest import write_small_config
from scripts import evaluate as test_script
from scripts import train

RL2 = {"algorithm": "rl2-ppo", "episodes-per-trial": 3, "gru-size": 8, "ppo-epochs": 2, "ppo-minibatches": 2,
       "bptt-chunk": 7, "gae-lambda": 0.95, "num-batches": 2}


def small_rl2_config(folder, **changes):
    config = {**RL2, **changes}
    path = write_small_config(folder, **config)
    # MAML's key is not one of RL²'s.
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("fast-lr"))
    path.write_text(text + "\n")
    return path


def run(config, output, *extra):
    return train.main(["--config", str(config), "--output-folder", str(output), "--num-workers", "0", *extra])


def read_metrics(folder):
    return [json.loads(line) for line in (Path(folder) / "metrics.jsonl").read_text().splitlines()]


def test_train_writes_the_adaptation_curve_and_resumes_exactly(tmp_path, capsys):
    config = small_rl2_config(tmp_path)
    run(config, tmp_path / "whole", "--seed", "3")
    run(config, tmp_path / "pieces", "--seed", "3", "--num-batches", "1")
    run(config, tmp_path / "pieces", "--resume", "--num-batches", "2")
    whole, pieces = read_metrics(tmp_path / "whole"), read_metrics(tmp_path / "pieces")
    assert [sorted(k for k in row if k.startswith("return_episode")) for row in whole] == \
        [["return_episode_0", "return_episode_1", "return_episode_2"]] * 2
    for a, b in zip(whole, pieces, strict=True):
        assert {k: v for k, v in a.items() if not k.startswith("time")} == \
            {k: v for k, v in b.items() if not k.startswith("time")}
    pa = torch.load(tmp_path / "whole" / "policy.th", weights_only=True)
    pb = torch.load(tmp_path / "pieces" / "policy.th", weights_only=True)
    assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)
    assert "gru.weight_hh_l0" in pa
    # 3 tasks x 4 trials x 3 episodes of 10 steps (2D navigation's episodes run to the horizon).
    assert whole[0]["env_steps"] == 3 * 4 * 3 * 10

    results = test_script.main(["--config", str(tmp_path / "whole" / "config.json"), "--meta-batch-size", "2",
                                "--num-workers", "0", "--eval-actions", "mean", "--evaluation-episodes", "2"])
    # Rows: the 3 episodes of the adaptation trial, then the evaluation episodes.
    assert results["returns_per_step"].shape == (4, 2)
    assert np.isfinite(results["returns_per_step"]).all()
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:4].strip().isdigit()]
    assert [row.partition("  (")[2] for row in rows] == \
        ["episode 0 of the trial)", "", "", "evaluation episodes, mean action)"]


def test_the_learners_refuse_the_other_family_of_policy():
    with pytest.raises(TypeError, match="recurrent policy.*GRUPolicy"):
        RL2PPO(NormalMLPPolicy(2, 2))
    with pytest.raises(TypeError, match="RL2PPO"):
        MAMLTRPO(GRUPolicy(6, 2, (8,), 4))


def test_a_step_on_mean_action_trials_is_refused():
    torch.manual_seed(0)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)
    learner = RL2PPO(policy, episodes_per_trial=2, epochs=1)
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 4}, 2, policy, seed=0, num_workers=0) as sampler:
        trials = sampler.rollout_trials(sampler.sample_tasks(2), 2, actions="mean")
    with pytest.raises(ValueError, match="mean actions"):
        learner.step(trials)


def test_the_first_epoch_starts_at_ratio_one_and_its_loss_is_the_hand_computed_surrogate():
    """Before any update the recomputed log-probs equal the behaviour ones (ratio 1), so
    the clipped surrogate is minus the masked mean advantage minus the entropy bonus."""
    torch.manual_seed(1)
    policy = GRUPolicy(rl2_input_size(2, 2), 2, (8,), 4)
    learner = RL2PPO(policy, episodes_per_trial=2, epochs=1, minibatches=1, entropy_coef=0.01, bptt_chunk=3,
                     normalize_advantages=False)
    with MultiTaskSampler("2DNavigation-v0", {"max_episode_steps": 5}, 3, policy, seed=4, num_workers=0) as sampler:
        trials = sampler.rollout_trials(sampler.sample_tasks(2), 2, chunk=3)
    data = learner._prepare(trials)
    distribution, _ = policy.forward_trials(data["inputs"], data["state"][0], chunk=3)
    assert torch.allclose(distribution.log_prob(data["actions"]), data["log_probs"], atol=1e-5)
    mask = data["mask"]
    entropy = (distribution.entropy() * mask).sum() / mask.sum()
    expected = -(data["advantages"] * mask).sum() / mask.sum() - 0.01 * entropy
    logs = learner.step(trials)
    assert logs["loss"] == pytest.approx(expected.item(), rel=1e-4, abs=1e-5)
    assert logs["clip_fraction"] == 0.0 and abs(logs["approx_kl"]) < 1e-6
