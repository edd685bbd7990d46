"""Config files cannot hang the scripts: YAML is bounded (aliases' expansion, nesting), values are echoed
clipped in every error, merge keys share blocks as standard YAML does, and no tag builds an object."""

import json
import time

import pytest
import yaml

from maml_rl.app.config_files import ConfigError, config_diff, load_config, parse_override, validate_config
from maml_rl.config.yaml_rules import MAX_DEPTH, MAX_VALUES, ConfigLoader
from maml_rl.utils.echo import ECHO_LIMIT, echo

from helpers import ROOT

MINIMAL = {"env-name": "2DNavigation-v0", "hidden-sizes": [8], "nonlinearity": "tanh", "fast-batch-size": 2,
           "fast-lr": 0.1, "num-batches": 1, "meta-batch-size": 2}


def minimal_yaml(**changes: str) -> str:
    values = {key: json.dumps(value) for key, value in MINIMAL.items()}
    values.update(changes)
    return "".join(f"{key}: {value}\n" for key, value in values.items())


def alias_bomb(levels: int, width: int) -> str:
    """A flow list whose anchors each repeat the previous one ``width`` times: ``width ** levels`` leaves."""
    names = [f"a{level}" for level in range(levels)]
    lists = [f"&{names[0]} [{', '.join(['1'] * width)}]"]
    lists += [f"&{names[i]} [{', '.join([f'*{names[i - 1]}'] * width)}]" for i in range(1, levels)]
    return "[" + ", ".join(lists) + "]"


def refused(path, *overrides, within: float = 5.0) -> str:
    """The ConfigError message of loading ``path``, which must come within ``within`` seconds."""
    start = time.perf_counter()
    with pytest.raises(ConfigError) as error:
        load_config(path, [parse_override(text) for text in overrides])
    assert time.perf_counter() - start < within
    return str(error.value)


# ---------------------------------------------------------------------------------------------- aliases
def test_an_alias_bomb_is_refused_at_once_naming_the_aliases(tmp_path):
    """600 bytes that expand to 9**9 items hung train.py at 1.6 GB: the error message repr'd the value."""
    path = tmp_path / "bomb.yaml"
    path.write_text(minimal_yaml(**{"hidden-sizes": alias_bomb(9, 9)}))
    assert path.stat().st_size < 700
    message = refused(path)
    assert f"more than {MAX_VALUES} values once its aliases (*name) are expanded" in message
    assert len(message) < 1000


def test_a_small_alias_bomb_is_refused_too_rather_than_echoed(tmp_path):
    """9**6 leaves: old code answered, with a message of megabytes."""
    path = tmp_path / "bomb.yaml"
    path.write_text(minimal_yaml(**{"hidden-sizes": alias_bomb(6, 9)}))
    message = refused(path)
    assert "aliases" in message and len(message) < 1000


def test_an_alias_bomb_in_a_set_option_is_refused():
    with pytest.raises(ConfigError, match="aliases"):
        parse_override("env-kwargs.low=" + alias_bomb(9, 9))


def test_an_alias_that_contains_itself_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text(minimal_yaml(**{"hidden-sizes": "&h [8, *h]"}))
    assert "an alias refers to a list or mapping it is part of" in refused(path)


def test_aliases_short_of_the_bound_are_read_as_shared_values(tmp_path, monkeypatch):
    path = tmp_path / "shared.yaml"
    path.write_text(minimal_yaml(**{"hidden-sizes": "&size [16, 16]", "env-kwargs": "{low: -0.5, high: 0.5}"})
                    + "seed: 3\n")
    assert load_config(path)["hidden-sizes"] == [16, 16]
    # Exactly at the bound: a list and its 9 aliased items are 10 values; one more item is refused.
    monkeypatch.setattr("maml_rl.config.yaml_rules.MAX_VALUES", 10)
    assert yaml.load(f"[&x 1{', *x' * 8}]", Loader=ConfigLoader) == [1] * 9
    with pytest.raises(yaml.YAMLError, match="more than 10 values"):
        yaml.load(f"[&x 1{', *x' * 9}]", Loader=ConfigLoader)


# ---------------------------------------------------------------------------------------------- nesting
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_deep_nesting_is_refused_without_a_recursion_error(tmp_path, suffix):
    """5,000 levels gave a RecursionError traceback."""
    path = tmp_path / f"deep{suffix}"
    path.write_text(json.dumps({**MINIMAL, "hidden-sizes": "X"}).replace('"X"', "[" * 5000 + "]" * 5000))
    message = refused(path)
    assert "levels deep" in message and len(message) < 1000


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_nesting_at_the_bound_is_read_and_one_more_is_refused(tmp_path, suffix):
    path = tmp_path / f"nested{suffix}"
    # The file's mapping is one level, env-kwargs' mapping another: MAX_DEPTH - 2 lists inside it.
    inner = "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    path.write_text(json.dumps({**MINIMAL, "env-kwargs": {"deep": "X"}}).replace('"X"', inner))
    assert load_config(path)["env-kwargs"]["deep"] == eval(inner)  # read, then refused by the env below
    path.write_text(json.dumps({**MINIMAL, "env-kwargs": {"deep": "X"}}).replace('"X"', f"[{inner}]"))
    assert f"nested more than {MAX_DEPTH} levels deep" in refused(path)


def test_aliases_that_nest_deeper_than_the_bound_are_refused():
    """Each alias adds its anchor's depth: 8 aliases of 10 levels nest 80 deep in 200 bytes."""
    text = "x0: &x0 [[[[[[[[[[1]]]]]]]]]]\n" + "".join(f"x{i}: &x{i} [[[[[[[[[[*x{i - 1}]]]]]]]]]]\n"
                                                    for i in range(1, 8))
    with pytest.raises(yaml.YAMLError, match="levels deep"):
        yaml.load(text, Loader=ConfigLoader)


# ---------------------------------------------------------------------------------------------- echoes
def test_a_huge_string_value_is_echoed_clipped(tmp_path):
    """A 900 KB value was echoed in full, twice."""
    path = tmp_path / "long.yaml"
    path.write_text(minimal_yaml(nonlinearity="x" * 300_000))
    message = refused(path)
    assert "nonlinearity: got 'xxxx" in message and "..." in message
    assert len(message) < 1500


def test_every_echoed_value_is_clipped():
    bomb = [1] * 10
    for _ in range(6):  # 10**7 items, shared: repr would build ~30 MB
        bomb = [bomb] * 10
    start = time.perf_counter()
    for value in (bomb, "y" * 10**6, {"k" * 10**6: 1}, list(range(10**6))):
        with pytest.raises(ConfigError) as error:
            validate_config({**MINIMAL, "hidden-sizes": value, "algorithm": value, "k" * 10**6: value})
        assert len(str(error.value)) < 6 * ECHO_LIMIT + 1500  # three echoes of each, the text around them
        with pytest.raises(ConfigError) as error:
            validate_config({**MINIMAL, "env-kwargs": {"max_episode_steps": value}})
        assert len(str(error.value)) < ECHO_LIMIT + 500
        assert all(len(line) < 2 * ECHO_LIMIT + 40 for line in config_diff({"a": value}, {"a": 1}))
    assert time.perf_counter() - start < 5


def test_echo_is_repr_for_what_fits_and_clipped_beyond():
    for value in (0.1, -3, None, True, "tanh", [64, 64], {"low": -1, "high": 1}, {"b": 1, "a": 2}):
        assert echo(value) == repr(value)  # the mapping's order kept, as repr keeps it
    assert echo("z" * 1000) .startswith("'zzz") and len(echo("z" * 1000)) <= ECHO_LIMIT
    assert len(echo(list(range(1000)))) <= ECHO_LIMIT and echo(list(range(1000))).endswith("...]")
    assert echo([[[[[[1]]]]]]) == "[[[[[...]]]]]"
    assert len(echo("q" * 50, limit=20)) == 20


# ---------------------------------------------------------------------------------------------- merge keys
def test_merge_keys_share_a_block_as_yaml_defines_them(tmp_path):
    """`<<: *defaults` was refused with a constructor error."""
    path = tmp_path / "merged.yaml"
    path.write_text(minimal_yaml(**{"env-kwargs": "{<<: [{low: -2.0, high: 2.0}, {low: -9.0, size: 4}], high: 1.0}"}))
    assert yaml.load(path.read_text(), Loader=ConfigLoader)["env-kwargs"] == {"low": -2.0, "high": 1.0, "size": 4}
    text = """
shared: &shared {fast-lr: 0.1, gamma: 0.9}
tuned: &tuned
  <<: *shared
  gamma: 0.95
run:
  <<: *tuned
  fast-lr: 0.5
"""
    assert yaml.load(text, Loader=ConfigLoader)["run"] == {"fast-lr": 0.5, "gamma": 0.95}
    # A whole config from a shared block, its own keys overriding.
    shipped = (ROOT / "configs/maml/2d-navigation.yaml").read_text().replace("\n", "\n  ")
    path.write_text(f"<<:\n  {shipped}\nfast-lr: 0.25\n")
    assert load_config(path) == {**load_config(ROOT / "configs/maml/2d-navigation.yaml"), "fast-lr": 0.25}


def test_a_key_given_twice_beside_a_merge_is_still_refused():
    with pytest.raises(yaml.YAMLError, match="'fast-lr' is given twice, on line 2 and on line 4"):
        yaml.load("run:\n  fast-lr: 1\n  <<: {gamma: 2}\n  fast-lr: 3\n", Loader=ConfigLoader)
    with pytest.raises(yaml.YAMLError, match="expected a mapping or list of mappings for merging"):
        yaml.load("run:\n  <<: [1]\n", Loader=ConfigLoader)


def test_no_tag_builds_an_object_not_even_through_a_merge(tmp_path):
    marker = tmp_path / "ran"
    for text in (f"x: !!python/object/apply:os.system ['touch {marker}']\n",
                 f"a: &a {{y: !!python/object/apply:os.system ['touch {marker}']}}\nb: {{<<: *a}}\n"):
        with pytest.raises(yaml.YAMLError, match="could not determine a constructor"):
            yaml.load(text, Loader=ConfigLoader)
    assert not marker.exists()
