"""What every meta-learner of the registry owes train.py and test.py, checked on each one alike: a resumed run
is the uninterrupted one, its state survives a round trip, a seed gives the same bits on two worker layouts,
and test.py's results have the documented keys and shapes.

The cases run over :data:`~maml_rl.metalearners.METALEARNERS` and over ``helpers.learners.RandomSearch``, a
learner of the tests' own registered with one line; each compares with the algorithm's small run, trained once
per session (the ``reference_runs`` fixture). A new algorithm declares its tiny config and the number of its
evaluation stages with it (``contract_config``, ``contract_stages``): no test names it.

What is one algorithm's own (RL²'s adaptation curve, PEARL's replays at their capacity, ProMP's Adam moments in
the checkpoint) stays in its own file, on the same runs.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from maml_rl.app.results import read_record
from maml_rl.app.config_files import build_env, load_config
from maml_rl.metalearners import METALEARNERS, make_metalearner, make_policy

from helpers import learners
from helpers.runs import (assert_same_policy, assert_same_state, load_policy, metrics_without_time,
                          read_learner_state, run)
from helpers.scripts import evaluate

ALGORITHMS = [*METALEARNERS, learners.NAME]

#: The stages of each algorithm's evaluation (rows of ``returns_per_step``) with its tiny config and test.py's
#: defaults, as each learner declares them (``contract_stages``).
STAGES = {name: learner.contract_stages
          for name, learner in {**METALEARNERS, learners.NAME: learners.RandomSearch}.items()}


@pytest.fixture(params=ALGORITHMS)
def algorithm(request, monkeypatch):
    """Each algorithm's name in turn; the tests' own learner is in the registry for the test."""
    if request.param == learners.NAME:
        learners.register(monkeypatch)
    return request.param


def fresh_learner(config):
    """A learner built from a run's configuration, as train.py builds one before a resume loads its state."""
    env = build_env(config)
    try:
        policy = make_policy(config, env)
    finally:
        env.close()
    return make_metalearner(config, policy)


def test_a_resumed_run_is_the_uninterrupted_one(algorithm, reference_runs, tmp_path):
    whole = reference_runs(algorithm)
    num_batches = reference_runs.num_batches(algorithm)
    config, folder = reference_runs.config(algorithm, tmp_path), tmp_path / "run"
    run(config, folder, "--seed", str(reference_runs.SEED), "--num-batches", "1")
    assert json.loads((folder / "config.json").read_text())["num-batches"] == 1
    # The iterations after the first move the policy: the resume has work to redo exactly.
    assert any(not torch.equal(a, b) for a, b in zip(load_policy(folder).values(), load_policy(whole).values()))
    run(config, folder, "--resume", "--num-batches", str(num_batches))

    assert_same_policy(load_policy(folder), load_policy(whole))
    assert metrics_without_time(folder) == metrics_without_time(whole)
    assert len(metrics_without_time(whole)) == num_batches
    # Everything the run carries on with is the same too: the learner's state (optimiser moments, PEARL's
    # replays), the sampler's, the random generators', the counters and the monitors'.
    resumed, uninterrupted = (torch.load(f / "checkpoint.pt", weights_only=False) for f in (folder, whole))
    assert_same_state(resumed, uninterrupted, "checkpoint")


def test_the_learners_state_survives_a_round_trip(algorithm, reference_runs):
    whole = reference_runs(algorithm)
    config = load_config(whole / "config.json")
    state = read_learner_state(whole)
    learner = fresh_learner(config)
    if state:  # a learner that keeps state starts from another one: the load below has something to do
        with pytest.raises(AssertionError):
            assert_same_state(learner.state_dict(), state)
    else:
        assert learner.state_dict() == {}
    learner.load_state_dict(state)
    assert_same_state(learner.state_dict(), state)
    # Through bytes, as a checkpoint keeps it, into another learner: the same state again.
    buffer = io.BytesIO()
    torch.save(learner.state_dict(), buffer)
    buffer.seek(0)
    other = fresh_learner(config)
    other.load_state_dict(torch.load(buffer, weights_only=False))
    assert_same_state(other.state_dict(), state)


@pytest.mark.processes
@pytest.mark.slow
def test_a_seed_gives_the_same_bits_in_process_and_on_two_workers(algorithm, reference_runs, tmp_path):
    in_process = reference_runs(algorithm)
    run(reference_runs.config(algorithm, tmp_path), tmp_path / "run", "--seed", str(reference_runs.SEED),
        "--num-workers", "2")
    assert_same_policy(load_policy(tmp_path / "run"), load_policy(in_process))
    assert metrics_without_time(tmp_path / "run") == metrics_without_time(in_process)
    assert_same_state(read_learner_state(tmp_path / "run"), read_learner_state(in_process))


def test_test_py_writes_the_documented_results(algorithm, reference_runs, tmp_path):
    folder = reference_runs(algorithm)
    output = tmp_path / "results.npz"
    returned = evaluate.main(["--config", str(folder / "config.json"), "--num-workers", "0", "--meta-batch-size",
                              "3", "--num-batches", "2", "--fast-batch-size", "2", "--output", str(output)])
    tasks = 2 * 3
    with np.load(output, allow_pickle=True) as results:
        # 2D navigation's episodes carry no success: no *_success arrays.
        assert set(results.files) == {"tasks", "task_goal", "train_returns", "valid_returns", "returns_per_step",
                                      "evaluation"}
        assert results["tasks"].shape == (tasks,) and results["tasks"].dtype == object
        assert all(task["goal"].shape == (2,) for task in results["tasks"])
        assert np.array_equal(results["task_goal"], [task["goal"] for task in results["tasks"]])
        per_step = results["returns_per_step"]
        assert per_step.shape == (STAGES[algorithm], tasks)
        train, valid = results["train_returns"], results["valid_returns"]
        assert train.ndim == valid.ndim == 2 and train.shape[0] == valid.shape[0] == tasks
        np.testing.assert_allclose(per_step[0], train.mean(axis=1), rtol=1e-6)
        np.testing.assert_allclose(per_step[-1], valid.mean(axis=1), rtol=1e-6)
        assert np.isfinite(per_step).all() and (per_step <= 0).all()  # 2D navigation: minus distances
        for key in ("train_returns", "valid_returns", "returns_per_step"):
            np.testing.assert_array_equal(results[key], returned[key])
        record = read_record(results)
    config = load_config(folder / "config.json")
    protocol = METALEARNERS[algorithm].evaluation_protocol(config, eval_actions="sample", batch_size=2)
    assert record["settings"]["protocol"] == protocol.settings["protocol"]
    assert record["settings"]["meta-batch-size"] == 3 and record["settings"]["num-batches"] == 2
    assert record["tasks"] == tasks
