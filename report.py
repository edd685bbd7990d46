r"""Results over seeds: IQM with 95% stratified bootstrap confidence intervals, per env and algorithm.

    python train.py --config configs/promp/2d-navigation.yaml --output-folder runs/promp-nav --seeds 1 2 3
    python test.py --config runs/promp-nav/seed-1/config.json      # and seed-2, seed-3
    python report.py runs/promp-nav runs/maml-nav --plot runs/nav-curves.png

Each argument is a run folder, or a folder of run folders (``train.py
--seeds`` writes ``seed-<n>`` ones); a run reached twice counts once, and two
folders holding the same run (a copy) are refused. Each run scores its
held-out mean return after adaptation from test.py's ``results.npz``; runs
group by env and algorithm, and apart where their configs differ (other than
seed and iteration count: ``promp (outer-kl-limit=0.1)``) or where test.py
evaluated them otherwise (``--num-steps``, ``--eval-actions``, ...: such groups
are flagged and not compared); results older than the run's policy are
flagged STALE. The table gives the interquartile mean over a group's runs with its
95% stratified bootstrap interval (rliable: ``pip install -e ".[stats]"``),
the mean, the worst seed, and for each two groups on one env the probability
that a run of one beats a run of the other: on the return, and on success
where both report it (Meta-World). ``--plot`` draws the training curves
(return after adaptation on the training tasks) as IQM with 95% bands;
``--attempts`` draws the trial learners' held-out return and success by
attempt (test.py's rows), over seeds, beside the same runs evaluated with the
context reset at each attempt when given as a second ``--results`` file:

    python test.py --config runs/rl2-sparse/seed-1/config.json --reset-context-each-attempt \
        --output runs/rl2-sparse/seed-1/results-reset.npz
    python report.py runs/rl2-sparse runs/transformer-sparse --results results.npz results-reset.npz \
        --attempts attempts.png

``--references`` draws the classic algorithms on the same tasks beside them, from the JSON that
``python -m maml_rl.references`` wrote (``--on`` a run's results.npz: the run's own tasks and attempts):

    python -m maml_rl.references bandit --on runs/rl2-bandit/seed-1/results.npz --output runs/bandit-references
    python report.py runs/rl2-bandit runs/transformer-bandit --results results.npz results-reset.npz \
        --attempts attempts.png --references runs/bandit-references.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from maml_rl.app.startup import quiet_interrupt

with quiet_interrupt("report.py"):
    from maml_rl.app.command_line import run_script
    from maml_rl.app.config_files import ConfigError
    from tqdm import tqdm

    from maml_rl.app.plotting import plot_attempt_curves, plot_iqm_curves
    from maml_rl.app.progress import PHASE_DELAY, PhaseBar
    from maml_rl.app.report_runs import distinct_runs, find_run_folders
    from maml_rl.app.runs.lock import writer_of
    from maml_rl.app.reports import (ReportError, attempt_curves, compare, comparison_problem, curves,
                                     format_report, load_run, summarise)
    from maml_rl.references.curves import load_reference_curves


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("runs", nargs="+", help="run folders, or folders of run folders")
    parser.add_argument("--results", nargs="+", default=["results.npz"], metavar="NAME",
                        help="test.py's file in each run (default: results.npz); several names report each run once "
                             "per file, e.g. results.npz results-reset.npz for the context reset at each attempt")
    parser.add_argument("--plot", default=None, metavar="PNG", help="training curves with 95%% bands")
    parser.add_argument("--attempts", default=None, metavar="PNG",
                        help="trial learners' held-out return and success by attempt, over seeds with 95%% bands")
    parser.add_argument("--references", nargs="+", default=[], metavar="JSON",
                        help="with --attempts: the classic algorithms' curves on the same env, drawn beside the runs "
                             "(the .json of `python -m maml_rl.references ... --output`)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--reps", type=int, default=50_000, help="bootstrap replications (default: 50000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.reps < 100:
        raise ConfigError(f"--reps {args.reps}: too few bootstrap replications for a 95% interval; give >= 100")
    if args.references and not args.attempts:
        raise ConfigError("--references are drawn on the attempt curves: give --attempts PNG too")
    try:
        references = [load_reference_curves(path) for path in args.references]
    except ValueError as exc:
        raise ConfigError(f"--references: {exc}") from None
    try:
        folders = find_run_folders(args.runs)
        for folder in folders:
            if writer_of(folder) is not None:
                print(f"note: {folder} is being written by a running train.py: it is reported as it is now "
                      "(its files are only read)", file=sys.stderr)
        reading = tqdm(folders, desc="reading runs", unit="run", leave=False, delay=PHASE_DELAY, file=sys.stderr)
        runs = distinct_runs([load_run(folder, name) for folder in reading for name in args.results])
        summaries = summarise(runs, reps=args.reps, seed=args.seed, progress=PhaseBar(position=0))
    except (ReportError, ImportError) as exc:
        raise ConfigError(str(exc)) from None
    comparisons, success_comparisons, not_compared = {}, {}, []
    for i, a in enumerate(summaries):
        for j, b in enumerate(summaries):
            if i < j and a.env == b.env:
                problem = comparison_problem(a, b)
                if problem:
                    not_compared.append(f"{a.env}: {a.label} and {b.label} not compared: {problem}")
                else:
                    comparisons[(i, j)] = compare(a, b, seed=args.seed)
                    if a.success_iqm is not None and b.success_iqm is not None:
                        success_comparisons[(i, j)] = compare(a, b, seed=args.seed, metric="success")
    print("\n".join([format_report(summaries, comparisons, success_comparisons),
                     *(f"note: {line}" for line in not_compared)]))
    figures = {
        "groups": [{"env": s.env, "algorithm": s.algorithm, "label": s.label, "settings": s.settings,
                    "evaluated": s.evaluated, "seeds": [r.seed for r in s.runs],
                    "folders": [str(r.folder) for r in s.runs], "scores": [r.after for r in s.runs],
                    "iqm": s.iqm, "ci": list(s.ci), "mean": s.mean, "worst_seed": s.worst.seed,
                    "worst": s.worst.after, "iqm_before": s.before_iqm, "success_iqm": s.success_iqm,
                    "success_ci": None if s.success_ci is None else list(s.success_ci),
                    "success_scores": None if s.success_iqm is None else [r.success_after for r in s.runs],
                    "success_worst_seed": None if s.success_worst is None else s.success_worst.seed,
                    "env_steps": [float(r.env_steps[-1]) for r in s.runs], "notes": s.notes} for s in summaries],
        "comparisons": [{"env": summaries[i].env, "a": summaries[i].label, "b": summaries[j].label,
                         "probability_a_beats_b": p, "ci": list(ci),
                         "success": None if (i, j) not in success_comparisons else
                         {"probability_a_beats_b": success_comparisons[(i, j)][0],
                          "ci": list(success_comparisons[(i, j)][1])}}
                        for (i, j), (p, ci) in comparisons.items()],
        "not_compared": not_compared,
    }
    if args.plot:
        try:
            reps = min(args.reps, 2_000)
            plot_iqm_curves([(s.env, s.label, len(s.runs), curves(s, reps=reps, seed=args.seed,
                                                                   progress=PhaseBar(position=0)))
                             for s in summaries], args.plot)
        except ImportError:
            raise ConfigError("--plot needs matplotlib: pip install -e \".[plot]\"") from None
        print(f"curves written to {args.plot}", file=sys.stderr)
    if args.attempts:
        figures["attempts"], figures["references"] = _plot_attempts(summaries, references, args)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return figures


def _attempt_label(summary) -> str:
    """The group's label, the context reset said in words (it is what the attempt curves compare)."""
    evaluated = dict(summary.evaluated or {})
    if "reset-context-each-attempt" not in evaluated:
        return summary.label
    reset = evaluated.pop("reset-context-each-attempt")
    rest = dataclasses.replace(summary, evaluated=evaluated).label if evaluated else summary.algorithm
    return f"{rest}, {'context reset at each attempt' if reset else 'context kept'}"


def _plot_attempts(summaries, references, args) -> tuple[list[dict], list[dict]]:
    """``--attempts``: the trial learners' groups by attempt (others have no attempts: named on stderr), and the
    ``references`` on their envs."""
    trials = [s for s in summaries if all(run.evaluation and "episodes-per-trial" in run.evaluation["settings"]
                                          for run in s.runs)]
    for s in summaries:
        if s not in trials:
            print(f"note: {s.env} {s.label}: not in --attempts (not a trial learner's evaluation, or its results "
                  "do not record one)", file=sys.stderr)
    if not trials:
        raise ConfigError("--attempts: no group of trial learners' runs to plot (runs whose test.py results record "
                          "a trial's attempts, episodes-per-trial)")
    reps = min(args.reps, 2_000)
    groups = [(s.env, _attempt_label(s), len(s.runs), {metric: attempt_curves(s, metric, reps=reps, seed=args.seed,
                                                                      progress=PhaseBar(position=0))
                                             for metric in ("returns", "success")}) for s in trials]
    for ref in references:
        stages = {len(c["returns"]["iqm"]) for env, _, _, c in groups if env == ref.env and c["returns"] is not None}
        if not stages:
            raise ConfigError(f"--references: {ref.path} holds {ref.env}'s tasks, and no run plotted is on "
                              f"{ref.env} (the runs' envs: {', '.join(dict.fromkeys(g[0] for g in groups))})")
        if stages != {ref.attempts + 1}:  # test.py's stages: the trial's attempts, then its evaluation episodes
            raise ConfigError(f"--references: {ref.path} has {ref.attempts} attempts a trial, the runs on "
                              f"{ref.env} {' or '.join(str(n - 1) for n in sorted(stages))}: compute the references "
                              "with the runs' attempts (python -m maml_rl.references ... --on RESULTS.npz)")
    try:
        plot_attempt_curves(groups, args.attempts, references)
    except ImportError:
        raise ConfigError("--attempts needs matplotlib: pip install -e \".[plot]\"") from None
    print(f"attempt curves written to {args.attempts}", file=sys.stderr)
    return ([{"env": env, "label": label, "seeds": seeds,
              **{metric: None if c is None else {k: c[k].tolist() for k in ("iqm", "low", "high", "runs")}
                 for metric, c in curves_.items()}} for env, label, seeds, curves_ in groups],
            [{"file": ref.path, "env": ref.env, "tasks": ref.tasks,
              "returns": {name: curve.tolist() for name, curve in ref.curves.items()}} for ref in references])


if __name__ == "__main__":
    run_script(main)
