"""The module paths of maml_rl 0.1 still import, each as the very module it moved to, in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from maml_rl.legacy.moved import MOVED_MODULES

pytestmark = pytest.mark.processes

PROBE = """
import importlib, json, sys, warnings
warnings.simplefilter("always")
pairs = json.loads(sys.argv[1])
for old, new in pairs:
    with warnings.catch_warnings(record=True) as caught:
        exec(f"import {old} as a")  # an import statement, as a user's script has (its line is "<string>" here)
        exec(f"import {old} as again")
    b = importlib.import_module(new)
    dupes = sorted(m for m in sys.modules if m.startswith(old + ".") and sys.modules[m] is not
                   sys.modules.get(new + m[len(old):]))
    print(json.dumps({"same": a is b and again is b, "name": a.__name__, "dupes": dupes,
                      "warnings": [(type(w.message).__name__, str(w.message), w.filename) for w in caught]}))
"""


def probe_all(pairs: list) -> list:
    """What importing each ``(old, new)`` pair, in order, in one fresh process saw."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(pairs)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()[-len(pairs):]]


def probe(old: str, new: str) -> dict:
    return probe_all([[old, new]])[0]


def check(old: str, seen: dict) -> None:
    new, warns = MOVED_MODULES[old]
    assert seen["same"] and seen["name"] == new
    assert seen["dupes"] == []
    legacy = [w for w in seen["warnings"] if w[0] == "LegacyAPIWarning"]
    if warns:
        assert len(legacy) == 1, seen["warnings"]  # imported twice, warned once
        (_, message, filename), = legacy
        assert f"it moved to {new}" in message and filename == "<string>"
    else:
        assert legacy == []  # pytorch-maml-rl's maml_rl.baseline, promised unchanged


# A process per old path costs ~2 s (torch's import): the quick tier takes one of each kind (unchanged, a
# package, a module under a moved package) and all of them in one process below; the full tier every one alone.
QUICK_ALONE = {"maml_rl.baseline", "maml_rl.runs", "maml_rl.metalearners.pearl.state"}


@pytest.mark.parametrize("old", [old if old in QUICK_ALONE else pytest.param(old, marks=pytest.mark.slow)
                                 for old in sorted(MOVED_MODULES)])
def test_an_old_path_is_the_moved_module_itself_and_warns_once_at_the_users_line(old):
    check(old, probe(old, MOVED_MODULES[old][0]))


@pytest.mark.parametrize("order", ["sorted", "reversed"])
def test_every_old_path_one_after_another_in_one_process(order):
    """Each old path still warns once at its own first import when others (and their new modules) came first."""
    olds = sorted(MOVED_MODULES, reverse=order == "reversed")
    for old, seen in zip(olds, probe_all([[old, MOVED_MODULES[old][0]] for old in olds])):
        check(old, seen)


def test_a_module_under_a_moved_package_is_not_loaded_twice():
    seen = probe("maml_rl.runs.checkpoints", "maml_rl.app.runs.checkpoints")
    assert seen["same"] and seen["dupes"] == []
    code = ("import maml_rl.runs.checkpoints as a, maml_rl.app.runs.checkpoints as b; "
            "print(a.safe_load is b.safe_load)")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


def test_the_old_config_module_names_resolve_with_a_warning_and_unknown_ones_fail():
    from maml_rl.app import config_files as loading
    from maml_rl.legacy.warn import LegacyAPIWarning

    import maml_rl.config as config

    with pytest.warns(LegacyAPIWarning, match=r"maml_rl.app.config_files.load_config"):
        assert config.load_config is loading.load_config
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        config.no_such_name  # noqa: B018


def test_an_unrelated_name_is_left_to_the_normal_import_system():
    with pytest.raises(ModuleNotFoundError):
        __import__("maml_rl.no_such_module")
