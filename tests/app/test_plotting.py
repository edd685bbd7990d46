"""Training curves from metrics.jsonl."""

import json

import numpy as np

from maml_rl.app.plotting import load_metrics, plot_training_curve, smooth


def test_smooth_is_a_trailing_mean():
    np.testing.assert_allclose(smooth(np.array([1.0, 3.0, 5.0, 7.0]), 2), [1.0, 2.0, 4.0, 6.0])


def test_plot_training_curve_writes_png(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(
        json.dumps({"iteration": i, "return_before": -10.0 + i, "return_after": -5.0 + i, "accepted": True}) + "\n"
        for i in range(12)))
    columns = load_metrics(metrics)
    assert columns["return_after"][3] == -2.0 and len(columns["iteration"]) == 12
    output = plot_training_curve(metrics, tmp_path / "curve.png", window=3)
    assert output.read_bytes().startswith(b"\x89PNG")


def test_runs_with_success_get_a_second_panel(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(
        json.dumps({"iteration": i, "return_before": float(i), "return_after": 2.0 * i,
                    "success_before": 0.1 * i / 12, "success_after": i / 12}) + "\n" for i in range(12)))
    figures = []
    original = plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda *a, **k: figures.append(original(*a, **k)) or figures[-1])
    plot_training_curve(metrics, tmp_path / "curve.png", window=1)
    (figure, axes), = figures
    assert axes.shape == (1, 2)
    after = axes[0, 1].get_lines()[3]  # raw and smoothed lines, before then after
    np.testing.assert_allclose(after.get_ydata(), np.arange(12) / 12)


def test_rl2_runs_name_the_trial_episodes(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    def legend(rows):
        metrics = tmp_path / "metrics.jsonl"
        metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
        figures = []
        original = plt.subplots
        monkeypatch.setattr(plt, "subplots", lambda *a, **k: figures.append(original(*a, **k)) or figures[-1])
        plot_training_curve(metrics, tmp_path / "curve.png", window=1)
        return [text.get_text() for text in figures[0][1][0, 0].get_legend().get_texts()]

    maml = [{"iteration": i, "return_before": 0.0, "return_after": 1.0} for i in range(3)]
    rl2 = [{**row, "return_episode_0": 0.0, "return_episode_1": 1.0} for row in maml]
    assert legend(maml) == ["before adaptation (1-iteration mean)", "after adaptation (1-iteration mean)"]
    assert legend(rl2) == ["first episode of the trial (1-iteration mean)", "last episode of the trial (1-iteration mean)"]


def test_test_py_plot_names_its_band(tmp_path, monkeypatch):
    """test.py --plot drew a band with no label; the legend now says it is ±1 std over tasks, unclipped."""
    import matplotlib.pyplot as plt

    from maml_rl.app.plotting import plot_returns

    figures = []
    original = plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda *a, **k: figures.append(original(*a, **k)) or figures[-1])
    returns = np.array([[-3.0, -1.0, -2.0], [0.0, 4.0, 2.0]])  # [steps, tasks]
    plot_returns(returns, tmp_path / "returns.png", "title")
    (figure, axes), = figures
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["mean over 3 tasks", "±1 std over tasks"]
    band = axes.collections[0].get_paths()[0].vertices
    std = np.sqrt(np.array([2.0, 8.0]) / 3)  # population std of each row, by hand
    assert np.isclose(band[:, 1].max(), 2.0 + std[1]) and np.isclose(band[:, 1].min(), -2.0 - std[0])
    assert (tmp_path / "returns.png").read_bytes().startswith(b"\x89PNG")


def test_runs_against_their_env_steps_in_one_panel(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    import pytest

    from maml_rl.app.plotting import main, plot_against_env_steps

    paths = []
    for name, per_iteration in (("a", 100), ("b", 1000)):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "metrics.jsonl"
        path.write_text("".join(json.dumps({"iteration": i, "total_env_steps": per_iteration * (i + 1),
                                            "return_after": float(i)}) + "\n" for i in range(4)))
        paths.append(path)
    figures = []
    original = plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda *a, **k: figures.append(original(*a, **k)) or figures[-1])
    output = plot_against_env_steps(paths, tmp_path / "e.png", window=2, labels=["PEARL", "MAML"])
    assert output.read_bytes().startswith(b"\x89PNG")
    (_, axes), = figures
    a, b = axes.get_lines()
    np.testing.assert_array_equal(a.get_xdata(), [100, 200, 300, 400])
    np.testing.assert_array_equal(b.get_xdata(), [1000, 2000, 3000, 4000])
    np.testing.assert_allclose(a.get_ydata(), [0.0, 0.5, 1.5, 2.5])  # trailing means of 2, by hand
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["PEARL", "MAML"]
    with pytest.raises(ValueError, match="no column 'success_after'"):
        plot_against_env_steps(paths, tmp_path / "x.png", column="success_after")
    with pytest.raises(ValueError, match="1 labels for 2 runs"):
        plot_against_env_steps(paths, tmp_path / "x.png", labels=["one"])
    with pytest.raises(SystemExit):
        main([str(p) for p in paths] + ["--output", str(tmp_path / "y.png")])  # two runs need --against-env-steps
    main([str(p) for p in paths] + ["--output", str(tmp_path / "y.png"), "--against-env-steps", "--log-x"])
    assert (tmp_path / "y.png").read_bytes().startswith(b"\x89PNG")
