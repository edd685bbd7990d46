"""The lock of a run folder is on the folder itself: deleting a file in it, or moving the folder away and making
another in its place, never lets two runs write one folder, and a run whose folder went away says so."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from maml_rl.app.config_files import ConfigError
from maml_rl.app.runs import lock as run_lock
from maml_rl.app.runs.lock import RunFolderBusy, RunLock, writer_of

from helpers import ROOT
from helpers.runs import read_metrics, run

pytestmark = pytest.mark.processes


def test_deleting_a_file_in_the_folder_does_not_free_it(tmp_path):
    """The lock was flock on ``.lock``: removed mid-run, the next train.py locked a new file and both wrote."""
    with RunLock(tmp_path) as lock:
        lock.acquire()
        for path in tmp_path.iterdir():  # whatever the lock keeps in the folder, a user may delete
            path.unlink()
        assert writer_of(tmp_path) == os.getpid()
        with pytest.raises(RunFolderBusy, match=rf"being written by another train.py \(process {os.getpid()}\)"):
            RunLock(tmp_path).acquire()
    assert writer_of(tmp_path) is None


def test_a_refused_resume_changes_nothing_in_the_folder(tmp_path, small_config):
    """A refused --resume rewrote ``.lock`` with its own pid."""
    config = small_config(tmp_path, **{"num-batches": 1})
    output = tmp_path / "run"
    run(config, output, "--seed", "3")

    def files():
        return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in output.iterdir() if path.is_file()}

    before = files()
    time.sleep(0.01)  # a rewrite would show in the modification times
    with pytest.raises(ConfigError, match="--seed 4 differs from the run's seed 3"):
        run(config, output, "--resume", "--seed", "4")
    assert files() == before


@pytest.mark.parametrize("fate", ["renamed", "deleted"])
def test_a_lock_knows_its_folder_went_away(tmp_path, fate):
    folder = tmp_path / "run"
    folder.mkdir()
    with RunLock(folder) as lock:
        lock.acquire()
        lock.check()  # still its folder
        if fate == "renamed":
            folder.rename(tmp_path / "moved")
            folder.mkdir()  # and a new folder in its place: another one, which another run may lock
            with RunLock(folder) as other:
                other.acquire()
            where = rf"its files are now in {tmp_path / 'moved'}; continue the run there with --resume"
        else:
            folder.rmdir()
            where = "it was deleted"
        with pytest.raises(run_lock.RunFolderLost, match=rf"{folder} is no longer the folder this run was writing: .*{where}"):
            lock.check()


def _start(tmp_path, config, output):
    return subprocess.Popen([sys.executable, str(ROOT / "train.py"), "--config", str(config), "--output-folder",
                             str(output), "--num-workers", "0", "--seed", "3"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_rows(process, metrics, rows, timeout=120):
    deadline = time.monotonic() + timeout
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= rows):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_run_whose_folder_is_moved_stops_and_writes_nothing_into_a_new_one(tmp_path, small_config):
    """Renamed mid-run, the folder's run went on writing by path: into the new folder made in its place, which a
    second train.py had locked (metrics.jsonl: ... 9, 9, 10, 10, ...); deleted, it ended in a FileNotFoundError
    traceback."""
    config = small_config(tmp_path, **{"num-batches": 1000})
    output, moved = tmp_path / "run", tmp_path / "moved"
    writer = _start(tmp_path, config, output)
    try:
        _wait_for_rows(writer, output / "metrics.jsonl", rows=2)
        output.rename(moved)
        output.mkdir()
        (output / "mine.txt").write_text("another run's folder")
        _, err = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.send_signal(signal.SIGINT)
            writer.communicate(timeout=60)
    assert writer.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().endswith(
        f"error: {output} is no longer the folder this run was writing: it was moved, renamed or deleted while "
        f"the run went on, so the run stopped without writing more (its files are now in {moved}; continue the "
        f"run there with --resume --output-folder {moved})")
    assert sorted(path.name for path in output.iterdir()) == ["mine.txt"]
    iterations = [row["iteration"] for row in read_metrics(moved)]
    assert iterations == list(range(len(iterations))) and len(iterations) >= 2


def _delete_while_written(folder):
    """``rm -rf`` against a run that is still writing: a file it creates between a listing and the rmdir (CI saw a
    checkpoint's temporary file appear there) is removed on the next pass. Once the folder is gone the run cannot
    create anything in it, since it writes through the folder's descriptor."""
    deadline = time.monotonic() + 60
    while folder.exists():
        assert time.monotonic() < deadline, f"{folder} could not be deleted in 60 s"
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_a_run_whose_folder_is_deleted_says_so(tmp_path, small_config):
    config = small_config(tmp_path, **{"num-batches": 1000})
    output = tmp_path / "run"
    writer = _start(tmp_path, config, output)
    try:
        _wait_for_rows(writer, output / "metrics.jsonl", rows=2)
        _delete_while_written(output)
        _, err = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.send_signal(signal.SIGINT)
            writer.communicate(timeout=60)
    assert writer.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().endswith(f"error: {output} is no longer the folder this run was writing: it was moved, "
                                "renamed or deleted while the run went on, so the run stopped without writing more "
                                "(it was deleted, with the files this run had written)")
    assert not output.exists()


def test_a_write_after_the_check_follows_the_locked_folder_not_its_path(tmp_path):
    """The moment between RunLock.check and a write, made deterministic: the folder is renamed and another made in
    its place after the check. The checkpoint, policy and config writes (atomic_write) and the metrics row
    (MetricsLogger) land in the locked folder under its new name; the new folder gets nothing. Through the path,
    CI once saw the checkpoint in the new folder. After the lock is released, writes go by path again."""
    from maml_rl.app.runs.files import atomic_write, atomic_write_json
    from maml_rl.app.runs.metrics import MetricsLogger

    output, moved = tmp_path / "run", tmp_path / "moved"
    output.mkdir()
    with RunLock(output) as lock:
        lock.acquire()
        with MetricsLogger(output, start_iteration=0) as logger:
            logger.log({"iteration": 0, "return": 1.0})
            lock.check()
            output.rename(moved)
            output.mkdir()
            (output / "mine.txt").write_text("another run's folder")
            atomic_write(output / "checkpoint.pt", lambda f: f.write(b"checkpoint"))
            atomic_write_json({"seed": 1}, output / "config.json")
            logger.log({"iteration": 1, "return": 2.0})
        with pytest.raises(run_lock.RunFolderLost):
            lock.check()
    assert sorted(path.name for path in output.iterdir()) == ["mine.txt"]
    assert sorted(path.name for path in moved.iterdir()) == ["checkpoint.pt", "config.json", "metrics.jsonl"]
    assert (moved / "checkpoint.pt").read_bytes() == b"checkpoint"
    assert [row["iteration"] for row in read_metrics(moved)] == [0, 1]
    atomic_write(output / "after.txt", lambda f: f.write(b"by path"))
    assert (output / "after.txt").read_bytes() == b"by path"


def test_a_file_vanishing_mid_write_while_rm_rf_empties_the_folder_says_the_folder_was_deleted(
        tmp_path, small_config, monkeypatch):
    """CI saw it once: rm -rf removed the policy's temporary file between its write and its rename, before it
    removed the folder, so the run's check after the failed rename still found the folder and a traceback came
    out. Here the second policy write fails so, and the folder goes 0.2 s later."""
    import threading

    from maml_rl.app import training
    from maml_rl.app.runs.lock import RunFolderLost

    config = small_config(tmp_path, **{"num-batches": 5})
    output = tmp_path / "run"
    real_save, calls = training.atomic_save, []

    def vanishing_save(weights, path):
        calls.append(path)
        if len(calls) < 2:
            return real_save(weights, path)
        threading.Timer(0.2, shutil.rmtree, (output,)).start()
        raise FileNotFoundError(2, "No such file or directory", f".{path.name}.tmp")

    monkeypatch.setattr(training, "atomic_save", vanishing_save)
    with pytest.raises(RunFolderLost, match="it was deleted, with the files this run had written"):
        run(config, output, "--seed", "1")
    assert not output.exists()
    # A file that vanishes while its folder stays is the error it is, after the wait.
    monkeypatch.setattr(training, "FOLDER_GONE_WAIT", 0.1)
    monkeypatch.setattr(training, "atomic_save", lambda weights, path: (_ for _ in ()).throw(
        FileNotFoundError(2, "No such file or directory", "elsewhere")))
    with pytest.raises(FileNotFoundError, match="elsewhere"):
        run(config, tmp_path / "other", "--seed", "1")
