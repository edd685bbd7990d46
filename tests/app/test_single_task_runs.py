"""The symptoms users saw, end to end: one-task and one-step rollouts reported the same
return before and after adaptation (the episodes were overwritten by the next rollout)."""

import json

import numpy as np
import yaml

from helpers import ROOT
from helpers.scripts import evaluate, train


def test_bandit_config_trains_on_its_own_episodes(tmp_path):
    """Every bandit episode lasts one step: each line logged return_before == return_after."""
    train.main(["--config", str(ROOT / "configs/maml/bandit/bandit-k5-n10.yaml"), "--num-batches", "3",
                "--set", "meta-batch-size=4", "--output-folder", str(tmp_path / "bandit"), "--num-workers", "0",
                "--seed", "1"])
    lines = [json.loads(line) for line in (tmp_path / "bandit" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    for line in lines:
        assert line["return_before"] != line["return_after"], line
        assert line["ratio_deviation_before"] == 0.0 and line["kl_before"] == 0.0


def test_evaluation_of_one_task_reports_each_step(tmp_path):
    """``test.py --meta-batch-size 1`` printed the same number before and after adaptation."""
    config = tmp_path / "nav.yaml"
    config.write_text(yaml.safe_dump({
        "env-name": "2DNavigation-v0", "env-kwargs": {"max_episode_steps": 10}, "gamma": 0.99,
        "hidden-sizes": [16, 16], "nonlinearity": "tanh", "fast-batch-size": 4, "fast-lr": 0.5, "num-batches": 1,
        "meta-batch-size": 2,
    }))
    train.main(["--config", str(config), "--output-folder", str(tmp_path / "run"), "--num-workers", "0", "--seed", "3"])
    results = evaluate.main(["--config", str(tmp_path / "run" / "config.json"), "--meta-batch-size", "1",
                             "--num-steps", "2", "--num-workers", "0", "--output", str(tmp_path / "results.npz")])
    per_step = results["returns_per_step"][:, 0]
    assert len(set(per_step.tolist())) == 3, per_step
    # The saved returns are those of the episodes themselves, not of a later rollout.
    assert not np.array_equal(results["train_returns"], results["valid_returns"])
