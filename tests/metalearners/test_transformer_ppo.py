"""Transformer-PPO through train.py and test.py (its resume and bits: test_learner_contract.py, from its declared
tiny config): its own label and protocol, its memory estimate, the context-reset switch, and its first update
starting at ratio one on the trials its cache sampled."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from maml_rl.app.config_files import ConfigError, build_env, load_config
from maml_rl.app.results import read_record
from maml_rl.metalearners import METALEARNERS, make_policy
from maml_rl.metalearners.transformer import TransformerPPO
from maml_rl.samplers import MultiTaskSampler

from helpers.runs import load_policy
from helpers.scripts import evaluate as test_script

ALGORITHM = "transformer-ppo"


def _evaluate(folder, output, *flags):
    return test_script.main(["--config", str(folder / "config.json"), "--meta-batch-size", "2", "--num-workers", "0",
                             "--evaluation-episodes", "1", "--output", str(output), *flags])


def test_test_py_labels_the_transformer_and_records_the_context_reset(reference_runs, tmp_path, capsys):
    folder = reference_runs(ALGORITHM)
    assert "blocks.0.qkv.weight" in load_policy(folder)
    capsys.readouterr()
    plain = _evaluate(folder, tmp_path / "plain.npz")
    first_line = capsys.readouterr().out.splitlines()[0]
    assert "(Transformer)" in first_line and "RL²" not in first_line
    assert "then 1 evaluation episodes in the same trial" in first_line
    with pytest.raises(ValueError, match="leave out --eval-actions mean"):
        _evaluate(folder, tmp_path / "mean.npz", "--eval-actions", "mean")
    assert not (tmp_path / "mean.npz").exists()
    reset = _evaluate(folder, tmp_path / "reset.npz", "--reset-context-each-attempt")
    assert "the context reset at each episode" in capsys.readouterr().out.splitlines()[0]
    # Rows: the 2 attempts of the trial, then the evaluation episode; the first attempt is the same either way.
    assert plain["returns_per_step"].shape == reset["returns_per_step"].shape == (3, 2)
    np.testing.assert_array_equal(plain["returns_per_step"][0], reset["returns_per_step"][0])
    with np.load(tmp_path / "plain.npz", allow_pickle=True) as a, np.load(tmp_path / "reset.npz",
                                                                          allow_pickle=True) as b:
        settings = read_record(a)["settings"], read_record(b)["settings"]
    assert settings[0]["protocol"] == settings[1]["protocol"] == "transformer-trials"
    assert "reset-context-each-attempt" not in settings[0] and settings[1]["reset-context-each-attempt"] is True


def test_the_switch_is_refused_for_a_learner_without_it(reference_runs, tmp_path):
    with pytest.raises(ConfigError, match="--reset-context-each-attempt is an evaluation option of .*transformer-ppo"):
        test_script.main(["--config", str(reference_runs("maml-trpo") / "config.json"), "--num-workers", "0",
                          "--output", str(tmp_path / "r.npz"), "--reset-context-each-attempt"])
    assert not (tmp_path / "r.npz").exists()


def test_the_memory_estimate_counts_the_transformers_data_not_a_gru():
    config = {**TransformerPPO.contract_config, "attempt-input": False, "context-window": None, "d-model": 64,
              "num-layers": 2, "num-heads": 4, "episodes-per-trial": 10, "fast-batch-size": 10,
              "meta-batch-size": 10, "ppo-minibatches": 1, "attention": "math"}
    needs = TransformerPPO.memory_needs(None, config, observation_size=2, action_size=2, horizon=100)
    T, trials = 1000, 100
    # By hand: the inputs (2 + 2 + 2 wide), actions, 4 more floats a step; the update's activations and its
    # T x T scores per head and layer; the sampler's keys and values with room to double.
    assert needs["trials of an iteration"] == trials * T * (6 + 2 + 4) * 4
    assert needs["the update's activations"] == trials * 2 * 4 * (12 * T * 64 + 2 * 4 * T * T)
    assert needs["the sampler's key/value caches"] == trials * 2 * 2 * 2 * 64 * T * 4
    # Fused attention over the whole trial keeps a few numbers per token and head, not the scores; with a
    # window it is given the mask, and the estimate keeps the scores.
    fused = TransformerPPO.memory_needs(None, {**config, "attention": "fused"}, 2, 2, 100)
    assert fused["the update's activations"] == trials * 2 * 4 * (12 * T * 64 + 4 * 4 * T)
    windowed = TransformerPPO.memory_needs(None, {**config, "attention": "fused", "context-window": 50}, 2, 2, 100)
    assert windowed["the update's activations"] == needs["the update's activations"]


@pytest.mark.parametrize("attention", ["math", "fused"])
def test_the_first_update_starts_at_ratio_one_on_the_trials_the_cache_sampled(tmp_path, attention):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({**TransformerPPO.contract_config, "attention": attention}))
    config = load_config(path)
    torch.manual_seed(0)
    env = build_env(config)
    policy = make_policy(config, env)
    env.close()
    learner = METALEARNERS[ALGORITHM].from_config(policy, {**config, "seed": 0, "ppo-epochs": 1,
                                                                "ppo-minibatches": 1})
    with MultiTaskSampler(config["env-name"], config["env-kwargs"], 2, policy, seed=1) as sampler:
        trials = learner.sample(sampler, sampler.sample_tasks(2), 0.99)
    before = [p.detach().clone() for p in policy.parameters()]
    logs = learner.update(trials)
    # The first minibatch sees the sampling policy: the ratio is one up to float32, so nothing is clipped.
    assert logs["ppo_updates"] == 1 and logs["clip_fraction"] == 0.0 and abs(logs["approx_kl"]) < 1e-6
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))
