"""report.py says what it is doing while it reads the runs and bootstraps (it was silent for half a minute),
on stderr, and the figures are the same with or without it."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("MAML_RL_REQUIRE_STATS"):
    import rliable  # noqa: F401  (CI installs the stats extra: missing, this fails instead of skipping)
else:
    pytest.importorskip("rliable")

from maml_rl.app.reports import Run, curves, summarise
from maml_rl.app.results import COMMON_SETTINGS
from maml_rl.utils.progress import Progress

from helpers import ROOT
from helpers.scripts import load_script

report = load_script("report")


def fake_run(score, seed, success=None, curve=(0.0, 1.0, 2.0)):
    evaluation = {"policy": {"file": "policy.th", "sha256": "", "iteration": None, "num-batches": None},
                  "settings": dict.fromkeys(COMMON_SETTINGS)}
    return Run(Path(f"/runs/a-{seed}"), "Env-v0", "a", seed, float(score), 0.0, success,
               np.linspace(1, 3, len(curve)), np.array(curve), evaluation=evaluation)


class Recorder(Progress):
    def __init__(self):
        self.phases = []  # [name, total, unit, advanced]

    @contextmanager
    def phase(self, name, total, unit="step"):
        entry = [name, total, unit, 0]
        self.phases.append(entry)

        def advance(n=1):
            entry[3] += n

        yield advance


def test_each_group_bootstrap_is_a_phase_counted_in_replications():
    runs = [fake_run(s, seed=s) for s in range(6)] + [fake_run(s, seed=s, success=s / 10) for s in range(6)]
    for run in runs[6:]:
        run.algorithm = "b"
    recorder = Recorder()
    shown = summarise(runs, reps=300, seed=0, progress=recorder)
    assert [phase[:3] for phase in recorder.phases] == [["Env-v0 a: bootstrap", 300, "rep"],
                                                        ["Env-v0 b: bootstrap", 600, "rep"]]  # b: success too
    # One advance per replication (rliable adds a call or two of its own).
    assert [300 <= recorder.phases[0][3] <= 305, 600 <= recorder.phases[1][3] <= 610] == [True, True]
    plain = summarise(runs, reps=300, seed=0)
    assert [(s.iqm, s.ci, s.success_ci) for s in shown] == [(s.iqm, s.ci, s.success_ci) for s in plain]


def test_a_curve_is_a_phase_counted_in_points():
    runs = [fake_run(s, seed=s, curve=np.arange(10.0) + s) for s in range(4)]
    (summary,) = summarise(runs, reps=100)
    recorder = Recorder()
    drawn = curves(summary, points=5, reps=100, progress=recorder)
    assert recorder.phases == [[f"Env-v0 {summary.label}: curve", 5, "point", 5]]
    plain = curves(summary, points=5, reps=100)
    assert all(np.array_equal(drawn[key], plain[key]) for key in plain)


def test_report_py_shows_its_reading_and_bootstrap_on_stderr(capsys, monkeypatch):
    monkeypatch.setattr("maml_rl.app.progress.PHASE_DELAY", 0)
    monkeypatch.setattr(report, "PHASE_DELAY", 0)
    run = ROOT / "docs" / "runs" / "metaworld-ml10" / "maml-trpo" / "seed-1"
    report.main([str(run), "--reps", "200"])
    captured = capsys.readouterr()
    assert "reading runs" in captured.err and ": bootstrap" in captured.err and "rep" in captured.err
    assert "reading runs" not in captured.out and ": bootstrap" not in captured.out
    assert "IQM [95% CI]" in captured.out
