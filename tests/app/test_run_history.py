"""A run's history stays its own: a checkpoint copied in from another run is refused even when config.json is
gone, a row logged twice does not survive a resume, and report.py names the resume that mends its log."""

import json
import shutil

import pytest

from maml_rl.app.config_files import ConfigError
from maml_rl.app.report_runs import ReportError, load_run

from helpers.runs import read_metrics, run
from helpers.scripts import evaluate, train


@pytest.fixture(scope="module")
def runs(tmp_path_factory, small_config):
    """Two runs of one config, seeds 3 and 4, 2 of its 3 iterations each."""
    folder = tmp_path_factory.mktemp("history")
    config = small_config(folder)
    for seed in (3, 4):
        run(config, folder / f"seed-{seed}", "--seed", str(seed), "--num-batches", "2")
    return folder


def files(folder):
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


def resume(folder, *extra):
    return train.main(["--output-folder", str(folder), "--resume", "--num-workers", "0", *extra])


def test_a_checkpoint_of_another_run_is_refused_without_config_json(runs, tmp_path):
    """With config.json gone, --resume took the configuration of a seed-4 checkpoint copied into a seed-3 folder
    and logged its rows after the folder's own (rows 0-1 from one run, 2-3 from the other)."""
    folder = tmp_path / "seed-3"
    shutil.copytree(runs / "seed-3", folder)
    (folder / "config.json").unlink()
    shutil.copy(runs / "seed-4" / "checkpoint.pt", folder / "checkpoint.pt")
    before = files(folder)
    with pytest.raises(ConfigError, match=(
            rf"{folder / 'checkpoint.pt'} is not the checkpoint of the run logged beside it: its iteration 1 "
            r"differs from the row logged for it in metrics.jsonl \(return_before: .*; the checkpoint's run has "
            r"seed 4. Restore the run's own checkpoint.pt")):
        resume(folder, "--num-batches", "3")
    assert files(folder) == before
    # Its own checkpoint, config.json still gone, resumes.
    shutil.copy(runs / "seed-3" / "checkpoint.pt", folder / "checkpoint.pt")
    resume(folder, "--num-batches", "3")
    assert [row["iteration"] for row in read_metrics(folder)] == [0, 1, 2]


@pytest.mark.parametrize("more", [True, False], ids=["resumed", "already-complete"])
def test_a_row_logged_twice_does_not_survive_a_resume(runs, tmp_path, more):
    """A duplicated row was kept by --resume, and shifted report.py's curve by one iteration from there on."""
    folder = tmp_path / "run"
    shutil.copytree(runs / "seed-3", folder)
    lines = (folder / "metrics.jsonl").read_text().splitlines(keepends=True)
    (folder / "metrics.jsonl").write_text(lines[0] + lines[0] + lines[1] + "not json\n")
    resume(folder, *(["--num-batches", "3"] if more else []))
    assert [row["iteration"] for row in read_metrics(folder)] == ([0, 1, 2] if more else [0, 1])
    assert (folder / "metrics.jsonl").read_text().startswith(lines[0] + lines[1])


@pytest.fixture
def evaluated(runs, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(runs / "seed-3", folder)
    evaluate.main(["--config", str(folder / "config.json"), "--num-workers", "0", "--meta-batch-size", "1"])
    load_run(folder)  # as it was written, report.py reads it
    return folder


@pytest.mark.parametrize("fault", ["garbage line", "row twice"])
def test_report_names_the_resume_that_mends_the_log(evaluated, fault):
    """report.py said "train the run again" for a garbage line that --resume drops, and took a row logged twice."""
    lines = (evaluated / "metrics.jsonl").read_text().splitlines(keepends=True)
    extra = "not json\n" if fault == "garbage line" else lines[1]
    (evaluated / "metrics.jsonl").write_text(lines[0] + extra + lines[1])
    cause = "not valid JSON lines" if fault == "garbage line" else r"it logs iteration\(s\) 1 more than once"
    with pytest.raises(ReportError, match=rf"metrics.jsonl: {cause}.*; python train.py --output-folder {evaluated} "
                                          "--resume rewrites it with one row per iteration"):
        load_run(evaluated)
    resume(evaluated)
    load_run(evaluated)
