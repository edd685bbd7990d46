"""The in-context benchmarks' RL² configs: their trials are the benchmarks' (attempts, horizon), and each
trains an iteration; each Transformer config samples as its RL² counterpart."""

import json

import gymnasium
import pytest

import maml_rl.envs  # noqa: F401  (registers the ids)
from maml_rl.app.config_files import load_config

from helpers import ROOT
from helpers.scripts import train

# config -> (env, attempts a trial, steps an attempt)
TRIALS = {
    "sparse-point-robot": ("SparsePointRobot-v0", 3, 20),
    "bandit/bandit-k5-n100": ("Bandit-K5-v0", 100, 1),
    "bandit/bandit-k10-n100": ("Bandit-K10-v0", 100, 1),
    "tabular-mdp": ("TabularMDP-v0", 10, 10),
    "metaworld/ml1-reach-3-attempts": ("MetaWorld-ML1-reach-v3", 3, 500),
    "metaworld/ml1-push-3-attempts": ("MetaWorld-ML1-push-v3", 3, 500),
}


@pytest.mark.parametrize("name", sorted(TRIALS))
def test_a_trial_is_the_benchmarks_attempts(name):
    config = load_config(ROOT / "configs" / "rl2" / f"{name}.yaml")
    env_name, attempts, horizon = TRIALS[name]
    assert (config["algorithm"], config["env-name"], config["episodes-per-trial"]) == ("rl2-ppo", env_name, attempts)
    # Gradients reach across the whole trial, from the last attempt back to the first.
    assert config["bptt-chunk"] == attempts * horizon and not config["update-per-chunk"]
    # The env's horizon, without building it (test_config.py builds every shipped config's env).
    assert config["env-kwargs"].get("max_episode_steps", gymnasium.spec(env_name).max_episode_steps) == horizon


@pytest.mark.parametrize("name, keys", [
    ("sparse-point-robot", ["return_episode_2", "success_episode_0", "success_episode_2"]),
    ("bandit/bandit-k10-n100", ["return_episode_99"]),
])
def test_config_trains_an_iteration(tmp_path, name, keys):
    run = tmp_path / "run"
    train.main(["--config", str(ROOT / "configs" / "rl2" / f"{name}.yaml"), "--output-folder", str(run),
                "--seed", "1", "--num-workers", "0", "--set", "num-batches=1", "--set", "meta-batch-size=2",
                "--set", "fast-batch-size=1", "--set", "hidden-sizes=[8]", "--set", "gru-size=8",
                "--set", "ppo-epochs=1", "--set", "ppo-minibatches=1"])
    metrics = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert all(key in metrics for key in keys), sorted(metrics)


TRANSFORMER_CONFIGS = sorted(str(path.relative_to(ROOT / "configs" / "transformer"))[:-len(".yaml")]
                             for path in (ROOT / "configs" / "transformer").rglob("*.yaml"))
# What sets a trial's env steps and returns: the same in both, so the two compare at equal env steps.
SAMPLING_KEYS = ("env-name", "env-kwargs", "episodes-per-trial", "fast-batch-size", "meta-batch-size",
                 "num-batches", "gamma", "gae-lambda", "reward-scale", "trial-inputs")


@pytest.mark.parametrize("name", TRANSFORMER_CONFIGS)
def test_a_transformer_config_samples_as_its_rl2_counterpart(name):
    transformer = load_config(ROOT / "configs" / "transformer" / f"{name}.yaml")
    rl2 = load_config(ROOT / "configs" / "rl2" / f"{name}.yaml")
    assert (transformer["algorithm"], rl2["algorithm"]) == ("transformer-ppo", "rl2-ppo")
    assert {key: transformer[key] for key in SAMPLING_KEYS} == {key: rl2[key] for key in SAMPLING_KEYS}
    assert transformer["context-window"] is None  # the whole trial, as RL²'s BPTT over it
