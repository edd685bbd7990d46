"""The run tools' faults, standing: every file of a run folder missing, empty, cut short or
replaced by bytes that are not its format, under each tool that reads it (``train.py --resume``,
``test.py``, ``report.py``), with the outcome written out by hand for each.

An outcome is one of:

* ``EXACT``: the tool goes on, and a resumed run ends with the bits of the uninterrupted run;
* ``OK``: the tool goes on (it does not need the file, or rewrites it);
* a message fragment: refused with :class:`ConfigError` whose message names the folder or file
  and contains the fragment, and no file of the folder changed.

Whatever the case, no other exception escapes and nothing the folder holds is lost silently: a
report either pools both seeds or refuses. Folder-level faults (a seed folder copied, reached
twice, results older than the policy) follow the same table.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

if os.environ.get("MAML_RL_REQUIRE_STATS"):
    import rliable  # noqa: F401  (CI installs the stats extra: missing, this fails instead of skipping)
else:
    pytest.importorskip("rliable")  # report.py's figures need it

from maml_rl.app.config_files import ConfigError

from helpers.scripts import evaluate, load_script, train

report = load_script("report")

EXACT, OK = "EXACT", "OK"
FAULTS = ("missing", "empty", "cut short", "not its format")
TOOLS = ("resume", "test", "report")

# (file, fault) -> outcome under resume, test, report.
EXPECTED = {
    ("config.json", "missing"): (EXACT, "cannot read config file", "holds a run's metrics.jsonl but no config.json"),
    ("config.json", "empty"): ("cannot parse config file", "cannot parse config file", "not valid JSON"),
    ("config.json", "cut short"): ("cannot parse config file", "cannot parse config file", "not valid JSON"),
    ("config.json", "not its format"): ("it is not UTF-8 text", "it is not UTF-8 text", "not valid JSON"),
    ("metrics.jsonl", "missing"): (EXACT, OK, "no metrics.jsonl"),
    ("metrics.jsonl", "empty"): (EXACT, OK, "no iteration logged yet"),
    ("metrics.jsonl", "cut short"): (EXACT, OK, OK),  # the rows left, and a warning on resume
    ("metrics.jsonl", "not its format"): ("is not UTF-8 text", OK, "not valid JSON lines"),
    ("policy.th", "missing"): (EXACT, "no policy to evaluate", OK),  # report: flagged STALE
    ("policy.th", "empty"): (EXACT, "is damaged or not a file torch.save wrote", OK),
    ("policy.th", "cut short"): (EXACT, "is damaged or not a file torch.save wrote", OK),
    ("policy.th", "not its format"): (EXACT, "is damaged or not a file torch.save wrote", OK),
    ("checkpoint.pt", "missing"): ("holds a training run but no checkpoint.pt", OK, OK),
    ("checkpoint.pt", "empty"): ("is damaged or not a file torch.save wrote", OK, OK),
    ("checkpoint.pt", "cut short"): ("is damaged or not a file torch.save wrote", OK, OK),
    ("checkpoint.pt", "not its format"): ("is damaged or not a file torch.save wrote", OK, OK),
    ("results.npz", "missing"): (EXACT, OK, "no results.npz"),
    ("results.npz", "empty"): (EXACT, OK, "damaged or cut short"),
    ("results.npz", "cut short"): (EXACT, OK, "damaged or cut short"),
    ("results.npz", "not its format"): (EXACT, OK, "not a results file of test.py"),
}


def damage(path: Path, fault: str) -> None:
    data = path.read_bytes()
    if fault == "missing":
        path.unlink()
    elif fault == "empty":
        path.write_bytes(b"")
    elif fault == "cut short" and path.suffix == ".jsonl":
        path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 12])  # the last row, as a kill mid-write leaves it
    elif fault == "cut short":
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(bytes(range(256)) * 4)  # not UTF-8, not a zip archive


def digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def resume(run: Path):
    return train.main(["--output-folder", str(run), "--resume", "--num-batches", "3", "--num-workers", "0"])


def evaluate_run(run: Path, *extra):
    return evaluate.main(["--config", str(run / "config.json"), "--meta-batch-size", "2", "--num-workers", "0",
                          *extra])


def report_on(folder: Path):
    return report.main([str(folder), "--reps", "200"])


@pytest.fixture(scope="module")
def seeds(tmp_path_factory, small_config):
    """Seeds 1 and 2 of a small config, 2 of 3 iterations each, evaluated by test.py; and the policy
    of seed 1 trained 3 iterations without a stop (what every resume must end with)."""
    folder = tmp_path_factory.mktemp("faults")
    config = small_config(folder, **{"num-batches": 2, "hidden-sizes": [8]})
    with contextlib.redirect_stderr(io.StringIO()):
        train.main(["--config", str(config), "--output-folder", str(folder / "nav"), "--num-workers", "0",
                    "--seeds", "1", "2"])
        for seed in (1, 2):
            evaluate_run(folder / "nav" / f"seed-{seed}")
        train.main(["--config", str(config), "--output-folder", str(folder / "whole"), "--num-workers", "0",
                    "--seed", "1", "--num-batches", "3"])
    return folder / "nav", torch.load(folder / "whole" / "policy.th", weights_only=True)


@pytest.mark.parametrize("name, fault", sorted(EXPECTED), ids=lambda v: v)
def test_each_damaged_file_under_each_tool(seeds, tmp_path, name, fault):
    nav, uninterrupted = seeds
    for tool, expected in zip(TOOLS, EXPECTED[name, fault]):
        folder = tmp_path / tool
        shutil.copytree(nav, folder)
        run = folder / "seed-1"
        damage(run / name, fault)
        before = digest(folder)
        call = {"resume": lambda: resume(run), "test": lambda: evaluate_run(run), "report": lambda: report_on(folder)}[tool]
        where = f"{name} {fault}, {tool}"
        if expected in (EXACT, OK):
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                out = call()
            if expected == EXACT:
                policy = torch.load(run / "policy.th", weights_only=True)
                assert all(torch.equal(policy[k], uninterrupted[k]) for k in uninterrupted), where
            if tool == "report":
                (group,) = out["groups"]
                assert group["seeds"] == [1, 2], where  # both seeds, never one left out
                if name == "policy.th":
                    assert any(note.startswith("STALE: seed 1") for note in group["notes"]), where
        else:
            with pytest.raises(ConfigError) as info, contextlib.redirect_stderr(io.StringIO()), \
                    contextlib.redirect_stdout(io.StringIO()):
                call()
            message = str(info.value)
            assert expected in message and str(run) in message, (where, message)
            assert digest(folder) == before, f"{where}: refused, yet a file changed"


def test_folder_level_faults(seeds, tmp_path):
    nav, _ = seeds
    folder = tmp_path / "nav"
    shutil.copytree(nav, folder)
    # A run reached twice (its parent and itself, a symbolic link): counted once.
    (tmp_path / "link").symlink_to(folder / "seed-2")
    with contextlib.redirect_stderr(io.StringIO()):
        (group,) = report.main([str(folder), str(folder / "seed-1"), str(tmp_path / "link"), "--reps", "200"])["groups"]
    assert group["seeds"] == [1, 2]
    # A copy of a seed folder: refused, it would count that seed twice.
    shutil.copytree(folder / "seed-1", tmp_path / "copies" / "seed-1")
    with pytest.raises(ConfigError, match="hold the same run"):
        report.main([str(folder), str(tmp_path / "copies"), "--reps", "200"])
    # Results older than the policy (trained on after test.py): flagged.
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        resume(folder / "seed-2")
        (group,) = report_on(folder)["groups"]
    assert any(note.startswith("STALE: seed 2") for note in group["notes"])
    # A seed evaluated with other settings: its own group, not pooled.
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        evaluate_run(folder / "seed-2", "--num-steps", "2")
        groups = report_on(folder)["groups"]
    assert [g["seeds"] for g in groups] == [[1], [2]]
    # A run killed while writing a metrics row: the cut line is not an iteration; the resume is exact.
    run = tmp_path / "killed"
    shutil.copytree(nav / "seed-1", run)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 2, "return_bef')
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        resume(run)
    _, uninterrupted = seeds
    policy = torch.load(run / "policy.th", weights_only=True)
    assert all(torch.equal(policy[k], uninterrupted[k]) for k in uninterrupted)
    rows = [line for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    assert [json.loads(row)["iteration"] for row in rows] == [0, 1, 2]
    # But a row damaged inside the file, not at its end, is damage: report.py refuses it.
    (run / "metrics.jsonl").write_text("\n".join([rows[0][:20], *rows[1:]]) + "\n")
    with pytest.raises(ConfigError, match="metrics.jsonl: not valid JSON lines"):
        report_on(run)
