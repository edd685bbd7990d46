"""The check at ``import maml_rl.envs`` of a MuJoCo install that pip left broken, and its repair commands."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from maml_rl.envs.install_check import Distribution, check_mujoco_install, mujoco_install_problem, repair_commands

ROOT = Path(__file__).resolve().parents[2]
TO_FOUR = ("pip uninstall -y mujoco && pip install --force-reinstall --no-deps mujoco==4.0.0 mujoco-core==4.0.0 "
           "mujoco-studio==4.0.0")
TO_THREE = "pip uninstall -y mujoco-core mujoco-studio && pip install --force-reinstall --no-deps mujoco==3.3.0"


@pytest.mark.parametrize("installed", [
    {},  # no MuJoCo: the envs that need it say so when built
    {"mujoco": Distribution("3.3.0")},  # Meta-World's own venv
    {name: Distribution("4.0.0") for name in ("mujoco", "mujoco-core", "mujoco-studio")},
    {"mujoco": Distribution("4.0.0"), "mujoco-core": Distribution("4.0.0")},
])
def test_installs_that_fit_together_pass(installed):
    assert mujoco_install_problem(installed) is None


def test_meta_worlds_mujoco_over_mujoco_4_is_named_with_both_repairs():
    problem = mujoco_install_problem({"mujoco": Distribution("3.3.0"), "mujoco-core": Distribution("4.0.0"),
                                      "mujoco-studio": Distribution("4.0.0")})
    assert "mujoco 3.3.0 is installed over MuJoCo 4" in problem
    assert "mujoco-core 4.0.0, mujoco-studio 4.0.0 stayed behind" in problem
    assert TO_FOUR in problem and TO_THREE in problem


def test_mismatched_mujoco_4_parts_are_named():
    problem = mujoco_install_problem({"mujoco": Distribution("4.0.1"), "mujoco-core": Distribution("4.0.0"),
                                      "mujoco-studio": Distribution("4.0.1")})
    assert "found mujoco-core 4.0.0" in problem
    assert "mujoco==4.0.1 mujoco-core==4.0.1 mujoco-studio==4.0.1" in problem
    assert "found mujoco-core not installed" in mujoco_install_problem({"mujoco": Distribution("4.0.0")})


def test_files_another_install_removed_are_named():
    # `pip install mujoco==4.0.0` after 3.3.0 over 4: the versions agree again, but 3.3's uninstall took
    # the extension modules it shared with mujoco-core.
    problem = mujoco_install_problem({
        "mujoco": Distribution("4.0.0"),
        "mujoco-core": Distribution("4.0.0", ["mujoco/_structs.cpython-311-x86_64-linux-gnu.so", "mujoco/_specs.so"]),
        "mujoco-studio": Distribution("4.0.0")})
    assert "mujoco-core 4.0.0 lacks files of its install (mujoco/_structs.cpython-311-x86_64-linux-gnu.so and 1 more)" \
        in problem
    assert TO_FOUR in problem


def test_repair_keeps_the_installed_4x_version():
    assert repair_commands("4.2.1")[0].endswith("mujoco==4.2.1 mujoco-core==4.2.1 mujoco-studio==4.2.1")
    assert repair_commands("3.3.0") == (TO_FOUR, TO_THREE)


def test_this_venv_passes():
    check_mujoco_install()


@pytest.mark.processes
def test_import_refuses_a_broken_install(tmp_path):
    """``import maml_rl.envs`` where the installed metadata is that of Meta-World's MuJoCo over MuJoCo 4
    (dist-info folders first on the path, as pip leaves them) fails at once with the cause and the repair."""
    for name, version in (("mujoco", "3.3.0"), ("mujoco_core", "4.0.0"), ("mujoco_studio", "4.0.0")):
        info = tmp_path / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", "import maml_rl.envs"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert "BrokenMuJoCoInstallError: the MuJoCo install is broken: mujoco 3.3.0 is installed over MuJoCo 4" \
        in done.stderr
    assert TO_FOUR in done.stderr and TO_THREE in done.stderr
