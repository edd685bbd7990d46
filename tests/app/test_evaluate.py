"""test.py: evaluation of a trained policy on new tasks."""

import json

import numpy as np
import pytest
import torch

from maml_rl.app.config_files import ConfigError

from helpers.scripts import evaluate, train

# The small config, trained for one iteration.
ONE_BATCH = {"num-batches": 1}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, small_config):
    folder = tmp_path_factory.mktemp("evaluate")
    config = small_config(folder, **ONE_BATCH)
    train.main(["--config", str(config), "--output-folder", str(folder / "run"), "--num-workers", "0", "--seed", "5"])
    return folder / "run"


def run_eval(folder, *extra):
    return evaluate.main(["--config", str(folder / "config.json"), "--num-workers", "0", *extra])


def test_results_shapes_and_keys(run_folder, tmp_path, capsys):
    output = tmp_path / "results.npz"
    returned = run_eval(run_folder, "--output", str(output), "--meta-batch-size", "3", "--num-batches", "2",
                        "--num-steps", "2")
    with np.load(output, allow_pickle=True) as results:
        assert set(results.files) == {"tasks", "task_goal", "train_returns", "valid_returns", "returns_per_step",
                                      "evaluation"}
        tasks = results["tasks"]
        assert tasks.shape == (6,) and tasks.dtype == object
        assert all(isinstance(task, dict) and task["goal"].shape == (2,) for task in tasks)
        assert np.array_equal(results["task_goal"], [task["goal"] for task in tasks])
        assert results["train_returns"].shape == (6, 4)
        assert results["valid_returns"].shape == (6, 4)
        per_step = results["returns_per_step"]
        assert per_step.shape == (3, 6)
        np.testing.assert_allclose(per_step[0], results["train_returns"].mean(axis=1), rtol=1e-6)
        np.testing.assert_allclose(per_step[-1], results["valid_returns"].mean(axis=1), rtol=1e-6)
        # 2D navigation rewards are negative distances.
        assert (results["train_returns"] <= 0).all()
        for key in ("train_returns", "valid_returns", "returns_per_step"):
            np.testing.assert_array_equal(results[key], returned[key])

    table = capsys.readouterr().out
    assert "step | mean return ± std over tasks" in table
    for step in range(3):
        mean, std = per_step[step].mean(), per_step[step].std()
        assert f"{step:4d} | {mean:12.3f} ± {std:.3f}" in table


def test_defaults_follow_the_run(run_folder, small_config):
    results = run_eval(run_folder)  # policy.th and results.npz next to config.json
    assert (run_folder / "results.npz").is_file()
    # meta-batch-size and num-steps of the config, one batch.
    small = small_config.values
    assert results["returns_per_step"].shape == (2, small["meta-batch-size"])
    assert results["train_returns"].shape == (small["meta-batch-size"], small["fast-batch-size"])


def test_held_out_tasks_depend_on_the_seed(run_folder, tmp_path):
    default = run_eval(run_folder, "--output", str(tmp_path / "a.npz"))
    same = run_eval(run_folder, "--output", str(tmp_path / "b.npz"), "--seed", "6")  # training seed + 1
    other = run_eval(run_folder, "--output", str(tmp_path / "c.npz"), "--seed", "11")
    np.testing.assert_array_equal(default["valid_returns"], same["valid_returns"])
    assert not np.array_equal(default["tasks"][0]["goal"], other["tasks"][0]["goal"])
    # The first training batch used seed 5: its tasks are not the evaluation's.
    training_goals = run_eval(run_folder, "--output", str(tmp_path / "d.npz"), "--seed", "5")["tasks"]
    assert not np.array_equal(default["tasks"][0]["goal"], training_goals[0]["goal"])


def test_policy_that_does_not_fit(run_folder, tmp_path):
    config = json.loads((run_folder / "config.json").read_text())
    config["hidden-sizes"] = [8]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"trained with another policy(.|\n)*hidden-sizes: \[8\]"):
        evaluate.main(["--config", str(tmp_path / "config.json"), "--policy", str(run_folder / "policy.th"),
                       "--num-workers", "0"])
    # Without the run's config.json beside it, the shapes still tell.
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "policy.th").write_bytes((run_folder / "policy.th").read_bytes())
    with pytest.raises(ConfigError, match="does not fit"):
        evaluate.main(["--config", str(tmp_path / "config.json"), "--policy", str(tmp_path / "alone" / "policy.th"),
                       "--num-workers", "0"])
    with pytest.raises(ConfigError, match="--policy .*nothing.th: no such file"):
        evaluate.main(["--config", str(tmp_path / "config.json"), "--num-workers", "0",
                       "--policy", str(tmp_path / "nothing.th")])


def test_a_config_without_a_policy_says_to_train_first(tmp_path, small_config):
    """`test.py --config configs/maml/2d-navigation.yaml` said '--policy configs/maml/policy.th: no such file'
    though no --policy was given."""
    config = small_config(tmp_path, **ONE_BATCH)
    with pytest.raises(ConfigError) as info:
        evaluate.main(["--config", str(config), "--num-workers", "0"])
    message = str(info.value)
    assert message.startswith(f"no policy to evaluate: there is no policy.th beside {config}")
    assert f"python train.py --config {config}" in message and "--policy" in message
    assert "no such file" not in message


def test_plot(run_folder, tmp_path):
    plot = tmp_path / "results.png"
    args = ["--output", str(tmp_path / "results.npz"), "--plot", str(plot)]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="--plot needs matplotlib"):
            run_eval(run_folder, *args)
        assert not (tmp_path / "results.npz").exists()  # stopped before any work
    else:
        run_eval(run_folder, *args)
        assert plot.read_bytes().startswith(b"\x89PNG")


def test_summary_table():
    table = evaluate.summary_table(np.array([[1.0, 3.0], [2.0, 2.0]]))
    lines = table.splitlines()
    # Population std over tasks; standard error from the sample std: sqrt(2) / sqrt(2).
    assert lines[2] == "   0 |        2.000 ± 1.000         |      1.000  (before adaptation)"
    assert lines[3] == "   1 |        2.000 ± 0.000         |      0.000"
    single = evaluate.summary_table(np.array([[5.0]])).splitlines()
    assert single[2] == "   0 |        5.000 ± 0.000         |          -  (before adaptation)"


def test_summary_table_with_success():
    table = evaluate.summary_table(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.0, 0.5], [1.0, 1.0]]))
    lines = table.splitlines()
    assert lines[0].endswith("| success rate ± std. error")
    # Success 0 and 0.5 over two tasks: mean 25%, sample std 0.354, standard error 0.354 / sqrt(2) = 25%.
    assert lines[2].endswith("|       25.0% ±  25.0%  (before adaptation)")
    assert lines[3].endswith("|      100.0% ±   0.0%")
    single = evaluate.summary_table(np.array([[5.0]]), np.array([[0.5]])).splitlines()
    assert single[2].endswith("|       50.0% ±      -  (before adaptation)")


def test_class_table_by_hand():
    tasks = [{"env_name": "door-close-v3"}, {"env_name": "lever-pull-v3"}, {"env_name": "door-close-v3"}]
    returns = np.array([[1.0, 10.0, 3.0], [5.0, 20.0, 7.0]])
    success = np.array([[0.0, 0.5, 0.5], [1.0, 1.0, 0.5]])
    lines = evaluate.class_table(tasks, returns, success).splitlines()
    assert lines[0].split("|")[0].strip() == "task class"
    # door-close: tasks 0 and 2, returns (1+3)/2 -> (5+7)/2, success (0+.5)/2 -> (1+.5)/2.
    assert [c.strip() for c in lines[1].split("|")] == ["door-close-v3", "2", "2.0 -> 6.0", "25.0% -> 75.0%"]
    assert [c.strip() for c in lines[2].split("|")] == ["lever-pull-v3", "1", "10.0 -> 20.0", "50.0% -> 100.0%"]
    # Meta-World's figure: the mean of the classes' rates, (25 + 50) / 2 -> (75 + 100) / 2.
    assert lines[3].startswith("mean over classes") and lines[3].endswith("37.5% -> 87.5%")
    assert evaluate.class_table(tasks, returns).splitlines()[1].count("|") == 2
    # RL² names its rows: the trial's first episode and the evaluation episodes; the figures do not change.
    named = evaluate.class_table(tasks, returns, success, ("episode 0", "evaluation")).splitlines()
    assert [c.strip() for c in named[0].split("|")] == [
        "task class", "tasks", "return episode 0 -> evaluation", "success episode 0 -> evaluation"]
    assert [[c.strip() for c in line.split("|")] for line in named[1:]] == \
        [[c.strip() for c in line.split("|")] for line in lines[1:]]
    # One class, or tasks without classes: nothing to break down.
    assert evaluate.class_table(tasks[:1], returns[:, :1], success[:, :1]) == ""
    assert evaluate.class_table([{"goal": 1}, {"goal": 2}], returns[:, :2]) == ""


def test_mean_actions_after_adaptation(run_folder, capsys):
    """2D navigation starts every episode at the origin: with the adapted policy's mean
    actions, a task's episodes after adaptation are all the same, while the sampled
    adaptation episodes differ."""
    results = run_eval(run_folder, "--meta-batch-size", "3", "--eval-actions", "mean")
    valid, train_returns = results["valid_returns"], results["train_returns"]
    assert (valid == valid[:, :1]).all()
    assert (train_returns != train_returns[:, :1]).any(axis=1).all()
    assert "mean actions after adaptation" in capsys.readouterr().out
    sampled = run_eval(run_folder, "--meta-batch-size", "3")["valid_returns"]
    assert (sampled != sampled[:, :1]).any(axis=1).all()


def test_all_tasks_needs_an_env_that_lists_them(run_folder):
    with pytest.raises(ConfigError, match="--all-tasks: 2DNavigation-v0 does not list its tasks"):
        run_eval(run_folder, "--all-tasks")
    with pytest.raises(SystemExit):
        run_eval(run_folder, "--all-tasks", "--num-batches", "2")


def test_policy_file_is_a_state_dict(run_folder):
    state = torch.load(run_folder / "policy.th", weights_only=True)
    assert all(isinstance(value, torch.Tensor) for value in state.values())


def test_results_record_how_they_were_evaluated(run_folder, tmp_path, capsys, small_config):
    """results.npz did not say how it was evaluated, so report.py pooled other evaluations."""
    import hashlib

    output = tmp_path / "results.npz"
    run_eval(run_folder, "--output", str(output), "--meta-batch-size", "2", "--num-batches", "2", "--num-steps", "2",
             "--eval-actions", "mean", "--seed", "11")
    with np.load(output, allow_pickle=False) as results:
        record = json.loads(str(results["evaluation"]))
    assert record["policy"] == {
        "file": str((run_folder / "policy.th").resolve()),
        "sha256": hashlib.sha256((run_folder / "policy.th").read_bytes()).hexdigest(),
        "iteration": 1, "num-batches": 1}
    assert record["settings"] == {
        "protocol": "gradient-steps", "num-steps": 2, "fast-lr": small_config.values["fast-lr"],
        "fast-batch-size": 4, "eval-actions": "mean", "split": None, "all-tasks": False, "meta-batch-size": 2,
        "num-batches": 2}
    assert record["seed"] == 11 and record["tasks"] == 4
    assert record["config"] == str((run_folder / "config.json").resolve())
    # The header names the tasks once ("on 4 new tasks (4, seed 11)" repeated the count).
    header = capsys.readouterr().out.splitlines()[0]
    assert "policy.th (iteration 1 of 1) on 4 new tasks (seed 11), 4 episodes per task per step" in header


def test_an_unfinished_run_is_said_to_be(tmp_path, capsys, monkeypatch, small_config):
    """test.py evaluated the policy of a run stopped at iteration 1 of 3 without saying so."""
    from maml_rl.metalearners.gradient import maml_trpo

    config = small_config(tmp_path, **{"num-batches": 3})
    original_step = maml_trpo.MAMLTRPO.step
    calls = []

    def step_then_stop(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original_step(self, *args, **kwargs)

    monkeypatch.setattr(maml_trpo.MAMLTRPO, "step", step_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train.main(["--config", str(config), "--output-folder", str(tmp_path / "run"), "--num-workers", "0"])
    monkeypatch.setattr(maml_trpo.MAMLTRPO, "step", original_step)
    capsys.readouterr()
    for policy in ("policy.th", "checkpoint.pt"):
        run_eval(tmp_path / "run", "--policy", str(tmp_path / "run" / policy), "--meta-batch-size", "1")
        captured = capsys.readouterr()
        assert f"note: {tmp_path / 'run' / policy} is from iteration 1 of 3: its run is not finished" in captured.err
        assert f"{policy} (iteration 1 of 3: the run is unfinished) on 1 new task (seed" in captured.out


def test_a_learners_evaluation_options_are_its_own(run_folder, tmp_path):
    """test.py's --num-steps is the gradient-based learners' option, --evaluation-episodes the trial learners': each
    is checked by its declaration, and one of another algorithm's is refused rather than ignored."""
    output = str(tmp_path / "results.npz")
    with pytest.raises(ConfigError, match="--evaluation-episodes is an evaluation option of rl2-ppo and "
                                          "transformer-ppo, not of this config's algorithm maml-trpo"):
        run_eval(run_folder, "--evaluation-episodes", "2", "--output", output)
    with pytest.raises(ConfigError, match="--num-steps must be an integer >= 1, got 0"):
        run_eval(run_folder, "--num-steps", "0", "--output", output)
    assert not (tmp_path / "results.npz").exists()
    evaluate_module = evaluate
    assert set(evaluate_module.evaluation_options()) == {"num-steps", "evaluation-episodes",
                                                         "reset-context-each-attempt"}
    assert evaluate_module.evaluation_options()["num-steps"][1] == ["maml-trpo", "promp"]
