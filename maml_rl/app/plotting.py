r"""The package's one plotter: every figure the scripts draw. Needs matplotlib (``pip install -e ".[plot]"``).

* :func:`plot_training_curve`: one run's ``metrics.jsonl``, the mean return before and after
  adaptation against the iteration (raw, and smoothed over a window; for RL², the trial's first
  and last episodes), and the success rate beside it for runs whose episodes carry success (Meta-World);
* :func:`plot_returns`: test.py's ``--plot``, the held-out return against the number of adaptation steps;
* :func:`plot_iqm_curves`: report.py's ``--plot``, training curves over seeds as IQM with 95% bands;
* :func:`plot_attempt_curves`: report.py's ``--attempts``, the held-out return and success by attempt over seeds;
* :func:`plot_against_env_steps`: several runs' columns against their env steps (sample efficiency).

    python -m maml_rl.app.plotting runs/hcd/metrics.jsonl --output runs/hcd/curve.png
    python -m maml_rl.app.plotting runs/a/metrics.jsonl runs/b/metrics.jsonl --against-env-steps \
        --column return_after --output efficiency.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from maml_rl.references.curves import REFERENCE_NAMES


def _pyplot():
    """matplotlib's pyplot on the file-only backend (no display is needed or used)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    plt = _pyplot()

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


def plot_returns(returns_per_step: np.ndarray, path: str | Path, title: str) -> None:
    """PNG of the mean return (± std over tasks) against the number of adaptation steps (test.py ``--plot``)."""
    plt = _pyplot()
    steps = np.arange(len(returns_per_step))
    mean, std = returns_per_step.mean(axis=1), returns_per_step.std(axis=1)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(steps, mean, marker="o", label=f"mean over {returns_per_step.shape[1]} tasks")
    # Unclipped, and named: a reader must not take the band for a confidence interval.
    ax.fill_between(steps, mean - std, mean + std, alpha=0.2, label="±1 std over tasks")
    ax.legend(loc="best", fontsize="small")
    ax.set_xticks(steps)
    ax.set_xlabel("number of gradient steps")
    ax.set_ylabel("mean return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _seeds(n: int) -> str:
    return "1 seed" if n == 1 else f"{n} seeds"


def plot_iqm_curves(groups: Sequence[Any], output: str | Path) -> None:
    """report.py's ``--plot``: each group's training curve over its seeds as IQM with a 95% band, one panel
    per env. ``groups``: ``(env, label, seeds, curve)`` with ``curve`` as ``maml_rl.app.reports.curves``
    returns it (``env_steps``, ``iqm``, ``low``, ``high``)."""
    plt = _pyplot()
    envs = list(dict.fromkeys(g[0] for g in groups))
    figure, axes = plt.subplots(1, len(envs), figsize=(7 * len(envs), 4.5), squeeze=False)
    for ax, env in zip(axes[0], envs):
        for _, label, seeds, c in (g for g in groups if g[0] == env):
            ax.plot(c["env_steps"], c["iqm"], label=f"{label} ({_seeds(seeds)})")
            ax.fill_between(c["env_steps"], c["low"], c["high"], alpha=0.25)
        ax.set(title=env, xlabel="env steps", ylabel="return after adaptation (IQM, 95% CI)")
        ax.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    figure.savefig(output, dpi=100)
    plt.close(figure)


def plot_attempt_curves(groups: Sequence[Any], output: str | Path, references: Sequence[Any] = ()) -> None:
    """report.py's ``--attempts``: each group's held-out return and success by attempt (test.py's stages: the
    trial's episodes, then the evaluation episodes, marked "eval") as IQM over seeds with a 95% band, one row of
    panels per env, one colour per label and one legend under the figure. ``groups``: ``(env, label, seeds,
    {"returns": curve, "success": curve or None})``, each curve as ``maml_rl.app.reports.attempt_curves``
    returns it; the seeds' own values are drawn as dots. ``references``: ``maml_rl.references.ReferenceCurves``,
    each drawn on its env's return panel as grey lines, one style per algorithm (its mean over its tasks)."""
    plt = _pyplot()
    envs = list(dict.fromkeys(g[0] for g in groups))
    colours = {label: colour for label, colour in zip(dict.fromkeys(g[1] for g in groups), _COLOURS)}
    figure, axes = plt.subplots(len(envs), 2, figsize=(12, 4.2 * len(envs)), squeeze=False)
    legend = {}
    for row, env in zip(axes, envs):
        stages = 0
        for _, label, seeds, by_metric in (g for g in groups if g[0] == env):
            for ax, metric in zip(row, ("returns", "success")):
                c = by_metric.get(metric)
                if c is None:
                    continue
                x = c["stage"] + 1
                stages = max(stages, len(x))
                (line,) = ax.plot(x, c["iqm"], marker="o" if len(x) <= 25 else None, color=colours[label])
                legend.setdefault(f"{label} ({_seeds(seeds)})", line)
                ax.fill_between(x, c["low"], c["high"], color=colours[label], alpha=0.2)
                for values in c["runs"]:
                    ax.scatter(x, values, color=colours[label], s=8, alpha=0.5)
        for ref in (r for r in references if r.env == env):
            for k, (name, curve) in enumerate(ref.curves.items()):
                (line,) = row[0].plot(np.arange(1, len(curve) + 1), curve, color="0.35", linewidth=1.2,
                                      linestyle=_REFERENCE_STYLES[k % len(_REFERENCE_STYLES)])
                legend.setdefault(f"{_reference_name(name)}: {env}, {ref.tasks} tasks (reference)", line)
        for ax, what in zip(row, ("return", "success rate")):
            ax.set(title=f"{env}: held-out {what}", xlabel="attempt", ylabel=f"{what} (IQM over seeds, 95% CI)")
            if stages:
                # At most about 20 labels: a 100-pull bandit's would overlap.
                ticks = [*range(1, stages, max(1, -(-(stages - 1) // 20))), stages]
                ax.set_xticks(ticks, [*map(str, ticks[:-1]), "eval"])
            if not ax.get_lines():  # the env reports no success
                ax.text(0.5, 0.5, f"no {what} reported", ha="center", va="center", transform=ax.transAxes)
    figure.legend(list(legend.values()), list(legend), loc="lower center", ncol=2, fontsize="small", frameon=False)
    figure.tight_layout(rect=(0, 0.04 + 0.03 * ((len(legend) + 1) // 2) / len(envs), 1, 1))
    figure.savefig(output, dpi=100)
    plt.close(figure)


_REFERENCE_STYLES = ["--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]


def _reference_name(name: str) -> str:
    return REFERENCE_NAMES.get(name, name)


_COLOURS = [f"C{i}" for i in range(10)] * 10


def plot_against_env_steps(metrics_paths: Sequence[str | Path], output: str | Path, column: str = "return_after",
                           labels: Optional[Sequence[str]] = None, title: Optional[str] = None,
                           window: int = 10, log_x: bool = False) -> Path:
    """Several runs' ``column`` (smoothed over ``window`` iterations) against their cumulative env steps
    (``total_env_steps``): runs of different algorithms on one env, at equal env steps."""
    if labels is not None and len(labels) != len(metrics_paths):
        raise ValueError(f"{len(labels)} labels for {len(metrics_paths)} runs")
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for i, path in enumerate(metrics_paths):
        metrics = load_metrics(path)
        for needed in ("total_env_steps", column):
            if needed not in metrics:
                raise ValueError(f"{path} has no column {needed!r} (its columns: {sorted(metrics)})")
        label = labels[i] if labels is not None else Path(path).parent.name
        axes.plot(metrics["total_env_steps"], smooth(metrics[column], window), label=label)
    if log_x:
        axes.set_xscale("log")
    axes.set_xlabel("env steps")
    axes.set_ylabel(f"{column} ({window}-iteration mean)")
    axes.set_title(title or column)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    output = Path(output)
    figure.savefig(output, dpi=110)
    plt.close(figure)
    return output


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Plot training runs from their metrics.jsonl.")
    parser.add_argument("metrics", nargs="+", help="runs' metrics.jsonl (one, unless --against-env-steps)")
    parser.add_argument("--output", required=True, help="PNG file to write")
    parser.add_argument("--title", default=None)
    parser.add_argument("--window", type=int, default=10, help="smoothing window in iterations (default 10)")
    parser.add_argument("--against-env-steps", action="store_true",
                        help="several runs' --column against their env steps, in one panel")
    parser.add_argument("--column", default="return_after", help="with --against-env-steps (default return_after)")
    parser.add_argument("--labels", nargs="+", default=None, help="with --against-env-steps: one label per run")
    parser.add_argument("--log-x", action="store_true", help="with --against-env-steps: a log scale of env steps")
    args = parser.parse_args(argv)
    if args.against_env_steps:
        print(plot_against_env_steps(args.metrics, args.output, args.column, args.labels, args.title, args.window,
                                     args.log_x))
    elif len(args.metrics) != 1:
        parser.error("give one metrics.jsonl, or several with --against-env-steps")
    else:
        print(plot_training_curve(args.metrics[0], args.output, args.title, args.window))


if __name__ == "__main__":
    main()
