"""A policy whose actions are not finite (diverged or damaged parameters) ends train.py and test.py with a
message saying what happened and what to do, exit status 1, and no traceback."""

import os
import signal
import subprocess
import sys

import pytest

from maml_rl.app.command_line import EVALUATION_DIVERGED, TRAINING_DIVERGED, run_script
from maml_rl.samplers.errors import PolicyOutputError

from helpers import ROOT


def test_a_policy_output_error_is_a_message_with_what_to_do(capsys):
    def main():
        raise PolicyOutputError("the policy P returned the non-finite action [nan] at step 0")

    # run_script installs signal handlers: this process's own are restored after.
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as exit:
            run_script(main, on_stop="never printed", on_policy_error="Lower the step.")
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert exit.value.code == 1
    assert capsys.readouterr().err == "error: the policy P returned the non-finite action [nan] at step 0\nLower the step.\n"


def script(name: str, *args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / name), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def assert_refused_with(result: subprocess.CompletedProcess, advice: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.rstrip("\n").split("\n")[-2:]
    assert last[0].startswith("error: the policy NormalMLPPolicy returned the non-finite action")
    assert last[1] == advice


@pytest.mark.slow
def test_train_py_with_a_step_that_overflows_says_what_to_lower(tmp_path, small_config):
    config = small_config(tmp_path, **{"fast-lr": 1e300})
    result = script("train.py", "--config", config, "--output-folder", tmp_path / "run", "--num-workers", "0",
                    "--num-batches", "1", cwd=tmp_path)
    assert_refused_with(result, TRAINING_DIVERGED)


@pytest.mark.slow
def test_test_py_with_a_diverged_policy_says_so(tmp_path, small_config):
    import torch

    from maml_rl.app.config_files import build_env, load_config
    from maml_rl.app.runs.files import atomic_save
    from maml_rl.metalearners import make_policy

    config = small_config(tmp_path)
    env = build_env(load_config(config))
    state = make_policy(load_config(config), env).state_dict()
    env.close()
    state["sigma"] = torch.full_like(state["sigma"], 2e37)  # the log-std: every sample is infinite
    atomic_save(state, tmp_path / "diverged.th", checksum=True)
    result = script("test.py", "--config", config, "--policy", tmp_path / "diverged.th", "--num-workers", "0",
                    "--output", tmp_path / "results.npz", cwd=tmp_path)
    assert_refused_with(result, EVALUATION_DIVERGED)
    assert not (tmp_path / "results.npz").exists()
