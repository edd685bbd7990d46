"""Runs and their files: checkpoints read safely, damaged ones named, nothing the user
gave is silently ignored, output locations checked before any work, and a policy never
evaluated with another architecture than it was trained with."""

import json
import os
import pickle
import shutil

import numpy as np
import pytest
import torch

from maml_rl.app.config_files import ConfigError

from helpers.runs import assert_same_policy, load_policy, run
from helpers.scripts import evaluate


@pytest.fixture(scope="module")
def write_config(small_config):
    """``write_config(folder, name="small.yaml", **changes)``: the small config with ReLU, and ``changes``."""
    def write(folder, name="small.yaml", **changes):
        return small_config(folder, name, **{"nonlinearity": "relu", **changes})

    return write


@pytest.fixture(scope="module")
def reference(tmp_path_factory, write_config):
    """Three uninterrupted iterations with seed 7."""
    folder = tmp_path_factory.mktemp("reference")
    run(write_config(folder), folder / "run", "--seed", "7")
    return folder / "run"


class _Exploit:
    """Unpickling this runs os.system: what a crafted checkpoint could do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_malicious_checkpoint_is_refused_without_running_it(reference, tmp_path, write_config):
    folder = tmp_path / "run"
    shutil.copytree(reference, folder)
    marker = tmp_path / "pwned"
    state = {"version": 1, "payload": _Exploit(marker)}
    torch.save(state, folder / "checkpoint.pt")
    with pytest.raises(ConfigError, match=r"checkpoint.pt was refused: .*nothing in it was run"):
        run(write_config(tmp_path), folder, "--resume", "--num-batches", "4")
    with pytest.raises(ConfigError, match="was refused"):
        evaluate.main(["--config", str(folder / "config.json"), "--policy", str(folder / "checkpoint.pt"),
                       "--num-workers", "0", "--output", str(tmp_path / "r.npz")])
    assert not marker.exists()
    # And the check is not vacuous: unpickled the unsafe way, the file does run its payload.
    with open(folder / "checkpoint.pt", "rb") as f:
        torch.load(f, weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage", "zeros", "few-zeros"])
def test_damaged_checkpoint_is_named_with_what_to_do(reference, tmp_path, damage, write_config):
    """A zero-filled checkpoint was refused as one that 'asks to run code or build objects'."""
    folder = tmp_path / "run"
    shutil.copytree(reference, folder)
    data = (reference / "checkpoint.pt").read_bytes()
    (folder / "checkpoint.pt").write_bytes({"empty": b"", "truncated": data[: len(data) // 2],
                                            "garbage": os.urandom(4096), "zeros": bytes(len(data)),
                                            "few-zeros": bytes(100)}[damage])
    with pytest.raises(ConfigError) as info:
        run(write_config(tmp_path), folder, "--resume", "--num-batches", "4")
    message = str(info.value)
    assert str(folder / "checkpoint.pt") in message
    assert "is damaged or not a file torch.save wrote" in message and "--overwrite" in message
    assert "refused" not in message and "run code" not in message
    expected = {"empty": "the file is empty", "truncated": "a zip archive cut short",
                "zeros": f"its {len(data)} bytes are all zero", "few-zeros": "its 100 bytes are all zero"}
    assert expected.get(damage, "") in message


def test_checkpoint_without_config_json_resumes_exactly(reference, tmp_path, write_config):
    folder = tmp_path / "run"
    run(write_config(tmp_path), folder, "--seed", "7", "--num-batches", "1")
    (folder / "config.json").unlink()
    run(write_config(tmp_path), folder, "--resume", "--num-batches", "3")
    assert_same_policy(load_policy(folder), load_policy(reference))
    assert json.loads((folder / "config.json").read_text())["num-batches"] == 3


def test_resume_honours_the_given_config(reference, tmp_path, write_config):
    """A --config differing only in num-batches used to be ignored ('nothing to do')."""
    folder = tmp_path / "run"
    run(write_config(tmp_path), folder, "--seed", "7", "--num-batches", "1")
    longer = write_config(tmp_path, "longer.yaml", **{"num-batches": 3})
    run(longer, folder, "--resume")
    assert len((folder / "metrics.jsonl").read_text().splitlines()) == 3
    assert_same_policy(load_policy(folder), load_policy(reference))
    with pytest.raises(ConfigError, match="sets seed 8, the run's seed is 7"):
        run(write_config(tmp_path, "other-seed.yaml", seed=8), folder, "--resume")
    with pytest.raises(ConfigError, match=r"(?s)differs from the run.s configuration.*fast-lr: 0.1 -> 0.3"):
        run(write_config(tmp_path, "other-lr.yaml", **{"fast-lr": 0.3}), folder, "--resume")


def test_the_command_that_started_a_run_with_set_continues_it(tmp_path, write_config):
    """`--config F --set K=V --resume` compared F without V to the run and refused its own command."""
    config = write_config(tmp_path)
    whole, folder = tmp_path / "whole", tmp_path / "run"
    run(config, whole, "--seed", "7", "--num-batches", "2", "--set", "fast-lr=0.3")
    run(config, folder, "--seed", "7", "--num-batches", "1", "--set", "fast-lr=0.3")
    run(config, folder, "--resume", "--num-batches", "2", "--set", "fast-lr=0.3")
    assert len((folder / "metrics.jsonl").read_text().splitlines()) == 2
    assert_same_policy(load_policy(folder), load_policy(whole))
    with pytest.raises(ConfigError, match=r"(?s)differs from the run.s configuration.*fast-lr: 0.3 -> 0.4"):
        run(config, folder, "--resume", "--num-batches", "3", "--set", "fast-lr=0.4")
    with pytest.raises(ConfigError, match=r"(?s)differs from the run.s configuration.*fast-lr: 0.3 -> 0.1"):
        run(config, folder, "--resume", "--num-batches", "3")  # the file alone is not the run's configuration


def test_resume_twice_is_safe(reference, tmp_path, write_config):
    """The first command of the README may be run again: it continues, then has nothing to do."""
    folder = tmp_path / "run"
    run(write_config(tmp_path), folder, "--resume", "--seed", "7", "--num-batches", "2")
    run(write_config(tmp_path), folder, "--resume", "--num-batches", "3")
    run(write_config(tmp_path), folder, "--resume", "--num-batches", "3")
    assert_same_policy(load_policy(folder), load_policy(reference))


def test_unwritable_output_folder_is_refused_before_any_work(tmp_path, write_config):
    config = write_config(tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        run(config, a_file)
    with pytest.raises(ConfigError, match="a-file is a file, so the folder cannot be created"):
        run(config, a_file / "run")
    assert a_file.read_text() == "not a folder"


def test_evaluation_output_checked_before_any_work(reference, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(evaluate.MultiTaskSampler, "sample", lambda *a, **k: calls.append(1))
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for output, message in ((tmp_path, "is a folder: give a file name"),
                            (a_file / "results.npz", "a-file is a file, so the folder cannot be created")):
        with pytest.raises(ConfigError, match=message):
            evaluate.main(["--config", str(reference / "config.json"), "--num-workers", "0", "--output", str(output)])
    with pytest.raises(ConfigError, match="--plot"):
        evaluate.main(["--config", str(reference / "config.json"), "--num-workers", "0",
                       "--output", str(tmp_path / "r.npz"), "--plot", str(a_file / "p.png")])
    assert calls == []


def test_evaluation_refuses_another_architecture(reference, tmp_path, write_config):
    """A ReLU-trained policy evaluated with a Tanh config loaded silently and gave wrong returns."""
    tanh = write_config(tmp_path, "tanh.yaml", nonlinearity="tanh")
    with pytest.raises(ConfigError) as info:
        evaluate.main(["--config", str(tanh), "--policy", str(reference / "policy.th"), "--num-workers", "0",
                       "--output", str(tmp_path / "r.npz")])
    message = str(info.value)
    assert "was trained with another policy" in message and "nonlinearity: 'tanh'" in message
    assert f"evaluate with --config {reference / 'config.json'}" in message
    wider = write_config(tmp_path, "wide.yaml", **{"hidden-sizes": [32, 32]})
    with pytest.raises(ConfigError, match="hidden-sizes: \\[32, 32\\]"):
        evaluate.main(["--config", str(wider), "--policy", str(reference / "policy.th"), "--num-workers", "0",
                       "--output", str(tmp_path / "r.npz")])
    # The same architecture spelled differently is the same policy.
    spelled = write_config(tmp_path, "relu.yaml", nonlinearity="ReLU")
    evaluate.main(["--config", str(spelled), "--policy", str(reference / "policy.th"), "--num-workers", "0",
                   "--output", str(tmp_path / "r.npz"), "--meta-batch-size", "1"])


def test_evaluation_accepts_a_checkpoint_as_policy(reference, tmp_path):
    args = ["--config", str(reference / "config.json"), "--num-workers", "0", "--meta-batch-size", "2"]
    from_policy = evaluate.main([*args, "--output", str(tmp_path / "a.npz")])
    from_checkpoint = evaluate.main([*args, "--policy", str(reference / "checkpoint.pt"),
                                     "--output", str(tmp_path / "b.npz")])
    assert np.array_equal(from_policy["returns_per_step"], from_checkpoint["returns_per_step"])
    not_a_policy = tmp_path / "list.th"
    torch.save([1, 2, 3], not_a_policy)
    with pytest.raises(ConfigError, match="not a policy state_dict"):
        evaluate.main([*args, "--policy", str(not_a_policy), "--output", str(tmp_path / "c.npz")])
    plain_pickle = tmp_path / "pickle.th"
    plain_pickle.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(ConfigError, match="not a file torch.save wrote.*Give --policy the policy.th or checkpoint.pt"):
        evaluate.main([*args, "--policy", str(plain_pickle), "--output", str(tmp_path / "c.npz")])


def test_resume_refuses_a_folder_that_lost_its_checkpoint(reference, tmp_path, write_config):
    """Resumed, a folder with config.json, policy.th and metrics rows but no checkpoint.pt started again from
    iteration 0 and truncated metrics.jsonl at once."""
    folder = tmp_path / "run"
    run(write_config(tmp_path), folder, "--seed", "7", "--num-batches", "2")
    (folder / "checkpoint.pt").unlink()
    held = {name: (folder / name).read_bytes() for name in ("config.json", "policy.th", "metrics.jsonl")}
    for extra in (("--resume",), ()):
        with pytest.raises(ConfigError) as info:
            run(write_config(tmp_path), folder, *extra, "--num-batches", "3")
        message = str(info.value)
        assert f"{folder} holds a training run but no checkpoint.pt" in message
        assert "2 logged iteration(s) in metrics.jsonl (up to iteration 1), config.json, policy.th" in message
        assert "Restore checkpoint.pt from a copy" in message and "--overwrite" in message
        assert {name: (folder / name).read_bytes() for name in held} == held
    # Asked for, starting over is allowed (and is the uninterrupted run).
    run(write_config(tmp_path), folder, "--overwrite", "--seed", "7", "--num-batches", "3")
    assert_same_policy(load_policy(folder), load_policy(reference))


def test_a_lost_metrics_file_does_not_change_the_windowed_metrics(reference, tmp_path, capsys, write_config):
    """return_after_mean10 and gain_lost were recomputed over what was left of metrics.jsonl (-12.25 against
    -18.04 uninterrupted): the checkpoint now keeps the monitors' state."""
    folder = tmp_path / "run"
    run(write_config(tmp_path), folder, "--seed", "7", "--num-batches", "2")
    (folder / "metrics.jsonl").unlink()
    capsys.readouterr()
    run(write_config(tmp_path), folder, "--resume", "--num-batches", "3")
    err = capsys.readouterr().err
    assert "resuming at iteration 2 of 3" in err
    assert "metrics.jsonl has no row for iteration(s) 0-1" in err and "continues exactly" in err
    (row,) = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    uninterrupted = json.loads((reference / "metrics.jsonl").read_text().splitlines()[2])
    assert row["iteration"] == 2
    for key in ("return_after_mean10", "gain_lost", "return_after"):
        assert row[key] == uninterrupted[key], key
    assert_same_policy(load_policy(folder), load_policy(reference))


def test_a_checkpoint_from_before_the_monitors_state_replays_them_from_the_rows(reference, tmp_path, capsys,
                                                                                write_config):
    """A checkpoint written before it kept the monitors' state still resumes: the windowed metrics are
    replayed from metrics.jsonl, which, complete, gives the uninterrupted run's values."""
    from maml_rl.app.runs.checkpoints import read_checkpoint
    from maml_rl.app.runs.files import atomic_save

    folder = tmp_path / "run"
    run(write_config(tmp_path), folder, "--seed", "7", "--num-batches", "2")
    state = read_checkpoint(folder / "checkpoint.pt")
    del state["monitors"]
    atomic_save({**state, "version": 1}, folder / "checkpoint.pt")  # such checkpoints were unsealed version 1
    run(write_config(tmp_path), folder, "--resume", "--num-batches", "3")
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    uninterrupted = [json.loads(line) for line in (reference / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [0, 1, 2]
    for key in ("return_after_mean10", "gain_lost", "return_after"):
        assert rows[2][key] == uninterrupted[2][key], key
    assert_same_policy(load_policy(folder), load_policy(reference))
    # With rows lost as well, the replay can only see what is left, and says so.
    other = tmp_path / "run2"
    run(write_config(tmp_path), other, "--seed", "7", "--num-batches", "2")
    state = read_checkpoint(other / "checkpoint.pt")
    del state["monitors"]
    atomic_save({**state, "version": 1}, other / "checkpoint.pt")
    (other / "metrics.jsonl").unlink()
    capsys.readouterr()
    run(write_config(tmp_path), other, "--resume", "--num-batches", "3")
    assert "predates the saved state of return_after_mean10 and gain_lost" in capsys.readouterr().err
    assert_same_policy(load_policy(other), load_policy(reference))


def test_files_are_read_without_the_pickle_protocol_warning(tmp_path):
    """torch warned "Detected pickle protocol 4 in the checkpoint" when test.py --policy was given a plain
    pickle (then refused). maml_rl writes protocol 2, the only one torch's weights-only reader reads in full;
    files of protocol 4 are refused with the message alone."""
    import warnings
    import zipfile

    from maml_rl.app.runs.checkpoints import safe_load
    from maml_rl.app.runs.files import atomic_save

    state = {"w": torch.arange(3.0), "rng": np.arange(4, dtype=np.uint32), "step": 7}
    atomic_save(state, tmp_path / "ours.pt")
    with zipfile.ZipFile(tmp_path / "ours.pt") as archive:
        data = next(name for name in archive.namelist() if name.endswith("data.pkl"))
        assert archive.read(data)[:2] == pickle.PROTO + bytes([2])
    torch.save(state, tmp_path / "protocol4.pt", pickle_protocol=4)
    (tmp_path / "plain.pkl").write_bytes(pickle.dumps([1, 2, 3], protocol=4))
    # Recorded rather than raised: a warning turned error would be caught and reported as damage.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = safe_load(tmp_path / "ours.pt", "")
        for name in ("protocol4.pt", "plain.pkl"):
            with pytest.raises(ConfigError, match="not a file torch.save wrote"):
                safe_load(tmp_path / name, "")
    assert torch.equal(loaded["w"], state["w"]) and np.array_equal(loaded["rng"], state["rng"])
    assert [str(w.message) for w in caught] == []


def test_metrics_rows_reach_a_file_replaced_during_the_run(tmp_path):
    """A ``git checkout`` or a copy over the run folder replaces metrics.jsonl with a new file (a new
    inode); the rows logged after it must land in that file, not in the unlinked old one."""
    from maml_rl.app.runs.metrics import MetricsLogger, logged_rows

    path = tmp_path / "metrics.jsonl"
    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        for iteration in range(3):
            logger.log({"iteration": iteration, "return_after": float(iteration)})
            shutil.copy(path, tmp_path / "copy")
            os.replace(tmp_path / "copy", path)  # as git writes a file: a new one renamed over the old
        assert [row["iteration"] for row in logged_rows(tmp_path)] == [0, 1, 2]
        path.unlink()  # deleted: the next row starts a new file (a resume then reports the missing rows)
        logger.log({"iteration": 3, "return_after": 3.0})
    assert [row["iteration"] for row in logged_rows(tmp_path)] == [3]
