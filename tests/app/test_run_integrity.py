"""Runs that nothing corrupts: one writer per folder, checkpoint writes that a signal or a full disk
cannot turn into a traceback, checkpoints that prove their bits, refusals that change no file, and
configurations that cannot fit refused before the folder exists."""

import errno
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from maml_rl.app.runs.checksum import ChecksumMismatch, verify_digest
from maml_rl.app.runs.files import RunWriteError, atomic_save
from maml_rl.app.runs.lock import RunFolderBusy, RunLock, writer_of
from maml_rl.app.config_files import ConfigError, load_config

from helpers import ROOT
from helpers.runs import load_policy, read_metrics, run

pytestmark = pytest.mark.processes


def snapshot(folder):
    """Every file of a folder and its bytes (the lock file aside: it records who holds the folder)."""
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file() and p.name != ".lock"}


def start(cwd, *args, ignore_sigint=False):
    """train.py in a subprocess, with SIGINT as a terminal gives it (or ignored, as a shell's background job)."""
    disposition = signal.SIG_IGN if ignore_sigint else signal.SIG_DFL
    return subprocess.Popen([sys.executable, str(ROOT / "train.py"), *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, disposition))


def wait_for_rows(process, metrics, rows=1, timeout=120):
    deadline = time.monotonic() + timeout
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= rows):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------ one writer
def test_the_lock_names_its_holder_and_dies_with_it(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from maml_rl.app.runs.lock import RunLock
        lock = RunLock({str(tmp_path)!r})
        lock.acquire()
        print("held", flush=True)
        time.sleep(120)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert writer_of(tmp_path) == holder.pid
        with pytest.raises(RunFolderBusy, match=rf"being written by another train.py \(process {holder.pid}\)"):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    # Killed without a chance to clean up: the OS released the lock.
    assert writer_of(tmp_path) is None
    with RunLock(tmp_path) as lock:
        lock.acquire()
        assert lock.held
        # Two locks in one process are two holders too.
        with pytest.raises(RunFolderBusy, match=rf"process {os.getpid()}"):
            RunLock(tmp_path).acquire()
    assert writer_of(tmp_path) is None
    assert writer_of(tmp_path / "no-such-folder") is None


@pytest.mark.parametrize("first, second", [((), ()), pytest.param((), ("--resume",), marks=pytest.mark.slow),
                                           pytest.param(("--resume",), ("--resume",), marks=pytest.mark.slow)],
                         ids=["fresh-fresh", "fresh-resume", "resume-resume"])
def test_a_second_train_py_on_a_folder_is_refused_at_once(tmp_path, small_config, first, second):
    """Two train.py on one folder each logged every iteration: metrics.jsonl held [0, 0, 1, 1, ...]."""
    config = small_config(tmp_path, **{"num-batches": 1000})
    output = tmp_path / "run"
    if first == ("--resume",):  # a partial run, continued
        run(small_config(tmp_path, "partial.yaml", **{"num-batches": 2}), output, "--seed", "3")
    args = ["--config", config, "--output-folder", output, "--num-workers", "0", "--seed", "3"]
    writer = start(tmp_path, *args, *first)
    try:
        wait_for_rows(writer, output / "metrics.jsonl", rows=3 if first else 1)
        began = time.monotonic()
        second_run = subprocess.run([sys.executable, str(ROOT / "train.py"), *map(str, args), *second],
                                    cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert second_run.returncode == 2, second_run.stderr
        assert second_run.stderr.strip() == (
            f"error: {output} is being written by another train.py (process {writer.pid}): one run writes a "
            "folder at a time. Wait for it to end (or stop it), or choose another --output-folder")
        assert time.monotonic() - began < 60
        assert writer.poll() is None
    finally:
        writer.send_signal(signal.SIGINT)
        _, err = writer.communicate(timeout=60)
    assert writer.returncode == 130, err
    iterations = [row["iteration"] for row in read_metrics(output)]
    assert iterations == list(range(len(iterations)))


def test_seeds_on_ray_lock_every_seed_folder_before_ray_starts(tmp_path, small_config):
    """``train.py --seeds ... --backend ray`` writes each seed's folder from the driver: it takes their locks."""
    if not os.environ.get("MAML_RL_REQUIRE_RAY"):
        pytest.importorskip("ray")
    from helpers.scripts import train

    (tmp_path / "seeds" / "seed-2").mkdir(parents=True)
    with RunLock(tmp_path / "seeds" / "seed-2") as lock:
        lock.acquire()
        with pytest.raises(RunFolderBusy, match=r"seed-2 is being written by another train.py"):
            train.main(["--config", str(small_config(tmp_path)), "--output-folder", str(tmp_path / "seeds"),
                        "--seeds", "1", "2", "--backend", "ray"])
    assert writer_of(tmp_path / "seeds" / "seed-2") is None


# ------------------------------------------------------------------------------- signals and the disk
# The writer starts with SIGHUP at its default, as a terminal's process does: a test runner under nohup passes
# an ignored SIGHUP on through fork and exec, and run_script rightly leaves an ignored SIGHUP ignored.
WRITER = """
import signal
import sys
signal.signal(signal.SIGHUP, signal.SIG_DFL)
import torch
from maml_rl.app.command_line import run_script
from maml_rl.app.runs.files import atomic_save

state = {"weight": torch.arange(3_000_000, dtype=torch.float32), "iteration": 0}

def main():
    atomic_save(state, sys.argv[1], checksum=True)
    print("ready", flush=True)
    while True:  # nothing but checkpoint writes: a signal lands inside one
        state["iteration"] += 1
        atomic_save(state, sys.argv[1], checksum=True)

run_script(main, on_stop=": continue with --resume")
"""


@pytest.mark.slow
def test_signals_aimed_at_the_checkpoint_write_stop_cleanly(tmp_path):
    """A signal inside torch.save's writer ended in RuntimeError 'unexpected pos', exit 1, no resume command."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = random.Random(0)
    for attempt in range(9):
        signum = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)[attempt % 3]
        path = tmp_path / "checkpoint.pt"
        process = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        assert process.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.3))
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
        name = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
        assert (process.returncode, err) == (128 + signum, f"{name}: continue with --resume\n"), attempt
        assert verify_digest(path)
        assert torch.load(path, weights_only=True)["weight"][-1] == 2_999_999
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_full_disk_is_named_and_changes_nothing(tmp_path, monkeypatch):
    """ENOSPC at the write (simulated here; for real on a small tmpfs below)."""
    path = tmp_path / "checkpoint.pt"
    atomic_save({"weight": torch.zeros(10)}, path, checksum=True)
    before = path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("maml_rl.app.runs.files.os.fsync", full)
    with pytest.raises(RunWriteError, match=r"no space left on the device of .* to write checkpoint.pt \(.* free; "
                                            r"it needs about .* MiB\): the previous checkpoint.pt is intact"):
        atomic_save({"weight": torch.ones(10)}, path, checksum=True)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (root only)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root only): {result.stderr.decode().strip()}; "
                    "test_a_full_disk_is_named_and_changes_nothing simulates it")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.mark.slow
def test_a_run_on_a_disk_that_fills_up_stops_with_the_resume_command(tmp_path, small_config, small_disk):
    config = small_config(tmp_path)
    output = small_disk / "run"
    args = ["--config", config, "--output-folder", output, "--num-workers", "0", "--seed", "5"]
    run(config, output, "--seed", "5", "--num-batches", "1")
    before = snapshot(output)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (free - 8192))
    result = subprocess.run([sys.executable, str(ROOT / "train.py"), *map(str, args), "--resume"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "error: no space left on the device of" in result.stderr
    assert "is intact" in result.stderr and "--resume" in result.stderr.splitlines()[-1]
    after = snapshot(output)
    assert after["checkpoint.pt"] == before["checkpoint.pt"]
    assert not [name for name in after if name.endswith(".tmp")]
    filler.unlink()
    run(config, output, "--seed", "5", "--resume")
    assert [row["iteration"] for row in read_metrics(output)] == [0, 1, 2]


# ---------------------------------------------------------------------------------- bits and refusals
def flip_a_weight_bit(path, weight):
    """Flip one bit inside the bytes of ``weight`` in the archive at ``path``: torch.load reads it without error."""
    data = bytearray(path.read_bytes())
    at = bytes(data).find(weight.numpy().tobytes())
    assert at > 0
    data[at + 5] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_flipped_bit_in_a_checkpoint_is_refused_and_changes_nothing(tmp_path, small_config):
    output = tmp_path / "run"
    run(small_config(tmp_path), output, "--seed", "2", "--num-batches", "2")
    assert verify_digest(output / "checkpoint.pt")
    flip_a_weight_bit(output / "checkpoint.pt", load_policy(output)["layer1.weight"])
    with pytest.raises(ChecksumMismatch):
        verify_digest(output / "checkpoint.pt")
    before = snapshot(output)
    with pytest.raises(ConfigError, match=r"checkpoint.pt is damaged: its bytes changed since it was written"):
        run(small_config(tmp_path), output, "--seed", "2", "--resume")
    assert snapshot(output) == before


def test_a_refused_resume_leaves_every_file_as_it_was(tmp_path, small_config):
    """A checkpoint of another configuration was refused, but config.json had already taken --num-batches."""
    output, other = tmp_path / "run", tmp_path / "other"
    run(small_config(tmp_path), output, "--seed", "2", "--num-batches", "2")
    run(small_config(tmp_path, "other.yaml", **{"fast-lr": 0.2}), other, "--seed", "2", "--num-batches", "2")
    (output / "checkpoint.pt").write_bytes((other / "checkpoint.pt").read_bytes())
    before = snapshot(output)
    with pytest.raises(ConfigError, match=r"was written with another configuration:\n  fast-lr: 0.2 -> 0.1"):
        run(tmp_path / "small.yaml", output, "--resume", "--num-batches", "12")
    assert snapshot(output) == before


TOO_LARGE = {
    "pearl-train-tasks": ("configs/pearl/2d-navigation.yaml", ["num-train-tasks=1000000000000"], r"replays"),
    "pearl-embedding-batch": ("configs/pearl/2d-navigation.yaml", ["embedding-batch-size=10000000000"],
                              r"context batch"),
    "pearl-hidden": ("configs/pearl/2d-navigation.yaml", ["hidden-sizes=[100000000]"], r"networks"),
    "rl2-gru": ("configs/rl2/2d-navigation.yaml", ["gru-size=100000000"], r"networks"),
    "rl2-trial": ("configs/rl2/2d-navigation.yaml", ["episodes-per-trial=1000000000"], r"trials of an iteration"),
    "maml-hidden": ("configs/maml/2d-navigation.yaml", ["hidden-sizes=[100000000]"], r"adapted parameters"),
    "rl2-overlap": ("configs/rl2/2d-navigation.yaml", ["update-per-chunk=true", "bptt-overlap=100"],
                    r"bptt-overlap \(100\) must be smaller than bptt-chunk \(100\)"),
    "no-steps": ("configs/maml/2d-navigation.yaml", ["env-kwargs.max_episode_steps=-1"],
                 r"max_episode_steps must be an integer >= 1"),
    "layers": ("configs/maml/2d-navigation.yaml", [f"hidden-sizes=[{','.join(['8'] * 101)}]"],
               r"101 layers; at most 100"),
}


@pytest.mark.parametrize("name", TOO_LARGE)
def test_what_cannot_fit_is_refused_before_the_folder_exists(tmp_path, name):
    config, sets, message = TOO_LARGE[name]
    output = tmp_path / "run"
    overrides = [arg for text in sets for arg in ("--set", text)]
    with pytest.raises(ConfigError, match=message) as refused:
        run(ROOT / config, output, *overrides)
    if "memory" in str(refused.value):
        assert "this machine has" in str(refused.value)
    assert not output.exists()


def test_a_huge_config_file_is_refused_unread(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("hidden-sizes: [" + ", ".join(["64"] * 300_000) + "]\n")
    with pytest.raises(ConfigError, match=r"huge.yaml' is \d\.\d MiB, more than a config holds"):
        load_config(path)


@pytest.mark.parametrize("text, line", [("fast-lr: 0.1\nnum-batches: 2\nfast-lr: 0.5\n", (1, 3)),
                                        ("env-kwargs:\n  low: -1\n  low: -2\n", (2, 3))])
def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path, text, line):
    """YAML keeps the last of two equal keys without a word."""
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"is given twice, on line {line[0]} and on line {line[1]}: keep one"):
        load_config(path)


def test_a_step_timeout_ends_a_script_with_the_resume_command(capsys):
    """train.py's run is intact when a worker's step outlives --step-timeout: it says so, not a traceback."""
    from maml_rl.app.command_line import run_script
    from maml_rl.samplers.errors import StepTimeoutError

    def main():
        raise StepTimeoutError("worker 1 (pid 42) did not finish its step within step_timeout=600 s", worker=1)

    # run_script ignores further signals once the run is over: this process's own are restored after.
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with pytest.raises(SystemExit) as exit:
            run_script(main, on_stop=": continue with --resume:\n  python train.py --resume")
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert exit.value.code == 1
    assert capsys.readouterr().err == ("error: worker 1 (pid 42) did not finish its step within step_timeout=600 s: "
                                       "continue with --resume:\n  python train.py --resume\n")


# ------------------------------------------------------------------------------------------- SIGINT
@pytest.mark.slow
def test_sigint_stops_a_run_started_with_sigint_ignored(tmp_path, small_config):
    """A shell script's background job (`python train.py ... &`) starts with SIGINT ignored: the run went on."""
    config = small_config(tmp_path, **{"num-batches": 1000})
    process = start(tmp_path, "--config", config, "--num-workers", "0", "--seed", "7", ignore_sigint=True)
    wait_for_rows(process, tmp_path / "runs" / "small" / "metrics.jsonl")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "interrupted: continue with --resume:" in err and "Traceback" not in err
