"""The stalled-update flag of train.py (maml_rl.app.runs.stall) on hand-made logs, and on a real ProMP run whose
outer-kl-limit undoes every step, through a resume."""

from __future__ import annotations

import json

import pytest

from maml_rl.app.runs.stall import StallMonitor
from maml_rl.metalearners import METALEARNERS, ProMP

# The rule train.py gives the monitor for ProMP, the one shipped learner whose update can take no step.
PROMP = {"took_no_step": ProMP.took_no_step, "advice": ProMP.stall_advice}

from helpers.scripts import train


def test_a_streak_of_updates_without_a_step_warns_once_per_streak():
    monitor = StallMonitor(window=3, **PROMP)
    steps = [5, 0, 0, 0, 0, 0, 2, 0, 0, 0, None, 0]
    out = [monitor.update({"outer_steps": s} if s is not None else {}) for s in steps]
    assert [i for i, w in enumerate(out) if w] == [3, 9]  # the third 0 in a row, again after a step
    assert "outer-kl-backtracks" in out[3]
    assert monitor.streak == 1  # a row without outer_steps (another algorithm's) ends a streak
    # The other learners' updates always take a step: never a warning, whatever they log.
    for name, learner in METALEARNERS.items():
        rule = {"took_no_step": learner.took_no_step, "advice": learner.stall_advice}
        assert name == "promp" or not any(StallMonitor(window=1, **rule).update({"outer_steps": 0}) for _ in range(5))
    assert not any(StallMonitor(window=1).update({"outer_steps": 0}) for _ in range(5))  # the default rule
    with pytest.raises(ValueError):
        StallMonitor(window=0)


def test_replay_continues_as_an_uninterrupted_monitor():
    rows = [{"outer_steps": s} for s in (0, 0, 3, 0, 0, 0, 0, 0, 1, 0)]
    for cut in range(len(rows) + 1):
        whole, resumed = StallMonitor(window=2, **PROMP), StallMonitor.replay(rows[:cut], window=2, **PROMP)
        assert [whole.update(r) for r in rows][cut:] == [resumed.update(r) for r in rows[cut:]]


def test_a_promp_run_whose_limit_undoes_every_step_is_flagged_across_a_resume(tmp_path, capsys, small_config):
    config = small_config(tmp_path, algorithm="promp", **{"num-batches": 6, "outer-kl-limit": 1e-12,
                                                          "outer-steps": 1})
    out = tmp_path / "run"
    train.main(["--config", str(config), "--output-folder", str(out), "--num-workers", "0"])
    assert "took no step" not in capsys.readouterr().err
    train.main(["--config", str(config), "--output-folder", str(out), "--num-workers", "0", "--resume",
                "--num-batches", "12"])
    err = capsys.readouterr().err
    assert err.count("warning: iteration 9: the last 10 updates took no step") == 1
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["outer_steps"] for row in rows] == [0] * 12 and {row["outer_step_scale"] for row in rows} == {0.0}
    # With backtracks a limit below every first step shortens it instead: one step an iteration, each
    # a power of two of Adam's, within the limit.
    config = small_config(tmp_path, "b.yaml", algorithm="promp", **{"num-batches": 3, "outer-kl-limit": 1e-6,
                                                                    "outer-kl-backtracks": 30})
    train.main(["--config", str(config), "--output-folder", str(tmp_path / "b"), "--num-workers", "0"])
    rows = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [row["outer_steps"] for row in rows] == [1, 1, 1]
    assert all(0 < row["outer_step_scale"] < 1 and row["outer_kl"] <= 1e-6 for row in rows)
    assert "took no step" not in capsys.readouterr().err
