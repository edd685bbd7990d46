"""Training curves from a run's ``metrics.jsonl``.

    python -m maml_rl.app.plotting runs/hcd/metrics.jsonl --output runs/hcd/curve.png

Plots the mean return before and after adaptation against the iteration
(raw, and smoothed over a window; for RL², the trial's first and last
episodes), and the success rate beside it for runs whose episodes carry
success (Meta-World). Needs matplotlib (``pip install -e ".[plot]"``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional

import numpy as np


def load_metrics(path: str | Path) -> dict[str, np.ndarray]:
    """The columns of a ``metrics.jsonl`` file as arrays (one row per iteration).

    A last line cut short (no newline: the run was killed while writing it) is
    not an iteration and is left out, as a resume leaves it out; any other line
    that is not JSON raises :class:`json.JSONDecodeError`."""
    text = Path(path).read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and not text.endswith("\n"):
        try:
            json.loads(lines[-1])
        except json.JSONDecodeError:
            lines.pop()
    rows = [json.loads(line) for line in lines]
    if not rows:
        raise ValueError(f"{path} holds no metrics")
    return {key: np.array([row.get(key, np.nan) for row in rows], dtype=float) for key in rows[0]}


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (shorter windows at the start)."""
    cumulative = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    return (cumulative[1:] - cumulative[np.arange(1, len(values) + 1) - counts]) / counts


def plot_training_curve(metrics_path: str | Path, output: str | Path, title: Optional[str] = None, window: int = 10) -> Path:
    """Write a PNG of the return before and after adaptation per iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = load_metrics(metrics_path)
    iterations = metrics["iteration"]
    # A second panel for envs whose episodes carry success (Meta-World).
    panels = [("return", "mean return per episode")]
    if "success_before" in metrics:
        panels.append(("success", "success rate (episodes)"))
    # RL² runs (per-episode columns) record the trial's first and last episodes under before/after.
    labels = (("first episode of the trial", "last episode of the trial") if "return_episode_0" in metrics
              else ("before adaptation", "after adaptation"))
    figure, all_axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4), squeeze=False)
    for axes, (name, ylabel) in zip(all_axes[0], panels):
        for when, label, color in (("before", labels[0], "tab:blue"), ("after", labels[1], "tab:orange")):
            values = metrics[f"{name}_{when}"]
            axes.plot(iterations, values, color=color, alpha=0.25, linewidth=1)
            axes.plot(iterations, smooth(values, window), color=color, label=f"{label} ({window}-iteration mean)")
        axes.set_xlabel("meta-iteration")
        axes.set_ylabel(ylabel)
        axes.set_title(title or Path(metrics_path).parent.name)
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    output = Path(output)
    figure.savefig(output, dpi=110)
    plt.close(figure)
    return output


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Plot the return before/after adaptation of a training run.")
    parser.add_argument("metrics", help="a run's metrics.jsonl")
    parser.add_argument("--output", required=True, help="PNG file to write")
    parser.add_argument("--title", default=None)
    parser.add_argument("--window", type=int, default=10, help="smoothing window in iterations (default 10)")
    args = parser.parse_args(argv)
    print(plot_training_curve(args.metrics, args.output, args.title, args.window))


if __name__ == "__main__":
    main()
