"""What train.py prints besides its iteration bar: the long phases inside an iteration (through the learners'
progress seam), the seed and budget at start, where the files are and what to run next at the end."""

from __future__ import annotations

from contextlib import contextmanager

import re

import pytest
import yaml

from helpers.runs import PEARL_TINY, assert_same_policy, load_policy, run
from maml_rl.app import progress as progress_module
from maml_rl.app import training
from maml_rl.app.progress import PhaseBar
from maml_rl.utils.progress import Progress

# PEARL on 2D navigation, a second an iteration: 4 training tasks, 2 a collection, 4 SAC steps.
TINY_PEARL = {**PEARL_TINY, "num-batches": 2, "replay-capacity": 100}


class Recorder(PhaseBar):
    """The phases a run reports, with how far each got, besides drawing them."""

    phases: list = []

    @contextmanager
    def phase(self, name, total, unit="step"):
        done = [name, total, unit, 0]
        Recorder.phases.append(done)
        with super().phase(name, total, unit) as advance:
            def count(n=1):
                done[3] += n
                advance(n)
            yield count


@pytest.fixture
def recorded(monkeypatch):
    Recorder.phases = []
    monkeypatch.setattr(training, "PhaseBar", Recorder)
    monkeypatch.setattr(progress_module, "PHASE_DELAY", 0.0)  # draw every phase at once, however short
    return Recorder.phases


def pearl_config(folder):
    path = folder / "pearl.yaml"
    path.write_text(yaml.safe_dump(TINY_PEARL))
    return path


def test_pearl_reports_its_collection_and_gradient_steps(tmp_path, recorded, capsys):
    run(pearl_config(tmp_path), tmp_path / "run", "--seed", "3")
    per_iteration = [("collection (prior)", 20, "env step", 20), ("collection (posterior)", 20, "env step", 20),
                     ("collection (extra)", 40, "env step", 40), ("SAC gradient steps", 4, "step", 4)]
    assert [tuple(p) for p in recorded] == [("initial collection, every training task", 120, "env step", 120),
                                            *per_iteration, *per_iteration]
    err = capsys.readouterr().err
    assert err.startswith("seed 3, 2 iterations of about 80 env steps (280 in all, 120 collected before the first)\n")
    # Once the first iteration is done, what it cost and what the rest takes at that rate; said once.
    costs = re.findall(r"iteration (\d+) took ([\d.]+) s \(sampling ([\d.]+) s, update ([\d.]+) s\); the (\d+) left "
                       r"take about ([\d.]+) s at this rate\n", err)
    assert len(costs) == 1 and costs[0][0] == "0" and costs[0][4] == "1", err
    for name in ("initial collection, every training task", "collection (extra)", "SAC gradient steps"):
        assert f"  {name}:   0%|" in err  # the second line, drawn as the phase starts (no delay here)
    folder = tmp_path / "run"
    assert err.rstrip().endswith(
        f"{folder}: all 2 iterations done; config.json, policy.th, checkpoint.pt and metrics.jsonl are there. "
        f"Evaluate the policy on new tasks:\n  python test.py --config {folder}/config.json "
        f"--policy {folder}/policy.th --output {folder}/results.npz")


def test_rl2_and_maml_report_their_phases(tmp_path, recorded, small_config, small_rl2_config):
    run(small_rl2_config(tmp_path), tmp_path / "rl2", "--seed", "1")
    # ppo-epochs 2 of ppo-minibatches 2, in each of 2 iterations.
    assert [tuple(p) for p in recorded] == [("PPO epochs", 4, "minibatch", 4)] * 2
    recorded.clear()
    run(small_config(tmp_path), tmp_path / "maml", "--seed", "1")
    sampling = [p for p in recorded if p[0] == "sampling"]
    assert [tuple(p) for p in sampling] == [("sampling", 2, "rollout", 2)] * 3  # one inner step: 2 rollouts
    searches = [p for p in recorded if p[0] == "line search"]
    assert len(searches) == 3 and all(p[2] == "trial" and 1 <= p[3] <= p[1] for p in searches)


def test_progress_changes_no_bit(tmp_path, recorded, monkeypatch):
    """A run that draws every phase ends with the policy of one that draws none."""
    config = pearl_config(tmp_path)
    run(config, tmp_path / "drawn", "--seed", "5")
    monkeypatch.setattr(training, "PhaseBar", Progress)
    run(config, tmp_path / "silent", "--seed", "5")
    assert_same_policy(load_policy(tmp_path / "drawn"), load_policy(tmp_path / "silent"))


def test_a_finished_run_prints_no_budget(tmp_path, small_config, capsys):
    folder = tmp_path / "run"
    run(small_config(tmp_path, **{"num-batches": 1}), folder, "--seed", "2")
    assert "seed 2, 1 iteration of about" in capsys.readouterr().err
    run(small_config(tmp_path, **{"num-batches": 1}), folder, "--resume")
    assert "seed 2" not in capsys.readouterr().err


def test_the_cost_line_by_hand():
    from maml_rl.app.progress import cost_line

    assert cost_line(0, 40.2, 11.9, 499) == ("iteration 0 took 52 s (sampling 40 s, update 12 s); the 499 left take "
                                             "about 7.2 h at this rate")
    assert cost_line(7, 100.0, 200.0, 0) == "iteration 7 took 5 min (sampling 2 min, update 3 min)"
    assert cost_line(3, 0.4, 0.2, 60) == ("iteration 3 took 0.6 s (sampling 0.4 s, update 0.2 s); the 60 left take "
                                          "about 36 s at this rate")
