"""``python -m maml_rl.references bandit --on RESULTS.npz``: a trial policy's evaluation by test.py beside the
references on the same tasks, read without unpickling."""

import json

import numpy as np
import pytest
import yaml

from helpers import ROOT
from helpers.runs import run
from helpers.scripts import evaluate
from maml_rl.app.results import task_arrays
from maml_rl.references import bandit_references, mdp_references
from maml_rl.references.__main__ import main
from maml_rl.references.policy_results import read_bandit_results


@pytest.fixture(scope="module")
def bandit_results(tmp_path_factory):
    """A one-iteration RL² run on 5-armed bandits of 6 pulls, evaluated by test.py on 4 new tasks, 2 trials each."""
    return trained_and_evaluated(tmp_path_factory.mktemp("bandit"), "configs/rl2/bandit/bandit-k5-n100.yaml",
                                 {"env-name": "Bandit-K5-v0", "episodes-per-trial": 6, "bptt-chunk": 6})


def trained_and_evaluated(folder, shipped, changes):
    """One iteration of a small RL² run from the ``shipped`` config with ``changes``, and test.py's results.npz
    on 4 new tasks, 2 trials each (evaluation seed 3)."""
    config = yaml.safe_load((ROOT / shipped).read_text())
    config.update({"hidden-sizes": [8], "gru-size": 8, "fast-batch-size": 2, "num-batches": 1,
                   "meta-batch-size": 2, "ppo-epochs": 1, "ppo-minibatches": 1, **changes})
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    run(folder / "config.yaml", folder / "run", "--seed", "1")
    results = folder / "results.npz"
    evaluate.main(["--config", str(folder / "run/config.json"), "--policy", str(folder / "run/policy.th"),
                   "--meta-batch-size", "4", "--num-workers", "0", "--seed", "3", "--output", str(results)])
    return results


def test_task_arrays_hold_the_numeric_fields_of_one_shape():
    tasks = [{"mean": np.array([0.1, 0.2]), "goal": 1.5, "name": "a", "state": b"x"},
             {"mean": np.array([0.3, 0.4]), "goal": 2, "name": "b", "state": b"y"}]
    arrays = task_arrays(tasks)
    assert set(arrays) == {"task_mean", "task_goal"}
    assert np.array_equal(arrays["task_mean"], [[0.1, 0.2], [0.3, 0.4]])
    assert np.array_equal(arrays["task_goal"], [1.5, 2.0])
    assert task_arrays([]) == {}
    assert task_arrays([{"mean": np.zeros(2)}, {"mean": np.zeros(3)}]) == {}  # shapes differ
    assert set(task_arrays([{"mean": np.zeros(2), "x": 1}, {"mean": np.zeros(2)}])) == {"task_mean"}  # not in all


def test_the_policy_is_scored_by_hand_and_the_references_play_its_tasks(bandit_results, tmp_path, capsys):
    with np.load(bandit_results, allow_pickle=True) as data:  # the test's own file: the task dicts too
        tasks, per_step = data["tasks"], data["returns_per_step"]
        assert np.array_equal(data["task_mean"], np.stack([task["mean"] for task in tasks]))
    assert per_step.shape == (6 + 1, 4)  # the trial's 6 pulls, then its evaluation episodes
    main(["bandit", "--on", str(bandit_results), "--seed", "5", "--output", str(tmp_path / "b")])
    printed = capsys.readouterr().out
    written = json.loads((tmp_path / "b.json").read_text())
    assert (written["settings"]["arms"], written["settings"]["pulls"], written["tasks"]) == (5, 6, 4)
    means = np.stack([task["mean"] for task in tasks])
    expected = bandit_references(5, 6, 4, 5, means=means)
    assert np.array_equal(np.load(tmp_path / "b.npz")["thompson_arms"], expected["thompson"]["arms"])
    # By hand: each task's best mean over 6 pulls minus its 6 pulls' rewards (each the mean of 2 trials).
    regret = [6 * max(task["mean"]) - sum(per_step[t, i] for t in range(6)) for i, task in enumerate(tasks)]
    policy = written["algorithms"]["policy"]
    assert policy["realised_regret"]["mean"] == pytest.approx(np.mean(regret))
    assert policy["trials_per_task"] == 2 and policy["seed"] == 3
    after_three = [3 * max(task["mean"]) - sum(per_step[t, i] for t in range(3)) for i, task in enumerate(tasks)]
    assert policy["cumulative_realised_regret"][2] == pytest.approx(np.mean(after_three))
    assert policy["cumulative_realised_regret"][-1] == pytest.approx(np.mean(regret))
    thompson = expected["thompson"]["regret"].sum(axis=1)
    assert policy["against"]["thompson"]["regret_ratio"] == pytest.approx(np.mean(regret) / thompson.mean())
    assert policy["against"]["thompson"]["difference"]["mean"] == pytest.approx(np.mean(regret - thompson))
    assert "oracle" not in policy["against"]  # no regret to divide by
    assert "policy / thompson regret" in printed


def test_misuse_is_refused(bandit_results, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["bandit", "--on", str(bandit_results), "--arms", "3"])
    assert "leave out --arms 3 (it has 5)" in capsys.readouterr().err
    with np.load(bandit_results, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files if key != "tasks"}
    np.savez(tmp_path / "old.npz", **{k: v for k, v in arrays.items() if k != "task_mean"})
    np.savez(tmp_path / "maml.npz", **{**arrays, "evaluation": np.array(json.dumps({"settings": {}}))})
    (tmp_path / "corrupt.npz").write_bytes(b"not a zip")
    for name, message in [("old.npz", "evaluate the policy again with test.py"),
                          ("maml.npz", "names no episodes-per-trial"),
                          ("corrupt.npz", "is not a results.npz"), ("missing.npz", "is not a results.npz")]:
        with pytest.raises(ValueError, match=message):
            read_bandit_results(tmp_path / name)
    with pytest.raises(ValueError, match=r"means must be \[num_tasks, arms\] = \[2, 3\]"):
        bandit_references(3, 6, 2, 0, means=np.zeros((2, 4)))


@pytest.fixture(scope="module")
def mdp_results(tmp_path_factory):
    """A one-iteration RL² run on tabular MDPs of 3 states, 2 actions and 4 steps, 3 episodes a trial, evaluated
    by test.py on 4 new tasks, 2 trials each."""
    return trained_and_evaluated(tmp_path_factory.mktemp("mdp"), "configs/rl2/tabular-mdp.yaml",
                                 {"env-kwargs": {"num_states": 3, "num_actions": 2, "max_episode_steps": 4},
                                  "episodes-per-trial": 3, "bptt-chunk": 12})


def test_mdp_policy_returns_by_hand_beside_psrl_on_its_tasks(mdp_results, tmp_path, capsys):
    with np.load(mdp_results, allow_pickle=True) as data:
        tasks, per_step = list(data["tasks"]), data["returns_per_step"]
    main(["mdp", "--on", str(mdp_results), "--seed", "5", "--output", str(tmp_path / "m")])
    assert "policy / psrl total return" in capsys.readouterr().out
    written = json.loads((tmp_path / "m.json").read_text())
    # Sizes from the file, the horizon from the run's config.json that the evaluation record names.
    assert written["settings"] | {"on": None} == {"states": 3, "actions": 2, "horizon": 4, "episodes": 3, "on": None}
    expected = mdp_references(3, 2, 4, 3, 4, 5, tasks=tasks)
    assert np.array_equal(np.load(tmp_path / "m.npz")["psrl_returns"], expected["psrl"]["returns"])
    total = [sum(per_step[e, i] for e in range(3)) for i in range(4)]  # each episode: the mean of 2 trials
    policy = written["algorithms"]["policy"]
    assert policy["total_return"]["mean"] == pytest.approx(np.mean(total))
    assert policy["return_per_episode"] == pytest.approx(per_step[:3].mean(axis=1).tolist())
    psrl = expected["psrl"]["returns"].sum(axis=1)
    assert policy["against"]["psrl"]["return_ratio"] == pytest.approx(np.mean(total) / psrl.mean())
    assert policy["against"]["psrl"]["difference"]["mean"] == pytest.approx(np.mean(np.array(total) - psrl))


def test_mdp_misuse_is_refused(mdp_results, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["mdp", "--on", str(mdp_results), "--horizon", "10", "--states", "10"])
    assert "leave out --states 10 (it has 3), --horizon 10 (it has 4)" in capsys.readouterr().err
    # Without the run's config to read, the horizon must be given.
    with np.load(mdp_results, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files if key != "tasks"}
    record = json.loads(str(arrays["evaluation"]))
    record["config"] = str(tmp_path / "gone.json")
    np.savez(tmp_path / "moved.npz", **{**arrays, "evaluation": np.array(json.dumps(record))})
    with pytest.raises(SystemExit):
        main(["mdp", "--on", str(tmp_path / "moved.npz")])
    assert "give --horizon" in capsys.readouterr().err
    main(["mdp", "--on", str(tmp_path / "moved.npz"), "--horizon", "4", "--algorithms", "psrl"])
    assert "policy / psrl" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["mdp", "--on", str(bandit_results_path(tmp_path))])
    assert "has no task_transitions, task_rewards_mean" in capsys.readouterr().err
    with pytest.raises(ValueError, match="2 tasks given for num_tasks=3"):
        mdp_references(3, 2, 4, 3, 3, 0, tasks=[{}, {}])


def bandit_results_path(tmp_path):
    """A results.npz of a bandit: task_mean, no MDP fields."""
    path = tmp_path / "bandit.npz"
    np.savez(path, task_mean=np.zeros((2, 3)), returns_per_step=np.zeros((4, 2)),
             evaluation=np.array(json.dumps({"settings": {"episodes-per-trial": 3, "fast-batch-size": 1}})))
    return path
