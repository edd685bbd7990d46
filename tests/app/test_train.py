"""train.py: output files, metrics, resume after faults, fail-fast errors and the command line (that a resume
equals an uninterrupted run, for every algorithm: tests/metalearners/test_learner_contract.py)."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from maml_rl.app.config_files import ConfigError, load_config
from maml_rl.metalearners.gradient import maml_trpo

from helpers import ROOT
from helpers.runs import assert_same_policy, load_policy, read_metrics, run
from helpers.scripts import train

METRIC_KEYS = {
    "iteration", "return_before", "return_after", "env_steps", "total_env_steps",
    "loss_before", "loss_after", "kl_before", "kl_after", "time_sampling", "time_optimization",
}


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, small_config):
    """Three uninterrupted iterations with seed 7."""
    folder = tmp_path_factory.mktemp("reference")
    run(small_config(folder), folder / "run", "--seed", "7")
    return folder / "run"


def test_output_files(reference_run, small_config):
    config = json.loads((reference_run / "config.json").read_text())
    assert config == {**load_config(ROOT / "configs/maml/2d-navigation.yaml"), **small_config.values, "seed": 7}

    policy = load_policy(reference_run)
    assert policy["layer1.weight"].shape == (16, 2)

    checkpoint = torch.load(reference_run / "checkpoint.pt", weights_only=False)
    assert checkpoint["iteration"] == 3
    assert checkpoint["config"] == config
    assert checkpoint["sampler"]["seed"] == 7
    assert {"policy", "sampler", "rng", "counters"} <= set(checkpoint)
    assert "baseline" not in checkpoint  # refitted on every batch: no state to keep
    assert_same_policy(checkpoint["policy"], policy)
    assert not list(reference_run.glob(".*.tmp"))  # no temporary file left behind

    metrics = read_metrics(reference_run)
    assert [record["iteration"] for record in metrics] == [0, 1, 2]
    for record in metrics:
        assert METRIC_KEYS <= set(record)
        assert {"time_adapt", "time_cg", "time_line_search"} <= set(record)  # the meta-learner's own split
        # Every episode lasts 10 steps at most: tasks * episodes * (1 train + 1 valid batch).
        assert 0 < record["env_steps"] <= 3 * 4 * 10 * 2
    assert metrics[-1]["total_env_steps"] == sum(record["env_steps"] for record in metrics)
    assert checkpoint["counters"]["total_env_steps"] == metrics[-1]["total_env_steps"]


def test_resume_after_a_run_killed_mid_iteration(reference_run, tmp_path, monkeypatch, small_config):
    """Killed after the sampler has moved on but before the checkpoint: the iteration is redone identically."""
    original_step = maml_trpo.MAMLTRPO.step
    calls = []

    def step_then_die(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original_step(self, *args, **kwargs)

    monkeypatch.setattr(maml_trpo.MAMLTRPO, "step", step_then_die)
    with pytest.raises(KeyboardInterrupt):
        run(small_config(tmp_path), tmp_path / "run", "--seed", "7")
    assert [record["iteration"] for record in read_metrics(tmp_path / "run")] == [0]
    # A line half-written when the process died is dropped on resume.
    with open(tmp_path / "run" / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 1, "return_be')
    monkeypatch.setattr(maml_trpo.MAMLTRPO, "step", original_step)

    run(small_config(tmp_path), tmp_path / "run", "--resume")
    assert_same_policy(load_policy(tmp_path / "run"), load_policy(reference_run))
    assert [record["iteration"] for record in read_metrics(tmp_path / "run")] == [0, 1, 2]


def test_resume_a_run_killed_before_its_first_checkpoint(reference_run, tmp_path, small_config):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text((reference_run / "config.json").read_text())
    (folder / ".checkpoint.pt.123.abcd.tmp").write_bytes(b"partial")
    run(small_config(tmp_path), folder, "--resume")
    assert_same_policy(load_policy(folder), load_policy(reference_run))
    assert not list(folder.glob(".*.tmp"))


def test_resume_a_run_saved_before_a_defaulted_key_existed(reference_run, tmp_path, small_config):
    """A run written before loss-averaging existed resumes with its default, as if the key were written."""
    folder = tmp_path / "run"
    run(small_config(tmp_path), folder, "--seed", "7", "--num-batches", "1")
    saved = json.loads((folder / "config.json").read_text())
    assert saved.pop("loss-averaging") == "step"
    (folder / "config.json").write_text(json.dumps(saved))
    checkpoint = torch.load(folder / "checkpoint.pt", weights_only=False)
    del checkpoint["config"]["loss-averaging"]
    torch.save({**checkpoint, "version": 1}, folder / "checkpoint.pt")  # such checkpoints were unsealed version 1

    run(small_config(tmp_path), folder, "--resume", "--num-batches", "3")
    assert_same_policy(load_policy(folder), load_policy(reference_run))


def test_resume_refuses_a_checkpoint_of_another_configuration(tmp_path, small_config):
    folder = tmp_path / "run"
    run(small_config(tmp_path), folder, "--seed", "7", "--num-batches", "1")
    checkpoint = torch.load(folder / "checkpoint.pt", weights_only=False)
    checkpoint["config"]["loss-averaging"] = "episode"
    torch.save({**checkpoint, "version": 1}, folder / "checkpoint.pt")  # unsealed: the version before the checksum
    with pytest.raises(ConfigError, match="loss-averaging: 'episode' -> 'step'"):
        run(small_config(tmp_path), folder, "--resume", "--num-batches", "2")

def test_mujoco_env(tmp_path, small_config):
    config = small_config(
        tmp_path, **{"env-name": "HalfCheetahVel-v5", "fast-batch-size": 2, "meta-batch-size": 2, "num-batches": 1,
                     "env-kwargs": {"low": 0.0, "high": 2.0, "normalization_scale": 10.0, "max_episode_steps": 10}}
    )
    run(config, tmp_path / "run", "--seed", "1")
    (record,) = read_metrics(tmp_path / "run")
    assert record["env_steps"] == 2 * 2 * 10 * 2  # no early termination in HalfCheetah
    assert load_policy(tmp_path / "run")["layer1.weight"].shape == (16, 20)


def test_two_inner_steps(tmp_path, small_config):
    run(small_config(tmp_path, **{"num-steps": 2, "num-batches": 1, "first-order": True}), tmp_path / "run")
    (record,) = read_metrics(tmp_path / "run")
    assert 0 < record["env_steps"] <= 3 * 4 * 10 * 3


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"fast_lr": 0.1}, "unknown key 'fast_lr' (did you mean 'fast-lr'?)"),
        ({"fast-lr": "0.1"}, "fast-lr: got '0.1' (str), expected a number > 0"),
        ({"fast-batch-size": -4}, "fast-batch-size: got -4 (int), expected an integer >= 1"),
        ({"env-name": "HalfCheetahVel-v4"}, "HalfCheetahVel-v5"),
        ({"env-kwargs": {"goal_radius": 1}}, "env-kwargs: 2DNavigation-v0 takes no argument 'goal_radius'"),
    ],
)
def test_config_errors_stop_before_any_work(tmp_path, changes, message, small_config):
    with pytest.raises(ConfigError) as info:
        run(small_config(tmp_path, **changes), tmp_path / "run")
    assert message in str(info.value)
    assert not (tmp_path / "run").exists()


def test_run_folder_is_protected(reference_run, tmp_path, small_config):
    config = small_config(tmp_path)
    with pytest.raises(ConfigError, match="already holds a training run"):
        run(config, reference_run)
    # --resume where there is no run yet starts one: the same command starts, then continues a run.
    run(config, tmp_path / "fresh", "--resume", "--seed", "7")
    assert_same_policy(load_policy(tmp_path / "fresh"), load_policy(reference_run))
    with pytest.raises(ConfigError, match=r"(?s)differs from the run's configuration.*fast-lr: 0.1 -> 0.2"):
        run(config, reference_run, "--resume", "--set", "fast-lr=0.2")
    with pytest.raises(ConfigError, match="only num-batches may change"):  # the run's own configuration
        train.main(["--output-folder", str(reference_run), "--resume", "--set", "fast-lr=0.2", "--num-workers", "0"])
    with pytest.raises(ConfigError, match="--seed 8 differs"):
        run(config, reference_run, "--resume", "--seed", "8")
    with pytest.raises(ConfigError, match="differs from the run's"):
        run(small_config(tmp_path, gamma=0.9), reference_run, "--resume")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_unavailable_is_an_error(tmp_path, small_config):
    with pytest.raises(ConfigError, match="CUDA is not available"):
        run(small_config(tmp_path), tmp_path / "run", "--device", "cuda")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_command_line(tmp_path, small_config):
    """train.py then test.py as real processes, with one sampler worker process."""
    config = small_config(tmp_path, **{"num-batches": 1})
    folder = tmp_path / "run"
    subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "--config", str(config), "--output-folder", str(folder),
         "--num-workers", "1", "--seed", "3"],
        check=True, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert json.loads((folder / "config.json").read_text())["seed"] == 3
    assert len(read_metrics(folder)) == 1
    result = subprocess.run(
        [sys.executable, str(ROOT / "test.py"), "--config", str(folder / "config.json"), "--policy",
         str(folder / "policy.th"), "--output", str(folder / "results.npz"), "--num-workers", "0",
         "--meta-batch-size", "2"],
        check=True, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert "step | mean return" in result.stdout
    assert (folder / "results.npz").is_file()


@pytest.mark.slow
def test_command_line_config_error(tmp_path, small_config):
    result = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "--config", str(small_config(tmp_path, **{"meta-batch-size": 0})),
         "--output-folder", str(tmp_path / "run")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert "error: invalid configuration" in result.stderr
    assert "meta-batch-size: got 0 (int), expected an integer >= 1" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_tensorboard_only_when_installed(reference_run):
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        assert not (reference_run / "tensorboard").exists()
    else:
        assert list((reference_run / "tensorboard").glob("events.out.tfevents.*"))


def test_a_finished_run_says_nothing_to_do_without_a_bar(reference_run, tmp_path, capsys, small_config):
    """A finished run showed a spurious `100% 2/2` bar before 'nothing to do'."""
    folder = tmp_path / "run"
    run(small_config(tmp_path), folder, "--seed", "7", "--num-batches", "2")
    capsys.readouterr()
    run(small_config(tmp_path), folder, "--resume", "--num-batches", "2")
    err = capsys.readouterr().err
    assert err.strip() == f"{folder}: the run already has 2 of 2 iterations; nothing to do"


def test_the_command_to_continue_is_the_one_that_started_the_run_with_resume():
    """The stop message said '(same --output-folder)' even when none was given."""
    assert train.continue_command(["--config", "c.yaml", "--set", "fast-lr=0.2", "--ov", "--seed", "3"]) == \
        "python train.py --config c.yaml --set fast-lr=0.2 --seed 3 --output-folder runs/c --resume"
    assert train.continue_command(["--output-folder", "my runs/x", "--resume", "--seeds", "1", "2"], "t/train.py") == \
        "python t/train.py --output-folder 'my runs/x' --resume --seeds 1 2"


def start(tmp_path, *args):
    # SIGINT as a terminal gives it, whatever pytest inherited (a shell's background job ignores it).
    return subprocess.Popen([sys.executable, str(ROOT / "train.py"), *map(str, args)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.slow
def test_ctrl_c_prints_the_command_that_continues_the_run(tmp_path, small_config):
    config = small_config(tmp_path, **{"num-batches": 1000})
    process = start(tmp_path, "--config", config, "--num-workers", "0", "--seed", "7")
    metrics = tmp_path / "runs" / "small" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.exists() and metrics.read_text().strip()):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    command = (f"python {ROOT / 'train.py'} --config {config} --num-workers 0 --seed 7 "
               "--output-folder runs/small --resume")
    assert err.rstrip().endswith(f"interrupted: continue with --resume:\n  {command}"), err
    assert "Traceback" not in err


@pytest.mark.slow
def test_ctrl_c_while_importing_exits_quietly(tmp_path):
    """Ctrl-C in train.py's first second (its imports) printed a 30-line KeyboardInterrupt traceback."""
    process = start(tmp_path, "--num-batches", "1")
    deadline = time.monotonic() + 60
    # Once torch's library is mapped the script is inside its imports, well before main() runs.
    while "libtorch" not in Path(f"/proc/{process.pid}/maps").read_text():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.strip() == "interrupted while train.py was starting; nothing was done", err
    assert not (tmp_path / "runs").exists()
