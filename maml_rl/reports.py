"""Results over several seeds: the interquartile mean with stratified bootstrap confidence intervals.

A run folder (``train.py --output-folder``) holds ``config.json``, ``metrics.jsonl``
and, once ``test.py`` has evaluated it, ``results.npz``. Runs are grouped by
environment and algorithm, and further by any setting in which runs of one
algorithm differ (``promp (outer-kl-limit=0.1)`` beside ``promp
(outer-kl-limit=null)``; a key a config leaves out counts as its default), so
that two configurations are never pooled into one figure; the seed and the
iteration count do not split a group (a budget that differs is noted). Each run's score is its held-out mean return (and
success) after adaptation, from ``results.npz``, and its training curve the
``return_after`` of ``metrics.jsonl``. Across runs the aggregate is the IQM
with a 95% stratified bootstrap confidence interval ("Deep Reinforcement
Learning at the Edge of the Statistical Precipice", Agarwal et al., NeurIPS
2021), computed by ``rliable`` (``pip install 'maml_rl[stats]'``), and, between
two algorithms on the same env, rliable's probability of improvement.
Files are read without unpickling (``allow_pickle=False``, JSON).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from maml_rl.plotting import load_metrics

__all__ = ["Run", "Summary", "ReportError", "load_run", "summarise", "compare", "curves", "format_report"]


class ReportError(ValueError):
    """A run folder cannot be reported: the message says which file and what to do."""


@dataclass
class Run:
    """One training run and its evaluation."""

    folder: Path
    env: str
    algorithm: str
    seed: int | None
    after: float  # held-out mean return after adaptation
    before: float  # held-out mean return before adaptation (the first row of test.py's results)
    success_after: float | None
    env_steps: np.ndarray  # [iterations] cumulative env steps of training
    curve: np.ndarray  # [iterations] return after adaptation on the training tasks
    config: dict[str, Any] = field(default_factory=dict)  # config.json with the algorithm's defaults filled in


@dataclass
class Summary:
    """The aggregate of one (env, algorithm) group of runs."""

    env: str
    algorithm: str
    runs: list[Run]
    iqm: float
    ci: tuple[float, float]
    mean: float
    worst: Run
    before_iqm: float
    success_iqm: float | None = None
    success_ci: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the keys that set this group apart from its algorithm's others

    @property
    def label(self) -> str:
        """The algorithm, with the settings that tell it from other groups of the same algorithm."""
        if not self.settings:
            return self.algorithm
        return f"{self.algorithm} ({', '.join(f'{k}={json.dumps(v)}' for k, v in self.settings.items())})"


# Keys in which runs of one configuration differ: they do not split a group.
RUN_KEYS = ("seed", "num-batches")


def _with_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its algorithm's defaults for the keys it leaves out (older runs lack newer keys)."""
    from maml_rl.config import config_keys

    try:
        keys = config_keys(str(config.get("algorithm", "maml-trpo")))
    except KeyError:
        return dict(config)
    return {**{key: h.default_value() for key, h in keys.items() if not h.required}, **config}


def _rliable():
    try:
        from rliable import library, metrics
    except ImportError as exc:
        raise ImportError(f"reports need rliable ({exc}): pip install 'maml_rl[stats]'") from None
    return library, metrics


def load_run(folder: str | Path, results: str = "results.npz") -> Run:
    """Read one run folder: its config, its training curve and test.py's results.

    :raises ReportError: a file is missing or unreadable (the message names it and the command that writes it).
    """
    folder = Path(folder)
    config_path, metrics_path, results_path = folder / "config.json", folder / "metrics.jsonl", folder / results
    for path, how in ((config_path, "train.py --output-folder"), (metrics_path, "train.py --output-folder"),
                      (results_path, f"python test.py --config {config_path}")):
        if not path.is_file():
            raise ReportError(f"{folder}: no {path.name}; it is written by {how}")
    try:
        config = json.loads(config_path.read_text())
        columns = load_metrics(metrics_path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"{folder}: config.json or metrics.jsonl is not valid JSON ({exc})") from None
    except ValueError:
        raise ReportError(f"{metrics_path}: no iteration logged yet") from None
    try:
        with np.load(results_path, allow_pickle=False) as data:
            after = np.asarray(data["valid_returns"], dtype=float)
            before = np.asarray(data["train_returns"], dtype=float)
            success = np.asarray(data["valid_success"], dtype=float) if "valid_success" in data.files else None
    except (OSError, ValueError, KeyError) as exc:
        raise ReportError(f"{results_path}: not a results file of test.py ({exc}); rerun test.py") from None
    if not (np.isfinite(after).all() and np.isfinite(before).all()):
        raise ReportError(f"{results_path}: returns are not finite")
    missing = {"return_after", "total_env_steps"} - set(columns)
    if missing:
        raise ReportError(f"{metrics_path}: rows lack {', '.join(sorted(missing))}")
    curve, env_steps = columns["return_after"], columns["total_env_steps"]
    return Run(folder, str(config["env-name"]), str(config.get("algorithm", "maml-trpo")), config.get("seed"),
               float(after.mean()), float(before.mean()), None if success is None else float(success.mean()),
               env_steps, curve, _with_defaults(config))


def _estimates(library: Any, *args: Any, seed: int, **kwargs: Any) -> tuple[dict, dict]:
    # rliable 1.2's bootstraps draw their indices from numpy's global generator (np.random.choice) and
    # ignore random_state: seed that generator for the call, and give the caller's state back after.
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        return library.get_interval_estimates(*args, **kwargs)
    finally:
        np.random.set_state(state)


def _interval(scores: np.ndarray, reps: int, seed: int) -> tuple[float, tuple[float, float]]:
    library, metrics = _rliable()
    point, ci = _estimates(library, {"x": scores.reshape(-1, 1)}, lambda x: np.array([metrics.aggregate_iqm(x)]),
                           seed=seed, reps=reps)
    return float(point["x"][0]), (float(ci["x"][0, 0]), float(ci["x"][1, 0]))


def _groups(runs: Sequence[Run]) -> list[tuple[str, str, dict[str, Any], list[Run]]]:
    """(env, algorithm, settings, runs): by env and algorithm, then by the settings in which those runs differ."""
    by_algorithm: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_algorithm.setdefault((run.env, run.algorithm), []).append(run)
    out = []
    for (env, algorithm), members in by_algorithm.items():
        keys = [key for key in dict.fromkeys(k for run in members for k in run.config) if key not in RUN_KEYS
                and any(run.config.get(key) != members[0].config.get(key) for run in members)]
        split: list[tuple[dict[str, Any], list[Run]]] = []
        for run in members:
            settings = {key: run.config.get(key) for key in keys}
            same = next((group for group in split if group[0] == settings), None)
            if same is None:
                split.append((settings, [run]))
            else:
                same[1].append(run)
        out.extend((env, algorithm, settings, group) for settings, group in split)
    return out


def summarise(runs: Sequence[Run], reps: int = 50_000, seed: int = 0) -> list[Summary]:
    """One :class:`Summary` per (env, algorithm, distinguishing settings), in the order first seen."""
    _, metrics = _rliable()
    out = []
    for env, algorithm, settings, members in _groups(runs):
        scores = np.array([run.after for run in members])
        iqm, ci = _interval(scores, reps, seed)
        summary = Summary(env, algorithm, members, iqm, ci, float(scores.mean()),
                          min(members, key=lambda run: run.after),
                          float(metrics.aggregate_iqm(np.array([[run.before] for run in members]))),
                          settings=settings)
        successes = [run.success_after for run in members]
        if all(s is not None for s in successes):
            summary.success_iqm, summary.success_ci = _interval(np.array(successes), reps, seed)
        # Episodes that end early make equal iterations differ by a few env steps: only a real gap is noted.
        steps = [int(run.env_steps[-1]) for run in members]
        iterations = sorted({len(run.curve) for run in members})
        if len(iterations) > 1 or max(steps) > 1.01 * min(steps):
            summary.notes.append(f"the runs' budgets differ: {iterations} iterations, {sorted(steps)} env steps")
        if len(members) < 4:
            summary.notes.append(f"{len(members)} runs: the IQM trims nothing below 4 runs (it is their mean), "
                                 "and the interval is a bootstrap over very few runs")
        out.append(summary)
    return out


def compare(a: Summary, b: Summary, reps: int = 2_000, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """rliable's probability that a run of ``a`` scores above a run of ``b``, with its 95% interval."""
    library, metrics = _rliable()
    x = np.array([[run.after] for run in a.runs])
    y = np.array([[run.after] for run in b.runs])
    point, ci = _estimates(library, {"p": (x, y)}, metrics.probability_of_improvement, seed=seed, reps=reps)
    low, high = np.ravel(ci["p"])
    return float(np.ravel(point["p"])[0]), (float(low), float(high))


def curves(summary: Summary, points: int = 50, reps: int = 2_000, seed: int = 0) -> dict[str, np.ndarray]:
    """The IQM training curve across the group's runs with its 95% band, at up to ``points`` iterations
    (the runs' common length); ``env_steps`` is the runs' mean budget at those iterations."""
    length = min(len(run.curve) for run in summary.runs)
    index = np.unique(np.linspace(0, length - 1, min(points, length)).round().astype(int))
    iqm, low, high = [], [], []
    for i in index:
        point, (lo, hi) = _interval(np.array([run.curve[i] for run in summary.runs]), reps, seed)
        iqm.append(point)
        low.append(lo)
        high.append(hi)
    steps = np.mean([run.env_steps[index] for run in summary.runs], axis=0)
    return {"iteration": index, "env_steps": steps, "iqm": np.array(iqm), "low": np.array(low),
            "high": np.array(high)}


def format_report(summaries: Sequence[Summary], comparisons: dict[tuple[int, int], Any] | None = None) -> str:
    """The table printed by ``report.py``: one row per group, then the pairwise comparisons."""
    lines = ["env | algorithm | runs (seeds) | return after adaptation: IQM [95% CI] | mean | worst seed | "
             "IQM before | success after: IQM [95% CI]",
             "----|-----------|--------------|---------------------------------------|------|------------|"
             "------------|-----------------------------"]
    for s in summaries:
        seeds = ", ".join(str(run.seed) for run in s.runs)
        success = "" if s.success_iqm is None else \
            f"{s.success_iqm:.1%} [{s.success_ci[0]:.1%}, {s.success_ci[1]:.1%}]"
        lines.append(f"{s.env} | {s.label} | {len(s.runs)} ({seeds}) | {s.iqm:.2f} [{s.ci[0]:.2f}, {s.ci[1]:.2f}] | "
                     f"{s.mean:.2f} | {s.worst.after:.2f} (seed {s.worst.seed}) | {s.before_iqm:.2f} | {success}")
    for s in summaries:
        for note in s.notes:
            lines.append(f"note: {s.env} {s.label}: {note}")
    for (i, j), (p, (lo, hi)) in (comparisons or {}).items():
        a, b = summaries[i], summaries[j]
        lines.append(f"{a.env}: P({a.label} > {b.label}) = {p:.2f} [{lo:.2f}, {hi:.2f}] "
                     f"(IQM {a.iqm:.2f} vs {b.iqm:.2f}, difference {a.iqm - b.iqm:+.2f})")
    return "\n".join(lines)
