"""test.py records the policy it evaluated: the SHA-256 of the very bytes it loaded (a run still training
replaces policy.th at any moment), and a policy.th that is not the one its run's checkpoint records is refused,
not evaluated without a word."""

import builtins
import hashlib
import io
import json
import os
import shutil

import numpy as np
import pytest
import torch

from maml_rl.app.config_files import ConfigError
from maml_rl.app.runs.lock import RunLock

from helpers.runs import load_policy, run
from helpers.scripts import evaluate


@pytest.fixture(scope="module")
def trained(tmp_path_factory, small_config):
    folder = tmp_path_factory.mktemp("evaluated")
    run(small_config(folder, **{"num-batches": 2}), folder / "run", "--seed", "5")
    return folder / "run"


@pytest.fixture
def folder(trained, tmp_path):
    shutil.copytree(trained, tmp_path / "run")
    return tmp_path / "run"


def run_eval(folder, output):
    return evaluate.main(["--config", str(folder / "config.json"), "--num-workers", "0", "--meta-batch-size", "1",
                          "--output", str(output)])


def recorded_policy(output):
    with np.load(output, allow_pickle=False) as results:
        return json.loads(str(results["evaluation"]))["policy"]


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def flip_a_weight_bit(path):
    data = bytearray(path.read_bytes())
    at = bytes(data).find(load_policy(path.parent)["layer1.weight"].numpy().tobytes())
    assert at > 0
    data[at + 5] ^= 0x10
    path.write_bytes(bytes(data))


def test_the_recorded_sha256_is_that_of_the_bytes_evaluated(folder, tmp_path, monkeypatch):
    """policy.th was read twice (to load it, then to hash it): a train.py replacing it in between made the record
    name a newer file than the one evaluated."""
    plain = run_eval(folder, tmp_path / "plain.npz")
    evaluated = sha256(folder / "policy.th")
    newer = tmp_path / "newer.th"
    torch.save({name: value + 1.0 for name, value in load_policy(folder).items()}, newer)
    # The run writes its next policy.th the moment test.py has first opened the file.
    real_open, policy = builtins.open, str(folder / "policy.th")

    def opened_then_replaced(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and os.fspath(file) == policy and newer.exists():
            os.replace(newer, policy)
        return handle

    monkeypatch.setattr(builtins, "open", opened_then_replaced)
    monkeypatch.setattr(io, "open", opened_then_replaced)
    results = run_eval(folder, tmp_path / "results.npz")
    monkeypatch.undo()
    assert not newer.exists()  # it was replaced while test.py read it
    assert recorded_policy(tmp_path / "results.npz")["sha256"] == evaluated != sha256(folder / "policy.th")
    np.testing.assert_array_equal(results["returns_per_step"], plain["returns_per_step"])


def test_a_damaged_policy_th_is_refused(folder, tmp_path, capsys):
    """A flipped weight bit was evaluated; test.py only dropped the "(iteration N)" label."""
    run_eval(folder, tmp_path / "good.npz")
    assert "policy.th (iteration 2 of 2)" in capsys.readouterr().out
    flip_a_weight_bit(folder / "policy.th")
    with pytest.raises(ConfigError, match=(
            rf"--policy {folder / 'policy.th'} is not the file its run last wrote: its SHA-256 differs from the one "
            rf"{folder / 'checkpoint.pt'} \(iteration 2\) records for it. It is damaged .* --resume redoes that "
            rf"iteration exactly\); or evaluate the checkpoint's own policy, whose bytes are checked")):
        run_eval(folder, tmp_path / "results.npz")
    assert not (tmp_path / "results.npz").exists()


def test_a_policy_th_a_running_train_py_may_have_replaced_is_evaluated(folder, tmp_path, capsys):
    """While its run writes the folder, policy.th may be an iteration ahead of checkpoint.pt: evaluated as it is."""
    flip_a_weight_bit(folder / "policy.th")
    with RunLock(folder) as lock:
        lock.acquire()
        run_eval(folder, tmp_path / "results.npz")
    assert "is being written by a running train.py" in capsys.readouterr().err
    assert recorded_policy(tmp_path / "results.npz")["iteration"] is None


def test_beside_a_checkpoint_from_before_the_record_other_weights_are_warned_about(folder, tmp_path, capsys):
    state = torch.load(folder / "checkpoint.pt", weights_only=False)
    state.pop("policy_file_sha256", None)
    torch.save({**state, "version": 1}, folder / "checkpoint.pt")  # as written before the checksum
    run_eval(folder, tmp_path / "good.npz")
    captured = capsys.readouterr()
    assert "policy.th (iteration 2 of 2)" in captured.out and "warning" not in captured.err
    flip_a_weight_bit(folder / "policy.th")
    run_eval(folder, tmp_path / "results.npz")
    assert (f"warning: --policy {folder / 'policy.th'} holds other weights than {folder / 'checkpoint.pt'} "
            "(iteration 2), which predates the record") in capsys.readouterr().err
