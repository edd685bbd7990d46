"""Training curves from metrics.jsonl."""

import json

import numpy as np

from maml_rl.plotting import load_metrics, plot_training_curve, smooth


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
