"""report.py and maml_rl.reports: IQM and its bootstrap interval against hand-computed cases, the
probability of improvement at its extremes, and the whole workflow on real runs (train.py --seeds,
test.py, report.py) for two algorithms, with the files' misuse."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("MAML_RL_REQUIRE_STATS"):
    import rliable  # noqa: F401  (CI installs the stats extra: missing, this fails instead of skipping)
else:
    pytest.importorskip("rliable")

from maml_rl.config import ConfigError
from maml_rl.reports import Run, compare, curves, summarise

from conftest import write_small_config
from scripts import evaluate as test_script
from scripts import load_script, train

report = load_script("report")


def fake_run(score, algorithm="a", seed=0, before=0.0, steps=100, curve=None):
    curve = np.array(curve if curve is not None else [score - 1.0, score])
    return Run(Path(f"/runs/{algorithm}-{seed}"), "Env-v0", algorithm, seed, float(score), before, None,
               np.linspace(steps / len(curve), steps, len(curve)), curve)


def test_iqm_and_interval_by_hand():
    # IQM of 1..8: the middle half, 3 4 5 6, averages 4.5 (the mean is also 4.5; take a skewed set too).
    (summary,) = summarise([fake_run(s, seed=s) for s in range(1, 9)], reps=2000)
    assert summary.iqm == pytest.approx(4.5) and summary.mean == pytest.approx(4.5)
    (skewed,) = summarise([fake_run(s, seed=i) for i, s in enumerate([0, 1, 2, 3, 4, 5, 6, 100])], reps=2000)
    assert skewed.iqm == pytest.approx((2 + 3 + 4 + 5) / 4) and skewed.mean == pytest.approx(121 / 8)
    assert skewed.worst.after == 0 and skewed.worst.seed == 0
    for s in (summary, skewed):
        assert s.ci[0] <= s.iqm <= s.ci[1] and s.ci[0] >= 0 and s.ci[1] <= 100
        assert s.ci[1] > s.ci[0]
    # Seeded (rliable draws from numpy's global generator: the report seeds it and gives its state back).
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    assert summarise([fake_run(s, seed=s) for s in range(1, 9)], reps=2000)[0].ci == summary.ci
    assert np.random.random() == expected_next
    noisy = [fake_run(x, seed=i) for i, x in enumerate(np.random.default_rng(0).normal(size=8))]
    assert summarise(noisy, reps=200, seed=0)[0].ci == summarise(noisy, reps=200, seed=0)[0].ci
    assert summarise(noisy, reps=200, seed=0)[0].ci != summarise(noisy, reps=200, seed=1)[0].ci


def test_degenerate_groups():
    (one,) = summarise([fake_run(3.0)], reps=200)
    assert one.iqm == 3.0 and one.ci == (3.0, 3.0)
    assert any("1 runs" in note for note in one.notes)
    (same,) = summarise([fake_run(2.0, seed=s) for s in range(5)], reps=200)
    assert same.ci == (2.0, 2.0) and same.notes == []
    (mixed,) = summarise([fake_run(1.0, seed=1, steps=100), fake_run(2.0, seed=2, steps=200)], reps=200)
    assert any("budgets differ" in note for note in mixed.notes)


def test_probability_of_improvement_at_its_extremes():
    better, worse = summarise([*(fake_run(10 + s, "x", s) for s in range(4)),
                               *(fake_run(s, "y", s) for s in range(4))], reps=500)
    assert compare(better, worse, reps=500) == (1.0, (1.0, 1.0))
    assert compare(worse, better, reps=500) == (0.0, (0.0, 0.0))
    tie = summarise([fake_run(1.0, "x", 0), fake_run(1.0, "y", 0)], reps=200)
    assert compare(*tie, reps=200)[0] == 0.5


def test_runs_of_one_algorithm_with_other_settings_are_not_pooled():
    from maml_rl.reports import _with_defaults

    def run(score, seed, **config):
        r = fake_run(score, "promp", seed)
        r.config = _with_defaults({"algorithm": "promp", "env-name": "Env-v0", "seed": seed, "num-batches": 300,
                                   **config})
        return r

    # A key left out is its default (None): seed 1 and 2 are one configuration, the limited runs another;
    # a run stopped at another iteration count stays in its group (the budget note says so).
    runs = [run(1.0, 1), run(2.0, 2, **{"outer-kl-limit": None}), run(10.0, 1, **{"outer-kl-limit": 0.1}),
            run(12.0, 2, **{"outer-kl-limit": 0.1, "num-batches": 200})]
    plain, limited = summarise(runs, reps=200)
    assert [r.seed for r in plain.runs] == [1, 2] and [r.seed for r in limited.runs] == [1, 2]
    assert plain.settings == {"outer-kl-limit": None} and limited.settings == {"outer-kl-limit": 0.1}
    assert plain.label == "promp (outer-kl-limit=null)" and limited.label == "promp (outer-kl-limit=0.1)"
    assert plain.iqm == pytest.approx(1.5) and limited.iqm == pytest.approx(11.0)
    # One configuration: the label is the algorithm's alone.
    (alone,) = summarise(runs[:2], reps=200)
    assert alone.label == "promp" and alone.settings == {}
    # Two keys that differ: both name the group, in the hyperparameter table's order.
    runs.append(run(5.0, 3, **{"outer-kl-limit": 0.1, "outer-lr": 0.01}))
    labels = [s.label for s in summarise(runs, reps=200)]
    assert labels == ["promp (outer-lr=0.001, outer-kl-limit=null)", "promp (outer-lr=0.001, outer-kl-limit=0.1)",
                      "promp (outer-lr=0.01, outer-kl-limit=0.1)"]


def test_curves_follow_the_common_length():
    runs = [fake_run(0, seed=s, curve=[s, s + 1, s + 2, 99][: 3 + (s == 0)]) for s in range(4)]
    (summary,) = summarise(runs, reps=200)
    c = curves(summary, reps=200)
    assert list(c["iteration"]) == [0, 1, 2]
    assert c["iqm"] == pytest.approx([1.5, 2.5, 3.5])
    assert (c["low"] <= c["iqm"]).all() and (c["iqm"] <= c["high"]).all()


@pytest.mark.processes
def test_seeds_then_test_then_report_on_real_runs(tmp_path):
    for algorithm, extra in (("maml-trpo", {}), ("promp", {"outer-steps": 2})):
        config = write_small_config(tmp_path, f"{algorithm}.yaml", **{"algorithm": algorithm, "num-batches": 2},
                                    **extra)
        train.main(["--config", str(config), "--output-folder", str(tmp_path / algorithm), "--num-workers", "0",
                    "--seeds", "1", "2"])
        for seed in (1, 2):
            folder = tmp_path / algorithm / f"seed-{seed}"
            assert json.loads((folder / "config.json").read_text())["seed"] == seed
            test_script.main(["--config", str(folder / "config.json"), "--meta-batch-size", "3", "--num-workers", "0"])
    png, out = tmp_path / "curves.png", tmp_path / "report.json"
    figures = report.main([str(tmp_path / "maml-trpo"), str(tmp_path / "promp"), "--plot", str(png), "--json", str(out),
                           "--reps", "500"])
    assert [(g["algorithm"], g["seeds"]) for g in figures["groups"]] == [("maml-trpo", [1, 2]), ("promp", [1, 2])]
    for group in figures["groups"]:
        scores = []
        for folder in group["folders"]:
            with np.load(Path(folder) / "results.npz") as results:
                scores.append(results["valid_returns"].mean())
        assert group["scores"] == pytest.approx(scores)
        assert group["iqm"] == pytest.approx(np.mean(scores))  # two runs: the IQM trims nothing
        assert group["ci"][0] <= group["iqm"] <= group["ci"][1]
        assert group["worst"] == pytest.approx(min(scores))
    (comparison,) = figures["comparisons"]
    assert 0 <= comparison["probability_a_beats_b"] <= 1
    assert png.stat().st_size > 0 and json.loads(out.read_text()) == json.loads(json.dumps(figures))


def test_misuse_is_refused_with_what_to_do(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(ConfigError, match="neither a run folder"):
        report.main([str(tmp_path / "nothing")])
    (run / "config.json").write_text(json.dumps({"env-name": "2DNavigation-v0", "seed": 1}))
    (run / "metrics.jsonl").write_text(json.dumps({"return_after": 1.0, "total_env_steps": 10}) + "\n")
    with pytest.raises(ConfigError, match=r"no results.npz; it is written by python test.py --config"):
        report.main([str(run)])
    # An object array would need unpickling: refused, never loaded.
    np.savez(run / "results.npz", valid_returns=np.array([{"evil": 1}], dtype=object), train_returns=np.zeros(1))
    with pytest.raises(ConfigError, match="not a results file"):
        report.main([str(run)])
    np.savez(run / "results.npz", valid_returns=np.ones((2, 2)), train_returns=np.zeros((2, 2)))
    (run / "metrics.jsonl").write_text("{not json\n")
    with pytest.raises(ConfigError, match="not valid JSON"):
        report.main([str(run)])
    (run / "metrics.jsonl").write_text(json.dumps({"return_after": 1.0, "total_env_steps": 10}) + "\n")
    with pytest.raises(ConfigError, match="--reps"):
        report.main([str(run), "--reps", "10"])
    figures = report.main([str(run), "--reps", "200"])
    assert figures["groups"][0]["algorithm"] == "maml-trpo" and figures["groups"][0]["iqm"] == 1.0
    with pytest.raises(SystemExit):
        train.parse_args(["--seed", "1", "--seeds", "2", "3"])
    with pytest.raises(SystemExit):
        train.parse_args(["--seeds", "2", "2"])
    assert "each seed once" in capsys.readouterr().err
