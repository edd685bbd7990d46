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
old, new = sys.argv[1], sys.argv[2]
with warnings.catch_warnings(record=True) as caught:
    exec(f"import {old} as a")  # an import statement, as a user's script has (its line is "<string>" here)
    exec(f"import {old} as again")
b = importlib.import_module(new)
dupes = sorted(m for m in sys.modules if m.startswith(old + ".") and sys.modules[m] is not
               sys.modules.get(new + m[len(old):]))
print(json.dumps({"same": a is b and again is b, "name": a.__name__, "dupes": dupes,
                  "warnings": [(type(w.message).__name__, str(w.message), w.filename) for w in caught]}))
"""


def probe(old: str, new: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, old, new], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_path_is_the_moved_module_itself_and_warns_once_at_the_users_line(old):
    new, warns = MOVED_MODULES[old]
    seen = probe(old, new)
    assert seen["same"] and seen["name"] == new
    assert seen["dupes"] == []
    legacy = [w for w in seen["warnings"] if w[0] == "LegacyAPIWarning"]
    if warns:
        assert len(legacy) == 1, seen["warnings"]  # imported twice, warned once
        (_, message, filename), = legacy
        assert f"it moved to {new}" in message and filename == "<string>"
    else:
        assert legacy == []  # pytorch-maml-rl's maml_rl.baseline, promised unchanged


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
