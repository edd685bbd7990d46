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


def probe(old, new):
    names = {}
    with warnings.catch_warnings(record=True) as caught:
        exec(f"import {old} as a", names)  # an import statement, as a user's script has (its line is "<string>")
        exec(f"import {old} as again", names)
    a, again, b = names["a"], names["again"], importlib.import_module(new)
    dupes = sorted(m for m in sys.modules if m.startswith(old + ".") and sys.modules[m] is not
                   sys.modules.get(new + m[len(old):]))
    return {"same": a is b and again is b, "name": a.__name__, "dupes": dupes,
            "warnings": [(type(w.message).__name__, str(w.message), w.filename) for w in caught]}


pairs = json.loads(sys.argv[1])
if sys.argv[2] == "in-turn":
    for old, new in pairs:
        print(json.dumps(probe(old, new)))
else:
    # Each pair alone: a child forked before anything of maml_rl is imported, so each old path is the first of
    # the package to load, as in a fresh process. torch comes first, once: its import (~2 s) was most of a fresh
    # process's cost, and the package does not depend on whether it was loaded before.
    import os, traceback
    import torch  # noqa: F401
    assert not any(m == "maml_rl" or m.startswith("maml_rl.") for m in sys.modules)
    for old, new in pairs:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                print(json.dumps(probe(old, new)))
            except BaseException:
                print(json.dumps({"error": traceback.format_exc()}))
            sys.stdout.flush()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, (old, status)
"""


def probe_all(pairs: list, alone: bool = False) -> list:
    """What importing each ``(old, new)`` pair saw: in order in one fresh process, or each ``alone`` (see PROBE)."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(pairs), "alone" if alone else "in-turn"],
                          capture_output=True, text=True, timeout=120)
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


# Each old path alone, the first of the package to load (a forked child each, see PROBE): the quick tier one of
# each kind (unchanged, a package, a module under a moved package), the full tier the others.
QUICK_ALONE = {"maml_rl.baseline", "maml_rl.runs", "maml_rl.metalearners.pearl.state"}


@pytest.mark.parametrize("olds", [pytest.param(sorted(QUICK_ALONE), id="quick"),
                                  pytest.param(sorted(set(MOVED_MODULES) - QUICK_ALONE), id="others",
                                               marks=pytest.mark.slow)])
def test_an_old_path_is_the_moved_module_itself_and_warns_once_at_the_users_line(olds):
    seen = probe_all([[old, MOVED_MODULES[old][0]] for old in olds], alone=True)
    assert len(seen) == len(olds)
    for old, one in zip(olds, seen):
        assert "error" not in one, (old, one.get("error"))
        check(old, one)


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
