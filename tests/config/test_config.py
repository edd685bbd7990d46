"""Configuration files: every shipped config is valid, and mistakes are reported precisely."""

import inspect
import json
import os
import re

import pytest
import yaml

import maml_rl.envs
from maml_rl.metalearners import METALEARNERS
from maml_rl.app.config_files import (
    all_config_keys,
    ConfigError,
    apply_overrides,
    build_env,
    config_keys,
    load_config,
    markdown_reference,
    overridden_env_kwargs,
    parse_override,
    read_config_file,
    validate_config,
)

from helpers import ROOT

SHIPPED = sorted((ROOT / "configs").rglob("*.yaml"))

MINIMAL = {
    "env-name": "2DNavigation-v0",
    "gamma": 0.99,
    "hidden-sizes": [64, 64],
    "nonlinearity": "tanh",
    "fast-batch-size": 20,
    "fast-lr": 0.1,
    "num-batches": 10,
    "meta-batch-size": 20,
}


def test_configs_are_shipped():
    names = {str(path.relative_to(ROOT / "configs")) for path in SHIPPED}
    expected = {
        f"maml/{name}.yaml"
        for name in ("2d-navigation", "2d-navigation-reference", "halfcheetah-vel", "halfcheetah-dir", "ant-vel", "ant-dir", "ant-goal",
                     "tabular-mdp")
    } | {f"maml/bandit/bandit-k{k}-n{n}.yaml" for k in (5, 10, 50) for n in (10, 100, 500)}
    assert expected <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_shipped_config_is_valid_and_builds_its_env(path):
    # Written out in full, as the reference configs: every key but the seed (env-kwargs when any)
    # and loss-averaging and algorithm, which the reference did not have.
    written = read_config_file(path)
    algorithm = written.get("algorithm", "maml-trpo")
    # PEARL's configs also leave out the shared key it has no use for (gae-lambda).
    unused = set(METALEARNERS[algorithm].unused_shared_keys)
    optional = {"seed", "env-kwargs", "algorithm"} | ({"loss-averaging"} & set(config_keys(algorithm)))
    assert set(written) | optional | unused == set(config_keys(algorithm))
    config = load_config(path)
    assert config["env-name"] in maml_rl.envs.ENV_IDS + maml_rl.envs.METAWORLD_IDS
    if config["env-name"] in maml_rl.envs.METAWORLD_IDS and not os.environ.get("MAML_RL_REQUIRE_METAWORLD"):
        pytest.importorskip("metaworld")
    env = build_env(config)
    try:
        assert hasattr(env.unwrapped, "sample_tasks")
        if "max_episode_steps" in config["env-kwargs"]:
            assert env.spec.max_episode_steps == config["env-kwargs"]["max_episode_steps"]
    finally:
        env.close()


def test_2d_navigation_default_has_the_paper_settings():
    config = load_config(ROOT / "configs/maml/2d-navigation.yaml")
    assert config == {
        "algorithm": "maml-trpo", "env-name": "2DNavigation-v0", "env-kwargs": {"low": -0.5, "high": 0.5, "normalization_scale": 1.0},
        "gamma": 0.99, "gae-lambda": 1.0, "first-order": False, "hidden-sizes": [100, 100], "nonlinearity": "ReLU",
        "fast-batch-size": 20, "num-steps": 1, "fast-lr": 0.5, "num-batches": 100, "meta-batch-size": 40,
        "max-kl": 1.0e-2, "cg-iters": 10, "cg-damping": 1.0e-5, "ls-max-steps": 15, "ls-backtrack-ratio": 0.8,
        "loss-averaging": "step", "seed": None,
    }


def test_2d_navigation_reference_port():
    config = load_config(ROOT / "configs/maml/2d-navigation-reference.yaml")
    assert config == {
        "algorithm": "maml-trpo", "env-name": "2DNavigation-v0", "env-kwargs": {"low": -0.5, "high": 0.5}, "gamma": 0.99,
        "gae-lambda": 1.0, "first-order": False, "hidden-sizes": [64, 64], "nonlinearity": "Tanh",
        "fast-batch-size": 20, "num-steps": 1, "fast-lr": 0.1, "num-batches": 500, "meta-batch-size": 20,
        "max-kl": 1.0e-2, "cg-iters": 10, "cg-damping": 1.0e-5, "ls-max-steps": 15, "ls-backtrack-ratio": 0.8,
        "loss-averaging": "episode", "seed": None,
    }


def test_bandit_config_values():
    config = load_config(ROOT / "configs/maml/bandit/bandit-k50-n100.yaml")
    assert config["env-name"] == "Bandit-K50-v0"
    assert config["env-kwargs"] == {}
    assert (config["fast-batch-size"], config["fast-lr"], config["gamma"]) == (100, 0.5, 0.95)
    assert (config["hidden-sizes"], config["nonlinearity"], config["meta-batch-size"]) == ([32, 32], "relu", 20)


def test_mujoco_config_values():
    config = load_config(ROOT / "configs/maml/ant-goal.yaml")
    assert config["env-name"] == "AntPos-v5"
    assert config["env-kwargs"] == {"low": -3.0, "high": 3.0, "normalization_scale": 10.0, "max_episode_steps": 100}
    assert config["meta-batch-size"] == 40


def test_unknown_key_names_it_and_lists_valid_keys():
    with pytest.raises(ConfigError) as info:
        validate_config({**MINIMAL, "fast_lr": 0.1}, source="my.yaml")
    message = str(info.value)
    assert "my.yaml" in message
    assert "unknown key 'fast_lr'" in message and "did you mean 'fast-lr'" in message
    assert "valid keys for algorithm 'maml-trpo' are: " + ", ".join(config_keys("maml-trpo")) in message
    assert set().union(*(config_keys(name) for name in METALEARNERS)) == set(all_config_keys())


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("fast-lr", "0.1", "expected a number > 0"),
        ("fast-lr", -0.1, "expected a number > 0"),
        ("fast-batch-size", -5, "expected an integer >= 1"),
        ("fast-batch-size", 2.5, "expected an integer >= 1"),
        ("meta-batch-size", True, "expected an integer >= 1"),
        ("gamma", 1.5, "expected a number in [0, 1]"),
        ("first-order", "yes", "expected true or false"),
        ("hidden-sizes", [64, 0], "expected a list of integers >= 1"),
        ("nonlinearity", "tanhh", "valid names are"),
        ("loss-averaging", "steps", 'expected "step" or "episode"'),
        ("env-kwargs", [1, 2], "expected a mapping"),
        ("ls-backtrack-ratio", 1.0, "expected a number in (0, 1)"),
        ("seed", -1, "expected null or an integer"),
    ],
)
def test_wrong_value_names_key_value_and_expectation(key, value, expected):
    with pytest.raises(ConfigError) as info:
        validate_config({**MINIMAL, key: value})
    message = str(info.value)
    assert f"{key}: got {value!r}" in message
    assert expected in message


def test_every_problem_is_reported_at_once():
    raw = {**MINIMAL, "fast-lr": "0.1", "meta-batch-size": 0, "fast_lr": 1}
    del raw["hidden-sizes"]
    message = str(pytest.raises(ConfigError, validate_config, raw).value)
    for part in ("fast-lr: got '0.1'", "meta-batch-size: got 0", "unknown key 'fast_lr'", "missing key 'hidden-sizes'"):
        assert part in message


def test_unknown_env_id_suggests_close_ids():
    with pytest.raises(ConfigError) as info:
        validate_config({**MINIMAL, "env-name": "2DNavigaton-v0"})
    message = str(info.value)
    assert "env-name" in message and "'2DNavigaton-v0'" in message
    assert "2DNavigation-v0" in message  # the close id, and the list of maml_rl's ids
    assert "HalfCheetahVel-v5" in message


def test_defaults_and_number_normalisation():
    config = validate_config({**MINIMAL, "fast-lr": 1})
    assert config["fast-lr"] == 1.0 and isinstance(config["fast-lr"], float)
    assert config["env-kwargs"] == {} and config["seed"] is None
    assert (config["num-steps"], config["first-order"], config["max-kl"]) == (1, False, 1e-2)
    assert list(config) == list(config_keys(config["algorithm"]))


def test_yaml_reads_exponent_without_dot_as_float(tmp_path):
    path = tmp_path / "config.yaml"
    lines = [f"{key}: {json.dumps(value)}" for key, value in MINIMAL.items()]
    path.write_text("\n".join(lines + ["max-kl: 1e-3", "cg-damping: 1E-5"]) + "\n")
    config = load_config(path)
    assert config["max-kl"] == 1e-3 and config["cg-damping"] == 1e-5


def test_json_round_trip(tmp_path):
    config = validate_config({**MINIMAL, "seed": 3})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert load_config(path) == config


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(tmp_path / "list.yaml")
    (tmp_path / "broken.yaml").write_text("gamma: [0.9\n")
    with pytest.raises(ConfigError, match="cannot parse config file"):
        load_config(tmp_path / "broken.yaml")


def test_overrides():
    assert parse_override("hidden-sizes=[8, 8]") == ("hidden-sizes", [8, 8])
    assert parse_override("fast-lr=1e-2") == ("fast-lr", 0.01)
    assert parse_override("env-kwargs.max_episode_steps=10") == ("env-kwargs.max_episode_steps", 10)
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override("fast-lr")
    config = apply_overrides({**MINIMAL, "env-kwargs": {"low": -0.5}}, [("env-kwargs.high", 0.5), ("gamma", 0.9)])
    assert config["env-kwargs"] == {"low": -0.5, "high": 0.5} and config["gamma"] == 0.9


def test_env_kwargs_rejected_by_the_env():
    config = validate_config({**MINIMAL, "env-kwargs": {"speed": 3}})
    with pytest.raises(ConfigError) as info:
        build_env(config)
    assert str(info.value) == ("env-kwargs: 2DNavigation-v0 takes no argument 'speed'; it takes: low, high, "
                               "normalization_scale, max_episode_steps")
    config = validate_config({**MINIMAL, "env-kwargs": {"low": 1.0, "high": 0.0}})
    with pytest.raises(ConfigError, match="env-kwargs: 2DNavigation-v0 cannot be built with"):
        build_env(config)


def test_set_errors_name_set_as_their_source(tmp_path):
    """A typo in --set was blamed on the YAML file, and a misspelt env-kwargs.NAME printed the kwargs twice with
    no did-you-mean."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**MINIMAL, "fast-lr": -1}))
    with pytest.raises(ConfigError) as info:
        load_config(path, [("fast-btch-size", 5), ("fast-lr", 0.1)])
    message = str(info.value)
    assert message.startswith(f"invalid --set option (applied to {path}):\n"
                              "  - --set fast-btch-size: unknown key 'fast-btch-size' (did you mean 'fast-batch-size'?)")
    with pytest.raises(ConfigError) as info:
        load_config(path, [("gamma", 2)])
    assert str(info.value).splitlines()[:3] == [
        f"invalid configuration in {path} and its --set options:",
        "  - --set gamma: got 2 (int), expected a number in [0, 1]", "  - fast-lr: got -1 (int), expected a number > 0"]
    config = validate_config({**MINIMAL, "env-kwargs": {"max_episode_step": 20}})
    with pytest.raises(ConfigError) as info:
        build_env(config, overridden_env_kwargs([("env-kwargs.max_episode_step", 20)]))
    assert str(info.value) == ("--set env-kwargs.max_episode_step: 2DNavigation-v0 takes no argument "
                               "'max_episode_step' (did you mean 'max_episode_steps'?); it takes: low, high, "
                               "normalization_scale, max_episode_steps")


def test_non_meta_env_is_rejected():
    config = validate_config({**MINIMAL, "env-name": "CartPole-v1"})
    with pytest.raises(ConfigError, match="not a meta-learning environment"):
        build_env(config)


def test_left_out_gamma_and_fast_lr_mean_the_api_defaults():
    """A key left out of a config means what leaving the argument out of the Python API means."""
    from maml_rl.metalearners import MAMLTRPO, make_metalearner, sample_adapt_sample
    from maml_rl.policies import get_policy_for_env
    from maml_rl.samplers import MultiTaskSampler

    raw = {key: value for key, value in MINIMAL.items() if key not in ("gamma", "fast-lr")}
    config = validate_config(raw)
    assert config["gamma"] == inspect.signature(sample_adapt_sample).parameters["gamma"].default
    assert config["fast-lr"] == inspect.signature(MAMLTRPO).parameters["fast_lr"].default
    policy = get_policy_for_env(maml_rl.envs.make_env("2DNavigation-v0")(), hidden_sizes=(4,))
    assert make_metalearner(config, policy).inner_loop == MAMLTRPO(policy).inner_loop
    # The shipped configs with an inner step all give both, so they are unchanged.
    with_inner_step = [path for path in SHIPPED
                       if "fast-lr" in config_keys(read_config_file(path).get("algorithm", "maml-trpo"))]
    assert with_inner_step and all({"gamma", "fast-lr"} <= set(read_config_file(path)) for path in with_inner_step)


def test_gradient_adaptation_keys_are_refused_for_rl2_unless_at_their_earlier_default():
    rl2 = {**{k: v for k, v in MINIMAL.items() if k != "fast-lr"}, "algorithm": "rl2-ppo"}
    with pytest.raises(ConfigError) as info:
        validate_config({**rl2, "fast-lr": 0.1, "num-steps": 3, "loss-averaging": "step"}, source="rl2.yaml")
    message = str(info.value)
    assert "key 'fast-lr' is a setting of algorithm 'maml-trpo' and 'promp', not of this configuration's " \
           "algorithm 'rl2-ppo'" in message
    assert "key 'num-steps' is a setting" in message and "loss-averaging" not in message  # its 0.1 default
    # A config.json of maml_rl 0.1 lists them at those values for every algorithm: they are dropped, so it loads.
    config = validate_config(rl2)
    assert "fast-lr" not in config and validate_config(config) == config
    earlier = {**config, "fast-lr": 0.5, "num-steps": 1, "loss-averaging": "step"}
    assert validate_config(earlier) == config
    with pytest.raises(ConfigError, match="key 'loss-averaging' is a setting"):
        validate_config({**config, "loss-averaging": "episode"})


def test_outer_kl_backtracks_need_an_outer_kl_limit():
    promp = {**MINIMAL, "algorithm": "promp"}
    with pytest.raises(ConfigError, match="outer-kl-backtracks: 3 shortens the steps that exceed outer-kl-limit, "
                                          "which is not set: set outer-kl-limit too"):
        validate_config({**promp, "outer-kl-backtracks": 3}, source="promp.yaml")
    config = validate_config({**promp, "outer-kl-backtracks": 3, "outer-kl-limit": 0.1})
    assert (config["outer-kl-backtracks"], config["outer-kl-limit"]) == (3, 0.1)
    assert validate_config(promp)["outer-kl-backtracks"] == 0
    with pytest.raises(ConfigError, match="outer-kl-backtracks: got -1"):
        validate_config({**promp, "outer-kl-backtracks": -1, "outer-kl-limit": 0.1})


@pytest.fixture
def second_algorithm(monkeypatch):
    """A made-up meta-learner, "toy", with one key of its own (clip-eps): added by a user, not shipped."""
    from maml_rl.config.hyperparameters import Hyperparameter, number
    from maml_rl.metalearners import MAMLTRPO, METALEARNERS
    from maml_rl.metalearners.gradient.keys import GRADIENT_KEYS

    class Toy(MAMLTRPO):
        # The inner loop's keys of every gradient-based learner, and one of its own.
        hyperparameters = (*GRADIENT_KEYS, Hyperparameter("clip-eps", float, 0.3, number(0.0, open_low=True),
                                                          "Clipping range.", argument="clip_eps"))

        def __init__(self, policy, *, clip_eps, **kwargs):
            super().__init__(policy, **kwargs)
            self.clip_eps = clip_eps

    monkeypatch.setitem(METALEARNERS, "toy", Toy)
    return Toy


def test_key_of_another_algorithm_is_refused(second_algorithm):
    with pytest.raises(ConfigError) as info:
        validate_config({**MINIMAL, "clip-eps": 0.2}, source="my.yaml")
    message = str(info.value)
    assert "key 'clip-eps' is a setting of algorithm 'toy', not of this configuration's algorithm 'maml-trpo'" in message
    assert "valid keys for algorithm 'maml-trpo' are: " + ", ".join(config_keys("maml-trpo")) in message

    with pytest.raises(ConfigError) as info:
        validate_config({**MINIMAL, "algorithm": "toy", "max-kl": 0.05})
    message = str(info.value)
    assert "key 'max-kl' is a setting of algorithm 'maml-trpo', not of this configuration's algorithm 'toy'" in message
    assert "valid keys for algorithm 'toy' are: " + ", ".join(config_keys("toy")) in message
    assert "clip-eps" in message and "cg-iters" not in message.split("valid keys")[1]

    config = validate_config({**MINIMAL, "algorithm": "toy"})
    assert config["clip-eps"] == 0.3 and "max-kl" not in config
    assert list(config) == list(config_keys("toy"))
    from maml_rl.metalearners import make_metalearner
    from maml_rl.policies import get_policy_for_env

    policy = get_policy_for_env(maml_rl.envs.make_env("2DNavigation-v0")(), hidden_sizes=(4,))
    learner = make_metalearner({**config, "clip-eps": 0.25}, policy)
    assert type(learner) is second_algorithm and learner.clip_eps == 0.25 and learner.fast_lr == 0.1


def test_every_algorithm_declares_its_keys_beside_it():
    """config/ holds only the shared keys; an algorithm's own are its learner's, in its own folder."""
    import sys

    from maml_rl.config.hyperparameters import SHARED_KEYS
    from maml_rl.metalearners import METALEARNERS

    shared = {h.key for h in SHARED_KEYS}
    for name, learner in METALEARNERS.items():
        assert not shared & {h.key for h in learner.hyperparameters}, name
        folder = learner.__module__.rsplit(".", 1)[0]
        assert folder != "maml_rl.metalearners", f"{name} has no folder of its own"
        declared = [h for value in vars(sys.modules[folder + ".keys"]).values() if isinstance(value, tuple)
                    for h in value]
        assert learner.hyperparameters and all(any(h is d for d in declared) for h in learner.hyperparameters), name


def test_docs_hold_the_key_reference():
    """docs/training.md holds `python -m maml_rl.app.config_files --markdown` between its markers."""
    text = (ROOT / "docs" / "training.md").read_text()
    match = re.search(r"<!-- config-keys:start -->\n(.*?)<!-- config-keys:end -->", text, re.DOTALL)
    assert match, "docs/training.md lacks the <!-- config-keys:start --> ... <!-- config-keys:end --> markers"
    assert match.group(1).strip() == markdown_reference().strip(), (
        "the key reference in docs/training.md is out of date: paste `python -m maml_rl.app.config_files --markdown` "
        "between its markers"
    )
    for key in all_config_keys():
        assert f"| `{key}` |" in match.group(1)


def test_loss_averaging_choices_are_those_of_the_losses():
    """hyperparameters.py may not import the episodes (they read its defaults): the choices must agree."""
    from maml_rl.data.episodes import LOSS_AVERAGING

    assert all_config_keys()["loss-averaging"].expected == " or ".join(f'"{value}"' for value in LOSS_AVERAGING)
    for value in LOSS_AVERAGING:
        assert validate_config({**MINIMAL, "loss-averaging": value})["loss-averaging"] == value
