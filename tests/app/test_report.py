"""report.py and maml_rl.app.reports: IQM and its bootstrap interval against hand-computed cases, the
probability of improvement at its extremes, and the whole workflow on real runs (train.py --seeds,
test.py, report.py) for two algorithms, with the files' misuse."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("MAML_RL_REQUIRE_STATS"):
    import rliable  # noqa: F401  (CI installs the stats extra: missing, this fails instead of skipping)
else:
    pytest.importorskip("rliable")

from maml_rl.app.config_files import ConfigError
from maml_rl.app.reports import Run, compare, curves, summarise
from maml_rl.app.results import COMMON_SETTINGS

from helpers import ROOT
from helpers.scripts import evaluate as test_script
from helpers.scripts import load_script, train

report = load_script("report")


def fake_run(score, algorithm="a", seed=0, before=0.0, steps=100, curve=None, success=None):
    curve = np.array(curve if curve is not None else [score - 1.0, score])
    evaluation = {"policy": {"file": "policy.th", "sha256": "", "iteration": None, "num-batches": None},
                  "settings": dict.fromkeys(COMMON_SETTINGS)}
    return Run(Path(f"/runs/{algorithm}-{seed}"), "Env-v0", algorithm, seed, float(score), before, success,
               np.linspace(steps / len(curve), steps, len(curve)), curve, evaluation=evaluation)


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
    # One score is not bootstrapped (a 100-attempt curve of one seed took a minute): rliable's own answer is the same.
    from rliable import library, metrics
    point, ci = library.get_interval_estimates({"x": np.array([[3.0]])},
                                               lambda x: np.array([metrics.aggregate_iqm(x)]), reps=200)
    assert (float(point["x"][0]), (float(ci["x"][0, 0]), float(ci["x"][1, 0]))) == (3.0, (3.0, 3.0))
    assert any("1 runs" in note for note in one.notes)
    (same,) = summarise([fake_run(2.0, seed=s) for s in range(5)], reps=200)
    assert same.ci == (2.0, 2.0) and same.notes == []
    (mixed,) = summarise([fake_run(1.0, seed=1, curve=[0, 1]), fake_run(2.0, seed=2, curve=[0, 1, 2])], reps=200)
    assert any("budgets differ" in note and "iterations run [2, 3]" in note for note in mixed.notes)


def test_equal_budgets_whose_episodes_end_early_are_not_called_different():
    """'the runs' budgets differ' fired for identical configs whose episodes end early (env steps 2% apart)."""
    runs = [fake_run(1.0, seed=s, steps=steps) for s, steps in enumerate([10_000, 10_150, 10_210, 9_990])]
    for run in runs:
        run.config = {"num-batches": 2}
    (summary,) = summarise(runs, reps=200)
    assert not any("budgets" in note for note in summary.notes)
    runs[0].config = {"num-batches": 3}
    (summary,) = summarise(runs, reps=200)
    assert any("budgets differ: num-batches 2, 3" in note for note in summary.notes)


def test_probability_of_improvement_at_its_extremes():
    better, worse = summarise([*(fake_run(10 + s, "x", s) for s in range(4)),
                               *(fake_run(s, "y", s) for s in range(4))], reps=500)
    assert compare(better, worse, reps=500) == (1.0, (1.0, 1.0))
    assert compare(worse, better, reps=500) == (0.0, (0.0, 0.0))
    tie = summarise([fake_run(1.0, "x", 0), fake_run(1.0, "y", 0)], reps=200)
    assert compare(*tie, reps=200)[0] == 0.5


def test_probability_of_improvement_on_success_by_hand():
    """Meta-World's headline is success: the comparison and the worst seed are given on it too, counted over
    the pairs of runs with ties as half (hand count below), independent of the returns (all equal here)."""
    x, y = [0.3, 0.2, 0.5], [0.25, 0.1, 0.2]
    a, b = summarise([*(fake_run(7.0, "x", s, success=v) for s, v in enumerate(x)),
                      *(fake_run(7.0, "y", s, success=v) for s, v in enumerate(y))], reps=500)
    # 0.3 beats all three; 0.2 beats 0.1, ties 0.2, loses to 0.25; 0.5 beats all three: 7.5 of 9 pairs.
    assert compare(a, b, reps=500, metric="success")[0] == pytest.approx(7.5 / 9)
    assert compare(b, a, reps=500, metric="success")[0] == pytest.approx(1.5 / 9)
    assert compare(a, b, reps=500)[0] == 0.5  # the returns tie
    assert (a.success_worst.seed, a.success_worst.success_after) == (1, 0.2)
    assert (b.success_worst.seed, b.success_worst.success_after) == (1, 0.1)
    (single,) = summarise([fake_run(1.0, "z", 0, success=0.0)], reps=200)
    assert single.success_worst.seed == 0  # one run, success 0: still a worst seed
    (plain,) = summarise([fake_run(1.0, "r", s) for s in range(2)], reps=200)
    assert plain.success_worst is None
    with pytest.raises(ValueError, match="no success to compare"):
        compare(a, plain, reps=200, metric="success")
    with pytest.raises(ValueError, match="use one of return, success"):
        compare(a, b, reps=200, metric="succes")


def test_report_on_the_committed_metaworld_runs_compares_success_as_counted_by_hand(capsys):
    """The committed ML10 runs: P(MAML-TRPO > RL²) on success equals the count over seed pairs made here from
    each results.npz, and the worst seed on success is the lowest of them."""
    base = ROOT / "docs" / "runs" / "metaworld-ml10"
    folders = sorted(p for p in (base / "maml-trpo").glob("seed-*") if (p / "results.npz").exists()) + \
        sorted(p for p in (base / "rl2-recipe").glob("seed-*") if (p / "results.npz").exists())
    success = {}
    for folder in folders:
        with np.load(folder / "results.npz", allow_pickle=False) as results:
            success[folder] = float(np.asarray(results["valid_success"], dtype=float).mean())
    maml = [v for f, v in success.items() if f.parent.name == "maml-trpo"]
    rl2 = [v for f, v in success.items() if f.parent.name == "rl2-recipe"]
    assert len(maml) >= 3 and len(rl2) >= 3
    pairs = sum(1.0 if m > r else 0.5 if m == r else 0.0 for m in maml for r in rl2) / (len(maml) * len(rl2))
    figures = report.main([str(f) for f in folders] + ["--reps", "200"])
    (comparison,) = figures["comparisons"]
    assert comparison["a"] == "maml-trpo" and comparison["b"] == "rl2-ppo"
    assert comparison["success"]["probability_a_beats_b"] == pytest.approx(pairs)
    low, high = comparison["success"]["ci"]
    assert 0 <= low <= pairs <= high <= 1
    for group, values in zip(figures["groups"], (maml, rl2)):
        assert group["success_scores"] == pytest.approx(values)
        worst = min(range(len(values)), key=values.__getitem__)
        assert group["success_worst_seed"] == group["seeds"][worst]
    out = capsys.readouterr().out
    assert f"P(maml-trpo > rl2-ppo) on success = {pairs:.2f}" in out


def test_runs_of_one_algorithm_with_other_settings_are_not_pooled():
    from maml_rl.app.report_runs import with_defaults as _with_defaults

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
def test_seeds_then_test_then_report_on_real_runs(tmp_path, small_config):
    for algorithm, extra in (("maml-trpo", {}), ("promp", {"outer-steps": 2})):
        config = small_config(tmp_path, f"{algorithm}.yaml", **{"algorithm": algorithm, "num-batches": 2}, **extra)
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


@pytest.fixture(scope="module")
def seeds(tmp_path_factory, small_config):
    """Two seeds of one config, one iteration each, evaluated by test.py (copy before changing them)."""
    folder = tmp_path_factory.mktemp("seeds")
    config = small_config(folder, **{"num-batches": 1})
    train.main(["--config", str(config), "--output-folder", str(folder / "nav"), "--num-workers", "0",
                "--seeds", "1", "2"])
    for seed in (1, 2):
        evaluate(folder / "nav" / f"seed-{seed}")
    return folder / "nav"


def evaluate(run, *extra):
    test_script.main(["--config", str(run / "config.json"), "--meta-batch-size", "2", "--num-workers", "0", *extra])


def copy(seeds, tmp_path):
    shutil.copytree(seeds, tmp_path / "nav")
    return tmp_path / "nav"


def test_a_run_reached_twice_counts_once_and_a_copy_is_refused(seeds, tmp_path, capsys):
    """A parent folder with one of its seed folders, a symbolic link, a copied seed folder: each counted twice."""
    nav = copy(seeds, tmp_path)
    (tmp_path / "link").symlink_to(nav / "seed-1")
    figures = report.main([str(nav), str(nav / "seed-1"), str(tmp_path / "link"), "--reps", "200"])
    (group,) = figures["groups"]
    assert group["seeds"] == [1, 2]
    err = capsys.readouterr().err
    assert f"note: {nav / 'seed-1'} is the run {nav / 'seed-1'} reached again: counted once" in err
    assert f"note: {tmp_path / 'link'} is the run {nav / 'seed-1'} reached again: counted once" in err
    shutil.copytree(nav / "seed-1", tmp_path / "elsewhere" / "seed-1")
    with pytest.raises(ConfigError) as info:
        report.main([str(nav), str(tmp_path / "elsewhere"), "--reps", "200"])
    assert f"{nav / 'seed-1'} and {tmp_path / 'elsewhere' / 'seed-1'} hold the same run" in str(info.value)


def test_runs_evaluated_otherwise_are_not_pooled(seeds, tmp_path):
    """One seed evaluated with --num-steps 2 was pooled with seeds evaluated after 1 step."""
    nav = copy(seeds, tmp_path)
    evaluate(nav / "seed-2", "--num-steps", "2")
    figures = report.main([str(nav), "--reps", "200"])
    one, two = figures["groups"]
    assert (one["seeds"], two["seeds"]) == ([1], [2])
    assert one["evaluated"] == {"num-steps": 1} and two["evaluated"] == {"num-steps": 2}
    assert two["label"] == "maml-trpo (evaluated with num-steps=2)"
    assert any(note.startswith("EVALUATED DIFFERENTLY") for note in two["notes"])
    assert figures["comparisons"] == []
    assert figures["not_compared"] == [
        "2DNavigation-v0: maml-trpo (evaluated with num-steps=1) and maml-trpo (evaluated with num-steps=2) not "
        "compared: evaluated with other settings (num-steps 1 vs 2)"]


def test_results_older_than_the_policy_are_flagged(seeds, tmp_path):
    """A results.npz of a run that trained on after test.py was reported as the run's score."""
    nav = copy(seeds, tmp_path)
    assert not any("STALE" in note for note in report.main([str(nav), "--reps", "200"])["groups"][0]["notes"])
    train.main(["--output-folder", str(nav / "seed-1"), "--resume", "--num-batches", "2", "--num-workers", "0"])
    notes = report.main([str(nav), "--reps", "200"])["groups"][0]["notes"]
    assert [note for note in notes if "STALE" in note] == [
        f"STALE: seed 1 ({nav / 'seed-1'}): results.npz no longer stands for the run's policy: it evaluated "
        "policy.th at iteration 1, which has changed since (the run trained on, or the file was replaced); rerun "
        f"python test.py --config {nav / 'seed-1' / 'config.json'}"]


@pytest.mark.parametrize("damage, message", [
    ("empty returns", "results.npz: holds no returns (valid_returns or train_returns is empty); rerun python test.py"),
    ("NaN returns", "results.npz: holds returns that are not finite (NaN or infinite); rerun python test.py"),
    ("truncated results", "results.npz: damaged or cut short, not the archive test.py writes"),
    ("NaN per-stage success", "results.npz: holds per-stage returns or success that are not finite, or not one row "
                              "per stage; rerun python test.py"),
    ("config without env-name", "config.json: has no env-name, so it is not the config.json of a training run; "
                                "restore the run's config.json"),
    ("config a list", "config.json: holds a JSON list, not a configuration"),
    ("rows not objects", "metrics.jsonl: its lines are not JSON objects"),
])
def test_damaged_files_are_named_with_what_to_do(seeds, tmp_path, damage, message):
    """An empty valid_returns gave IQM NaN and exit 0; a truncated results.npz a BadZipFile and a config.json
    without env-name a KeyError, as tracebacks."""
    run = copy(seeds, tmp_path) / "seed-1"
    results = run / "results.npz"
    if damage == "empty returns":
        np.savez(results, valid_returns=np.zeros((0, 4)), train_returns=np.zeros((0, 4)))
    elif damage == "NaN returns":
        np.savez(results, valid_returns=np.full((2, 4), np.nan), train_returns=np.zeros((2, 4)))
    elif damage == "NaN per-stage success":  # what --attempts reads, checked for every report
        with np.load(results, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files if key != "tasks"}  # tasks: objects, not read
        arrays["success_per_step"] = np.full_like(arrays["returns_per_step"], np.nan)
        np.savez(results, **arrays)
    elif damage == "truncated results":
        results.write_bytes(results.read_bytes()[:200])
    elif damage == "config without env-name":
        config = json.loads((run / "config.json").read_text())
        del config["env-name"]
        (run / "config.json").write_text(json.dumps(config))
    elif damage == "config a list":
        (run / "config.json").write_text("[1, 2]")
    else:
        (run / "metrics.jsonl").write_text("[1, 2]\n")
    with pytest.raises(ConfigError) as info:
        report.main([str(run), "--reps", "200"])
    assert str(info.value).startswith(str(run / message.split(":")[0]) + ":" + message.split(":", 1)[1])


def test_one_install_hint_for_the_stats_extra():
    """report.py's extra had two install hints: pip install 'maml_rl[stats]' and pip install -e ".[stats]"."""
    root = ROOT
    texts = [path.read_text() for path in [root / "README.md", root / "report.py", *root.glob("docs/*.md"),
                                            *root.glob("maml_rl/**/*.py")]]
    assert not any("maml_rl[" in text for text in texts)
    assert any('pip install -e ".[stats]"' in text for text in texts)


def test_attempt_curves_of_real_trial_runs_with_the_context_reset(tmp_path, reference_runs):
    """``--attempts`` on two seeds of rl2-ppo's small run (the session's reference run and one more seed), each evaluated by test.py as it is and with the context
    reset at each attempt (``--results`` naming both files): two groups, their curves the per-stage means of
    test.py's files counted here, the reset group labelled, the figure written."""
    reference = reference_runs("rl2-ppo")  # the session's seed, trained once for the contract tests too
    (tmp_path / "rl2").mkdir()
    shutil.copytree(reference, tmp_path / "rl2" / "seed-a", ignore=shutil.ignore_patterns("results*.npz"))
    train.main(["--config", str(reference / "config.json"), "--output-folder", str(tmp_path / "rl2" / "seed-b"),
                "--num-workers", "0", "--seed", str(reference_runs.SEED + 1)])
    runs = [tmp_path / "rl2" / name for name in ("seed-a", "seed-b")]
    for run in runs:
        evaluate(run)
        evaluate(run, "--reset-context-each-attempt", "--output", str(run / "results-reset.npz"))
    png, out = tmp_path / "attempts.png", tmp_path / "report.json"
    figures = report.main([str(tmp_path / "rl2"), "--results", "results.npz", "results-reset.npz",
                           "--attempts", str(png), "--json", str(out), "--reps", "200"])
    assert png.stat().st_size > 0 and json.loads(out.read_text())["attempts"] == figures["attempts"]
    plain, reset = figures["attempts"]
    assert (plain["label"], reset["label"]) == ("rl2-ppo, context kept", "rl2-ppo, context reset at each attempt")
    stages = json.loads((runs[0] / "config.json").read_text())["episodes-per-trial"] + 1  # + the evaluation row
    for curve, name in ((plain, "results.npz"), (reset, "results-reset.npz")):
        by_hand = []
        for run in runs:
            with np.load(run / name, allow_pickle=False) as results:
                by_hand.append([float(np.mean(row)) for row in results["returns_per_step"]])
        assert curve["seeds"] == 2 and np.asarray(by_hand).shape == (2, stages)
        assert np.allclose(curve["returns"]["runs"], by_hand, rtol=1e-12, atol=0)
        # Two runs: the IQM trims nothing, it is their mean at each attempt.
        assert curve["returns"]["iqm"] == pytest.approx(np.mean(by_hand, axis=0))
        assert all(lo <= m <= hi for lo, m, hi in zip(curve["returns"]["low"], curve["returns"]["iqm"],
                                                      curve["returns"]["high"]))
        assert curve["success"] is None  # 2D navigation reports no success


def test_attempts_without_a_trial_learner_is_refused(seeds, capsys):
    with pytest.raises(ConfigError, match="--attempts: no group of trial learners' runs"):
        report.main([str(seeds), "--attempts", "x.png", "--reps", "200"])
    assert "not in --attempts" in capsys.readouterr().err


BANDIT_RUNS = ROOT / "docs/runs/bandit-k5-n100"


def test_attempt_curves_with_the_references_on_the_committed_bandit_runs(tmp_path):
    """``--references``: the committed RL² bandit run and Thompson sampling, UCB1, random and the best arm on the
    same 500 tasks (the run's references.json): each reference's curve is its file's mean reward per pull, the
    run's curve its results.npz's mean return at each stage (one seed: no interval)."""
    run, refs = BANDIT_RUNS / "rl2" / "seed-1", BANDIT_RUNS / "rl2" / "seed-1" / "references.json"
    png, out = tmp_path / "attempts.png", tmp_path / "report.json"
    figures = report.main([str(run), "--attempts", str(png), "--references", str(refs), "--json", str(out),
                           "--reps", "200"])
    assert png.stat().st_size > 0 and json.loads(out.read_text())["references"] == figures["references"]
    (reference,) = figures["references"]
    committed = json.loads(refs.read_text())
    assert reference["env"] == "Bandit-K5-v0" and reference["tasks"] == committed["tasks"] == 500
    assert set(reference["returns"]) == {"random", "ucb1", "thompson", "oracle"}  # not the policy's own figures
    for name, curve in reference["returns"].items():
        assert curve == committed["algorithms"][name]["mean_reward_per_pull"]
    (curve,) = figures["attempts"]
    with np.load(run / "results.npz", allow_pickle=False) as results:
        by_hand = [float(np.mean(row)) for row in results["returns_per_step"]]
    assert len(by_hand) == 101 and np.allclose(curve["returns"]["iqm"], by_hand, rtol=1e-12, atol=0)
    assert curve["returns"]["low"] == curve["returns"]["iqm"] == curve["returns"]["high"]


def test_references_that_do_not_fit_the_runs_are_refused_with_what_to_do(tmp_path):
    from maml_rl.references.__main__ import main as references

    run = str(BANDIT_RUNS / "rl2" / "seed-1")

    def refused(*args):
        with pytest.raises(ConfigError) as info:
            report.main([run, "--reps", "200", *args])
        return str(info.value)

    refs = str(BANDIT_RUNS / "rl2" / "seed-1" / "references.json")
    assert "give --attempts PNG too" in refused("--references", refs)
    png = str(tmp_path / "a.png")
    mdp = str(ROOT / "docs/runs/references/tabular-mdp-10x5-h10-e10.json")
    message = refused("--attempts", png, "--references", mdp)
    assert "holds TabularMDP-v0's tasks, and no run plotted is on TabularMDP-v0" in message
    assert "Bandit-K5-v0" in message
    references(["bandit", "--pulls", "50", "--tasks", "3", "--output", str(tmp_path / "short")])
    message = refused("--attempts", png, "--references", str(tmp_path / "short.json"))
    assert "has 50 attempts a trial, the runs on Bandit-K5-v0 100" in message and "--on RESULTS.npz" in message
    hint = "python -m maml_rl.references {bandit,mdp} ... --output OUT"
    (tmp_path / "text.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "nan.json").write_text(json.dumps({**json.loads(open(refs).read()), "algorithms": {
        "thompson": {"mean_reward_per_pull": [0.5, float("nan")]}}}))
    for name, what in (("missing.json", "no such file"), ("text.json", "JSONDecodeError"),
                       ("list.json", "not a references file"), ("nan.json", "not a list of finite numbers"),
                       ("short.npz", "not a references file")):
        message = refused("--attempts", png, "--references", str(tmp_path / name))
        assert message.startswith(f"--references: {tmp_path / name}: ") and what in message and hint in message
    assert not os.path.exists(png)
