"""The diagnostic scripts of tools/ on small real runs: they must see what the run saw."""

from __future__ import annotations

import json
import os
import re

import pytest

from helpers.runs import read_metrics
from helpers.scripts import load_tool, train


def test_outer_steps_trace_replays_the_runs_next_iteration(tmp_path, capsys, small_config):
    config = small_config(tmp_path, **{"algorithm": "promp", "num-batches": 3, "outer-steps": 3})
    for name, batches in (("whole", "3"), ("two", "2")):
        train.main(["--config", str(config), "--output-folder", str(tmp_path / name), "--num-workers", "0",
                    "--seed", "5", "--num-batches", batches])
    capsys.readouterr()
    load_tool("outer_steps_trace").main([str(tmp_path / "two" / "checkpoint.pt"), "--outer-kl-limit", "1e-12"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("iteration 2") and len(lines) == 1 + 3 + 1
    logged = {m[0]: float(m[1]) for m in re.findall(r"(\w+) (\S+)", lines[3].split(": ", 1)[1])}
    row = read_metrics(tmp_path / "whole")[2]
    # Three Adam steps from the checkpoint are the run's third iteration (printed to 4 digits).
    for key in ("loss_before", "loss_after", "inner_kl", "outer_kl", "clip_fraction"):
        assert f"{logged[key]:.4g}" == f"{row[key]:.4g}", key
    assert logged["outer_steps"] == 3 == row["outer_steps"]
    kls = [float(re.search(r"outer_kl (\S+)", line).group(1)) for line in lines[1:4]]
    assert 0 < kls[0] and kls[0] != kls[2]
    assert lines[4].startswith("3 Adam step(s), outer-kl-limit 1e-12") and lines[4].endswith("outer_steps 0")


def test_step_audit_measures_updates_on_a_fixed_evaluation_set(tmp_path, capsys, small_config):
    config = small_config(tmp_path, **{"num-batches": 1})
    train.main(["--config", str(config), "--output-folder", str(tmp_path / "run"), "--num-workers", "0",
                "--seed", "5"])
    audit = load_tool("step_audit")
    capsys.readouterr()
    for _ in range(2):  # the same seed gives the same figures
        audit.main([str(tmp_path / "run" / "checkpoint.pt"), "--updates", "2", "--meta-batch-size", "2", "3",
                    "--eval-tasks", "2"])
    out = capsys.readouterr().out.splitlines()
    first, second = out[:len(out) // 2], out[len(out) // 2:]
    strip = [re.sub(r"\(\d+ s\)", "", line) for line in first]
    assert strip == [re.sub(r"\(\d+ s\)", "", line) for line in second]
    assert sum(line.startswith("batch    2 update") for line in first) == 2
    assert sum(line.startswith("batch    3 update") for line in first) == 2
    assert re.match(r"meta-batch 3: mean evaluated change [+-]\d", first[-1])
    # Each update starts from the checkpoint, whose evaluated return is printed once.
    assert sum("at the checkpoint" in line for line in first) == 1


def test_step_audit_set_changes_the_meta_update_only(tmp_path, capsys, small_config):
    config = small_config(tmp_path, **{"num-batches": 1})
    train.main(["--config", str(config), "--output-folder", str(tmp_path / "run"), "--num-workers", "0",
                "--seed", "5"])
    audit = load_tool("step_audit")
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    _, config, _, _, learner = audit.load_run(checkpoint, [("max-kl", 0.005)])
    assert config["max-kl"] == 0.005 and learner.max_kl == 0.005
    own = json.loads((tmp_path / "run" / "config.json").read_text())["max-kl"]
    assert own != 0.005
    capsys.readouterr()
    # Setting the checkpoint's own value changes nothing but the header; a smaller step changes the figures.
    runs = []
    for extra in ([], ["--set", f"max-kl={own}"], ["--set", "max-kl=0.0001"]):
        audit.main([str(checkpoint), "--updates", "2", "--meta-batch-size", "2", "--eval-tasks", "2", *extra])
        runs.append(capsys.readouterr().out.splitlines())
    plain, same, small = runs
    assert same[0] == plain[0] + f", max-kl={own}" and small[0].endswith(", max-kl=0.0001")
    strip = lambda lines: [re.sub(r"\(\d+ s\)", "", line) for line in lines[1:]]  # noqa: E731
    assert strip(same) == strip(plain)
    assert strip(small)[0] == strip(plain)[0]  # the evaluation at the checkpoint does not depend on the step
    assert strip(small)[1:] != strip(plain)[1:]
    with pytest.raises(ValueError, match="max-kll"):
        audit.main([str(checkpoint), "--set", "max-kll=0.1"])


def test_rl2_trial_profile_reads_episodes_by_hand():
    """Two trials of two 3-step episodes, every value written out by hand."""
    import numpy as np

    from maml_rl.data.trials import TrialBatch

    profile = load_tool("rl2_trial_profile")
    rewards = np.array([[1, 10], [2, 20], [3, 30], [4, 40], [5, 50], [6, 60]], dtype=np.float32)
    success = np.array([[0, 1], [1, 0], [1, 0], [0, 0], [0, 0], [0, 1]], dtype=np.float32)
    dones = np.zeros((6, 2), dtype=np.uint8)
    dones[2] = dones[5] = 2  # each episode cut at its third step
    batch = TrialBatch(np.zeros((6, 2, 1)), np.zeros((6, 2, 1)), rewards, [6, 6], dones=dones, episodes_per_trial=2,
                       infos={"success": success})
    episodes = profile.episode_profile(batch, 2)
    assert [[row["first"] for row in rows] for rows in episodes] == [[1, 0], [None, 2]]
    assert [list(row["rewards"]) for row in episodes[1]] == [[4, 5, 6], [40, 50, 60]]
    (k0, rate0, first0, early0, _), (k1, rate1, first1, early1, _) = profile.summarise([episodes], 2)
    assert (k0, rate0, first0, early0) == (0, 1.0, 0.5, 11.0)  # median of steps 1 and 0; (2 + 20) / 2
    assert (k1, rate1, first1, early1) == (1, 0.5, 2.0, 27.5)  # (5 + 50) / 2
    # Two goals alike: the gain of the first 100 steps, episode 1 minus 0, is 27.5 - 11 each, with no spread.
    assert profile.early_gain([episodes, episodes], 2) == (16.5, 0.0)
    # Trials of an env that reports no success: the trials' own message, naming the fix.
    blind = TrialBatch(np.zeros((6, 2, 1)), np.zeros((6, 2, 1)), rewards, [6, 6], dones=dones, episodes_per_trial=2)
    with pytest.raises(KeyError, match="carry no info 'success'.*info_keys"):
        profile.episode_profile(blind, 2)


@pytest.mark.metaworld
@pytest.mark.slow
def test_rl2_trial_profile_matches_test_py_trials(tmp_path, capsys):
    """The profile's success per episode is test.py's trial rows on the same seed, with the reward in the
    input and with it zeroed (test.py on a copy of the config with reward-scale 0)."""
    pytest.importorskip("metaworld")
    import numpy as np

    from helpers.scripts import evaluate

    run = tmp_path / "run"
    train.main(["--config", "configs/rl2/metaworld/ml1-reach.yaml", "--output-folder", str(run), "--seed", "1",
                "--num-workers", "0", "--set", "num-batches=1", "--set", "meta-batch-size=2",
                "--set", "episodes-per-trial=3", "--set", "env-kwargs.max_episode_steps=20",
                "--set", "hidden-sizes=[16]", "--set", "gru-size=16", "--set", "bptt-chunk=20",
                "--set", "bptt-overlap=5", "--set", "ppo-epochs=1"])
    blind = json.loads((run / "config.json").read_text())
    blind["reward-scale"] = 0.0
    (run / "config-blind.json").write_text(json.dumps(blind))
    capsys.readouterr()
    load_tool("rl2_trial_profile").main([str(run), "--seed", "2"])
    out = capsys.readouterr().out
    assert out.startswith(f"{run}: 50 test goals, one trial of 3 episodes each")
    tables = [part.split("\n", 2)[2] for part in out.split("\n\n")[1:]]
    # Per episode: success rate and the mean reward of steps 0-99 (here the whole 20-step episode).
    rows = [[line.split("|") for line in table.splitlines()[:3]] for table in tables]
    printed = [[(float(r[1].strip().rstrip("%")), float(r[3])) for r in table] for table in rows]
    for config, column in (("config.json", printed[0]), ("config-blind.json", printed[1])):
        results = evaluate.main(["--config", str(run / config), "--policy", str(run / "policy.th"), "--all-tasks",
                                 "--meta-batch-size", "50", "--seed", "2", "--num-workers", "0",
                                 "--output", str(tmp_path / f"{config}.npz")])
        success = [round(100 * rate, 1) for rate in results["success_per_step"][:3].mean(axis=1)]
        reward = results["returns_per_step"][:3].mean(axis=1) / 20
        assert [s for s, _ in column] == success
        assert np.allclose([r for _, r in column], reward, rtol=0, atol=1e-3), (column, reward)
    assert "episode 2 minus episode 0, per goal" in tables[0]
    assert [r for _, r in printed[0]] != [r for _, r in printed[1]]  # the reward input changed the trials


@pytest.mark.metaworld
@pytest.mark.slow
def test_metaworld_own_evaluation_tallies_by_hand():
    """Meta-World 3.1.1's count (the first 3 episodes to end per class) and the per-goal count, on episode ends
    written out by hand: Meta-World PR #577's case of one goal solved early among four."""
    pytest.importorskip("metaworld")
    own = load_tool("metaworld_own_evaluation")
    names = ["a"] * 4 + ["b"] * 4
    # Class a: env 0 succeeds three times before the failing goals end at the horizon.
    # Class b: env 4 succeeds once, then the three failing goals end at the same step (in env order).
    ends = [(0, True), (0, True), (4, True), (0, True), (1, False), (2, False), (3, False),
            (5, False), (6, False), (7, False), (4, True)]
    assert own.metaworld_tally(ends, names) == {"a": 1.0, "b": 1 / 3}
    assert own.per_goal_tally(ends, names) == ({"a": [1.0, 0.0, 0.0, 0.0], "b": [1.0, 0.0, 0.0, 0.0]}, [])
    # One episode counted per class instead of three; a goal's later episodes do not change its count.
    assert own.metaworld_tally(ends, names, episodes=1) == {"a": 1.0, "b": 1.0}
    assert own.per_goal_tally([(0, False)] + ends, names)[0]["a"] == [0.0, 0.0, 0.0, 0.0]
    # The loop stopped before env 7's first episode ended: not counted, and named.
    assert own.per_goal_tally([e for e in ends if e[0] != 7], names) == (
        {"a": [1.0, 0.0, 0.0, 0.0], "b": [1.0, 0.0, 0.0]}, [7])


@pytest.mark.metaworld
@pytest.mark.slow
@pytest.mark.parametrize("config", ["configs/maml/metaworld/ml1-reach.yaml", "configs/rl2/metaworld/ml1-reach.yaml"])
def test_metaworld_own_evaluation_runs_metaworlds_function(tmp_path, capsys, config):
    """Meta-World's metalearning_evaluation on a trained run: the script's replay of Meta-World's tally is the
    figure Meta-World's function returns, and the same seed prints the same table (evaluated twice for the
    recurrent policy, whose hidden state is the harder case)."""
    pytest.importorskip("metaworld")
    run = tmp_path / "run"
    small = ["--set", "hidden-sizes=[16]", "--set", "meta-batch-size=2", "--set", "num-batches=1",
             "--set", "env-kwargs.max_episode_steps=20"]
    if "rl2" in config:
        small += ["--set", "episodes-per-trial=2", "--set", "gru-size=16", "--set", "bptt-chunk=20",
                  "--set", "bptt-overlap=5", "--set", "ppo-epochs=1"]
    else:
        small += ["--set", "fast-batch-size=2"]
    train.main(["--config", config, "--output-folder", str(run), "--seed", "1", "--num-workers", "0", *small])
    own = load_tool("metaworld_own_evaluation")
    outs = []
    # The tool seeds the same way whatever the algorithm: the recurrent policy's run is evaluated twice.
    for _ in range(2 if "rl2" in config else 1):
        capsys.readouterr()
        own.main([str(run), "--seed", "3", "--num-evals", "2", "--meta-batch-size", "2",
                  "--adaptation-episodes", "2"])
        outs.append(capsys.readouterr().out)
    lines = outs[0].splitlines()
    assert "ML1 test, seed 3, 2 rounds x 2 envs, 2 adaptation + 3 evaluation episodes" in lines[0]
    assert lines[-1].endswith("(equal)"), outs[0]
    assert lines[2].startswith("reach-v3") and "| " in lines[2] and "replay" not in lines[2]
    strip = lambda text: [line.split(" (")[0] for line in text.splitlines()]  # noqa: E731  (the timing)
    assert all(strip(out) == strip(outs[0]) for out in outs)


def test_property_mutants_name_lines_the_package_has_once():
    """Each planted bug replaces a line that is in the package exactly once (a refactoring that moves one makes
    the tool refuse it rather than test an unchanged copy)."""
    from pathlib import Path

    tool = load_tool("property_mutants")
    assert len(tool.MUTANTS) >= 9
    for name, (path, old, new) in tool.MUTANTS.items():
        assert old != new, name
        assert (Path(tool.ROOT) / path).read_text().count(old) == 1, (name, path)


@pytest.mark.slow
@pytest.mark.processes
def test_property_mutants_catch_a_planted_bug_and_pass_the_package(capsys):
    """The unchanged copy passes the quick test and its cases; a copy whose reset seeds ignore the call fails
    at the first case (every case has a second call)."""
    load_tool("property_mutants").main(["--mutants", "none", "reset-seeds-ignore-the-call", "--seeds", "0",
                                        "--cases", "3"])
    lines = capsys.readouterr().out.splitlines()
    assert re.match(r"none +not caught +\| - \|", lines[1]), lines
    assert re.match(r"reset-seeds-ignore-the-call +caught +\| 1 \|", lines[2]), lines


@pytest.fixture
def stats():
    if os.environ.get("MAML_RL_REQUIRE_STATS"):
        import rliable  # noqa: F401  (CI installs the stats extra: missing, this fails instead of skipping)
    else:
        pytest.importorskip("rliable")


def test_reference_ratios_reads_each_runs_references_and_summarises_over_seeds(stats, capsys):
    """The committed bandit runs: each row is its references.json's policy figures, and the IQM of two runs is
    their mean (the middle half of two scores is both), inside the interval their resamples span."""
    from pathlib import Path

    tool = load_tool("reference_ratios")
    root = Path(tool.ROOT) / "docs/runs/bandit-k5-n100"
    runs = [root / "rl2/seed-2", root / "rl2/seed-3"]
    tool.main(["--reps", "200", "--group", "RL²", *map(str, runs), "--group", "Transformer",
               str(root / "transformer")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("bandit: score = the policy's realised regret")
    by_hand = []
    for line, run in zip(lines[2:4], runs):
        policy = json.loads((run / "references.json").read_text())["algorithms"]["policy"]
        regret, ratio = policy["realised_regret"]["mean"], policy["against"]["thompson"]["regret_ratio"]
        assert line.split()[2:4] == [f"{regret:.2f}", "±"] and line.split()[-1] == f"{ratio:.3f}", line
        by_hand.append((regret, ratio))
    (a, ra), (b, rb) = by_hand
    numbers = [float(x) for x in re.findall(r"-?\d+\.\d+", lines[4])]
    assert lines[4].startswith("RL²") and "over 2 run(s)" in lines[4], lines[4]
    assert numbers[0] == pytest.approx((a + b) / 2, abs=0.006) and numbers[3] == pytest.approx((ra + rb) / 2, abs=6e-4)
    assert min(a, b) - 0.006 <= numbers[1] <= numbers[0] <= numbers[2] <= max(a, b) + 0.006, lines[4]
    assert sum(line.startswith("Transformer ") for line in lines) == 4  # its three seed-* folders and the IQM


def test_reference_ratios_refuses_what_it_cannot_compare(stats, tmp_path, capsys):
    from pathlib import Path

    tool = load_tool("reference_ratios")
    docs = Path(tool.ROOT) / "docs/runs"
    bandit, mdp = docs / "bandit-k5-n100/rl2/seed-2", docs / "tabular-mdp-10x5/rl2/seed-2"
    with pytest.raises(SystemExit):
        tool.main(["--reps", "10", "--group", "mixed", str(bandit), str(mdp)])
    assert "different benchmarks (bandit, mdp)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tool.main(["--reps", "10", "--group", "twice", str(bandit), str(bandit)])
    assert "a run is given twice" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="neither it nor a seed-\\* folder in it holds references.json"):
        tool.main(["--group", "empty", str(tmp_path)])
    (tmp_path / "references.json").write_text("{not json")
    with pytest.raises(SystemExit, match="is not JSON"):
        tool.main(["--group", "corrupt", str(tmp_path)])
    (tmp_path / "references.json").write_text(json.dumps({"benchmark": "bandit", "algorithms": {}}))
    with pytest.raises(SystemExit, match="holds no policy evaluated"):
        tool.main(["--group", "no-policy", str(tmp_path)])


def test_reference_ratios_of_one_run_is_that_run(stats, capsys):
    """One seed: the IQM and both ends of its interval are the run's own figures (nothing to resample)."""
    from pathlib import Path

    tool = load_tool("reference_ratios")
    run = Path(tool.ROOT) / "docs/runs/tabular-mdp-10x5/transformer/seed-2"
    tool.main(["--group", "one", str(run)])
    lines = capsys.readouterr().out.splitlines()
    policy = json.loads((run / "references.json").read_text())["algorithms"]["policy"]
    total, ratio = f"{policy['total_return']['mean']:.2f}", f"{policy['against']['psrl']['return_ratio']:.3f}"
    assert lines[0].startswith("mdp: score = the policy's total return")
    assert lines[-1] == f"one            IQM over 1 run(s) [95% CI]: score {total} [{total}, {total}], " \
                        f"ratio {ratio} [{ratio}, {ratio}]", lines
