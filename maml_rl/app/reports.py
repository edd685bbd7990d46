"""Results over several seeds: the interquartile mean with stratified bootstrap confidence intervals.

A run folder (``train.py --output-folder``) holds ``config.json``, ``metrics.jsonl``
and, once ``test.py`` has evaluated it, ``results.npz``. Runs are grouped by
environment and algorithm, and further by any setting in which runs of one
algorithm differ (``promp (outer-kl-limit=0.1)`` beside ``promp
(outer-kl-limit=null)``; a key a config leaves out counts as its default), so
that two configurations are never pooled into one figure; the seed and the
iteration count do not split a group (a budget that differs is noted). Runs
that test.py evaluated otherwise (the record in results.npz, :mod:`maml_rl.app.results`)
are grouped apart too, flagged, and not compared; stale results are flagged.
Reading the run folders is :mod:`maml_rl.app.report_runs`'s. Each run's score is its held-out mean return (and
success) after adaptation, from ``results.npz``, and its training curve the
``return_after`` of ``metrics.jsonl``. Across runs the aggregate is the IQM
with a 95% stratified bootstrap confidence interval ("Deep Reinforcement
Learning at the Edge of the Statistical Precipice", Agarwal et al., NeurIPS
2021), computed by ``rliable`` (``pip install -e ".[stats]"``), and, between
two algorithms on the same env, rliable's probability of improvement: on the
return, and on success where both groups report it (Meta-World's headline).
Files are read without unpickling (``allow_pickle=False``, JSON).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from maml_rl.app.report_runs import ReportError, Run, load_run
from maml_rl.app.results import settings_differ
from maml_rl.utils.progress import Advance, Progress

__all__ = ["Run", "Summary", "ReportError", "attempt_curves", "comparison_problem", "load_run", "summarise",
           "compare", "curves", "format_report"]


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
    success_worst: Run | None = None  # the run with the lowest held-out success (None: no success reported)
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the keys that set this group apart from its algorithm's others
    # The evaluation settings that set it apart (results.npz's record); None: its runs' results do not record them.
    evaluated: dict[str, Any] | None = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The algorithm, with the settings that tell it from other groups of the same algorithm."""
        parts = [f"{k}={json.dumps(v)}" for k, v in self.settings.items()]
        if self.evaluated is None:
            parts.append("evaluation not recorded")
        elif self.evaluated:
            parts.append("evaluated with " + ", ".join(f"{k}={json.dumps(v)}" for k, v in self.evaluated.items()))
        return f"{self.algorithm} ({', '.join(parts)})" if parts else self.algorithm


# Keys in which runs of one configuration differ: they do not split a group.
RUN_KEYS = ("seed", "num-batches")


def _rliable():
    try:
        from rliable import library, metrics
    except ImportError as exc:
        raise ImportError(f"reports need rliable ({exc}): pip install -e \".[stats]\"") from None
    return library, metrics


def _estimates(library: Any, *args: Any, seed: int, **kwargs: Any) -> tuple[dict, dict]:
    # rliable 1.2's bootstraps draw their indices from numpy's global generator (np.random.choice) and
    # ignore random_state: seed that generator for the call, and give the caller's state back after.
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        return library.get_interval_estimates(*args, **kwargs)
    finally:
        np.random.set_state(state)


def _interval(scores: np.ndarray, reps: int, seed: int,
              advance: Advance | None = None) -> tuple[float, tuple[float, float]]:
    """The IQM of ``scores`` and its bootstrap interval; ``advance(1)`` is called at each replication.

    One score is its own IQM and every resample of it is itself: the bootstrap's answer, ``(x, (x, x))``, without
    its ``reps`` replications (a 100-attempt curve of one seed took a minute)."""
    if scores.size == 1:
        if advance is not None:
            advance(reps)
        x = float(scores.reshape(-1)[0])
        return x, (x, x)
    library, metrics = _rliable()

    def iqm(x: np.ndarray) -> np.ndarray:
        if advance is not None:
            advance(1)
        return np.array([metrics.aggregate_iqm(x)])

    point, ci = _estimates(library, {"x": scores.reshape(-1, 1)}, iqm, seed=seed, reps=reps)
    return float(point["x"][0]), (float(ci["x"][0, 0]), float(ci["x"][1, 0]))


def _evaluation(run: Run) -> dict[str, Any] | None:
    """The settings of the run's evaluation (results.npz's record), None when it has none."""
    return None if run.evaluation is None else dict(run.evaluation["settings"])


def _groups(runs: Sequence[Run]) -> list[tuple[str, str, dict[str, Any], dict[str, Any] | None, list[Run]]]:
    """(env, algorithm, settings, evaluated, runs): by env and algorithm, then by the settings and the evaluation
    settings in which those runs differ (runs whose results record no evaluation apart, when others do)."""
    by_algorithm: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_algorithm.setdefault((run.env, run.algorithm), []).append(run)
    out = []
    for (env, algorithm), members in by_algorithm.items():
        keys = [key for key in dict.fromkeys(k for run in members for k in run.config) if key not in RUN_KEYS
                and any(run.config.get(key) != members[0].config.get(key) for run in members)]
        recorded = [_evaluation(run) for run in members if run.evaluation is not None]
        eval_keys = list(dict.fromkeys(key for e in recorded for key in settings_differ(e, recorded[0])))
        mixed = 0 < len(recorded) < len(members)
        split: list[tuple[tuple, dict[str, Any], dict[str, Any] | None, list[Run]]] = []
        for run in members:
            settings = {key: run.config.get(key) for key in keys}
            evaluation = _evaluation(run)
            evaluated = {key: evaluation.get(key) for key in eval_keys} if evaluation is not None else \
                (None if mixed else {})
            signature = (json.dumps(settings, sort_keys=True), json.dumps(evaluated, sort_keys=True))
            same = next((group for group in split if group[0] == signature), None)
            if same is None:
                split.append((signature, settings, evaluated, [run]))
            else:
                same[3].append(run)
        out.extend((env, algorithm, settings, evaluated, group) for _, settings, evaluated, group in split)
    return out


def _run_notes(run: Run) -> list[str]:
    """What the report must say about one run's recorded evaluation: stale, or of an unfinished run."""
    if run.evaluation is None:
        return []
    name = f"seed {run.seed} ({run.folder})"
    rerun = f"rerun python test.py --config {run.folder / 'config.json'}"
    notes = []
    if run.stale:
        notes.append(f"STALE: {name}: results.npz no longer stands for the run's policy: {run.stale}; {rerun}")
    policy = run.evaluation["policy"]
    if policy.get("iteration") is not None and policy.get("num-batches") and \
            policy["iteration"] < policy["num-batches"]:
        notes.append(f"{name}: evaluated at iteration {policy['iteration']} of {policy['num-batches']}: "
                     "its run was unfinished")
    return notes


def summarise(runs: Sequence[Run], reps: int = 50_000, seed: int = 0, progress: Progress = Progress()) -> list[Summary]:
    """One :class:`Summary` per (env, algorithm, distinguishing settings), in the order first seen.

    :param progress: told of each group's bootstraps, the long part (report.py draws them as a bar).
    """
    _, metrics = _rliable()
    out = []
    for env, algorithm, settings, evaluated, members in _groups(runs):
        scores = np.array([run.after for run in members])
        successes = [run.success_after for run in members]
        with_success = all(s is not None for s in successes)
        with progress.phase(f"{env} {algorithm}: bootstrap", reps * (2 if with_success else 1), "rep") as advance:
            iqm, ci = _interval(scores, reps, seed, advance)
            summary = Summary(env, algorithm, members, iqm, ci, float(scores.mean()),
                              min(members, key=lambda run: run.after),
                              float(metrics.aggregate_iqm(np.array([[run.before] for run in members]))),
                              settings=settings, evaluated=evaluated)
            if with_success:
                summary.success_iqm, summary.success_ci = _interval(np.array(successes), reps, seed, advance)
                summary.success_worst = min(members, key=lambda run: run.success_after)
        if evaluated:
            summary.notes.append(f"EVALUATED DIFFERENTLY from the other {algorithm} runs on {env} ("
                                 + ", ".join(f"{k}={json.dumps(v)}" for k, v in evaluated.items())
                                 + "): not pooled with them, and compared only with groups evaluated alike")
        for run in members:
            summary.notes.extend(_run_notes(run))
        unrecorded = [run for run in members if run.evaluation is None]
        if unrecorded:
            summary.notes.append(
                f"{len(unrecorded)} run(s) ({', '.join(str(run.folder) for run in unrecorded)}): results.npz does "
                "not record how it was evaluated (an older test.py wrote it), so it cannot be checked against "
                "the other runs' evaluation nor against the run's policy; rerun test.py on them")
        # Budgets by configuration (the group's configs differ at most in num-batches) and iterations run:
        # episodes that end early make the env steps of equal budgets differ, and say nothing.
        budgets = sorted({json.dumps(run.config.get("num-batches")) for run in members})
        iterations = sorted({len(run.curve) for run in members})
        if len(budgets) > 1 or len(iterations) > 1:
            steps = sorted(int(run.env_steps[-1]) for run in members)
            summary.notes.append(f"the runs' budgets differ: num-batches {', '.join(budgets)}; iterations run "
                                 f"{iterations} ({steps[0]} to {steps[-1]} env steps)")
        if len(members) < 4:
            summary.notes.append(f"{len(members)} runs: the IQM trims nothing below 4 runs (it is their mean), "
                                 "and the interval is a bootstrap over very few runs")
        out.append(summary)
    return out


def comparison_problem(a: Summary, b: Summary) -> str | None:
    """Why two groups' scores must not be compared (evaluated with other settings under one protocol), or None."""
    ea, eb = (_evaluation(a.runs[0]), _evaluation(b.runs[0]))
    if ea is None or eb is None or ea["protocol"] != eb["protocol"]:
        return None  # unrecorded (noted per run), or two protocols such as RL²'s trials and gradient steps
    differ = [f"{key} {json.dumps(ea.get(key))} vs {json.dumps(eb.get(key))}" for key in settings_differ(ea, eb)]
    return f"evaluated with other settings ({', '.join(differ)})" if differ else None


METRICS = ("return", "success")


def _scores(summary: Summary, metric: str) -> np.ndarray:
    """[runs, 1]: each run's held-out return or success after adaptation."""
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r}: use one of {', '.join(METRICS)}")
    if metric == "success" and summary.success_iqm is None:
        raise ValueError(f"{summary.env} {summary.label}: its results report no success to compare")
    return np.array([[run.after if metric == "return" else run.success_after] for run in summary.runs])


def compare(a: Summary, b: Summary, reps: int = 2_000, seed: int = 0,
            metric: str = "return") -> tuple[float, tuple[float, float]]:
    """rliable's probability that a run of ``a`` scores above a run of ``b`` (ties count half), with its 95%
    interval, on the held-out ``metric``: "return" or "success" (both groups must report success)."""
    library, metrics = _rliable()
    x, y = _scores(a, metric), _scores(b, metric)
    point, ci = _estimates(library, {"p": (x, y)}, metrics.probability_of_improvement, seed=seed, reps=reps)
    low, high = np.ravel(ci["p"])
    return float(np.ravel(point["p"])[0]), (float(low), float(high))


def curves(summary: Summary, points: int = 50, reps: int = 2_000, seed: int = 0,
           progress: Progress = Progress()) -> dict[str, np.ndarray]:
    """The IQM training curve across the group's runs with its 95% band, at up to ``points`` iterations
    (the runs' common length); ``env_steps`` is the runs' mean budget at those iterations."""
    length = min(len(run.curve) for run in summary.runs)
    index = np.unique(np.linspace(0, length - 1, min(points, length)).round().astype(int))
    iqm, low, high = [], [], []
    with progress.phase(f"{summary.env} {summary.label}: curve", len(index), "point") as advance:
        for i in index:
            point, (lo, hi) = _interval(np.array([run.curve[i] for run in summary.runs]), reps, seed)
            iqm.append(point)
            low.append(lo)
            high.append(hi)
            advance(1)
    steps = np.mean([run.env_steps[index] for run in summary.runs], axis=0)
    return {"iteration": index, "env_steps": steps, "iqm": np.array(iqm), "low": np.array(low),
            "high": np.array(high)}


def attempt_curves(summary: Summary, metric: str = "returns", reps: int = 2_000, seed: int = 0,
                   progress: Progress = Progress()) -> dict[str, np.ndarray] | None:
    """The held-out ``metric`` (``"returns"`` or ``"success"``) at each of test.py's stages (a trial learner's
    attempts, then its evaluation episodes) over the group's runs: IQM with its 95% band; ``None`` where a run's
    results.npz does not hold it, or the runs' stages differ in number."""
    rows = [getattr(run, f"{metric}_by_stage") for run in summary.runs]
    if any(r is None for r in rows) or len({len(r) for r in rows}) != 1:
        return None
    table = np.stack(rows)  # [runs, stages]
    iqm, low, high = [], [], []
    with progress.phase(f"{summary.env} {summary.label}: {metric} by attempt", table.shape[1], "stage") as advance:
        for column in table.T:
            point, (lo, hi) = _interval(column, reps, seed)
            iqm.append(point)
            low.append(lo)
            high.append(hi)
            advance(1)
    return {"stage": np.arange(table.shape[1]), "iqm": np.array(iqm), "low": np.array(low), "high": np.array(high),
            "runs": table}


def format_report(summaries: Sequence[Summary], comparisons: dict[tuple[int, int], Any] | None = None,
                  success_comparisons: dict[tuple[int, int], Any] | None = None) -> str:
    """The table printed by ``report.py``: one row per group, then the pairwise comparisons (on the return,
    then on success where both groups report it)."""
    lines = ["env | algorithm | runs (seeds) | return after adaptation: IQM [95% CI] | mean | worst seed | "
             "IQM before | success after: IQM [95% CI], worst seed",
             "----|-----------|--------------|---------------------------------------|------|------------|"
             "------------|-----------------------------"]
    for s in summaries:
        seeds = ", ".join(str(run.seed) for run in s.runs)
        success = "" if s.success_iqm is None else \
            f"{s.success_iqm:.1%} [{s.success_ci[0]:.1%}, {s.success_ci[1]:.1%}], " \
            f"worst {s.success_worst.success_after:.1%} (seed {s.success_worst.seed})"
        lines.append(f"{s.env} | {s.label} | {len(s.runs)} ({seeds}) | {s.iqm:.2f} [{s.ci[0]:.2f}, {s.ci[1]:.2f}] | "
                     f"{s.mean:.2f} | {s.worst.after:.2f} (seed {s.worst.seed}) | {s.before_iqm:.2f} | {success}")
    for s in summaries:
        for note in s.notes:
            lines.append(f"note: {s.env} {s.label}: {note}")
    for (i, j), (p, (lo, hi)) in (comparisons or {}).items():
        a, b = summaries[i], summaries[j]
        lines.append(f"{a.env}: P({a.label} > {b.label}) = {p:.2f} [{lo:.2f}, {hi:.2f}] "
                     f"(IQM {a.iqm:.2f} vs {b.iqm:.2f}, difference {a.iqm - b.iqm:+.2f})")
    for (i, j), (p, (lo, hi)) in (success_comparisons or {}).items():
        a, b = summaries[i], summaries[j]
        lines.append(f"{a.env}: P({a.label} > {b.label}) on success = {p:.2f} [{lo:.2f}, {hi:.2f}] "
                     f"(IQM {a.success_iqm:.1%} vs {b.success_iqm:.1%}, difference "
                     f"{100 * (a.success_iqm - b.success_iqm):+.1f} points)")
    return "\n".join(lines)
