"""In-context runs against the classic references, over seeds.

Reads the ``references.json`` that ``python -m maml_rl.references bandit|mdp --on RUN/results.npz --output
RUN/references`` wrote into each run folder, and prints each run's score and its ratio to the reference on the
same tasks (bandits: realised regret against Thompson sampling's; tabular MDPs: the trial's total return against
PSRL's), then, per group, the IQM over its runs with the 95% stratified bootstrap interval (rliable, as report.py).

    python tools/reference_ratios.py \\
        --group RL² docs/runs/bandit-k5-n100/rl2-3.26M/seed-1 docs/runs/bandit-k5-n100/rl2/seed-2 \\
            docs/runs/bandit-k5-n100/rl2/seed-3 \\
        --group Transformer docs/runs/bandit-k5-n100/transformer

A folder holding ``references.json`` is a run; any other folder stands for its ``seed-*`` folders that hold one.
``--file references-reset.json`` reads the evaluation with the context reset at each attempt.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from maml_rl.app.reports import _interval  # noqa: E402

#: benchmark -> (the policy's score, what it means, the reference, the reference's score, the ratio's key)
METRICS = {
    "bandit": ("realised_regret", "realised regret (lower is better)", "thompson", "regret", "regret_ratio"),
    "mdp": ("total_return", "total return over the trial (higher is better)", "psrl", "total_return", "return_ratio"),
}


class Row(NamedTuple):
    run: Path
    benchmark: str
    score: float
    sem: float
    reference: float
    ratio: float


def read_run(folder: Path, name: str) -> Row:
    path = folder / name
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise SystemExit(f"error: {path}: {exc.strerror}; write it with python -m maml_rl.references "
                         f"bandit|mdp --on {folder}/results.npz --output {folder}/{Path(name).stem}")
    except json.JSONDecodeError as exc:
        raise SystemExit(f"error: {path} is not JSON ({exc}); write it again with python -m maml_rl.references")
    benchmark = data.get("benchmark")
    if benchmark not in METRICS or "policy" not in data.get("algorithms", {}):
        raise SystemExit(f"error: {path} holds no policy evaluated against a bandit or MDP reference; write it with "
                         f"python -m maml_rl.references bandit|mdp --on {folder}/results.npz")
    key, _, reference, reference_key, ratio = METRICS[benchmark]
    algorithms = data["algorithms"]
    policy = algorithms["policy"]
    return Row(folder, benchmark, float(policy[key]["mean"]), float(policy[key]["sem"]),
               float(algorithms[reference][reference_key]["mean"]), float(policy["against"][reference][ratio]))


def find_runs(folder: Path, name: str) -> List[Path]:
    if (folder / name).is_file():
        return [folder]
    runs = sorted((p for p in folder.glob("seed-*") if (p / name).is_file()),
                  key=lambda p: (len(p.name), p.name))
    if not runs:
        raise SystemExit(f"error: {folder}: neither it nor a seed-* folder in it holds {name}")
    return runs


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", nargs="+", action="append", required=True, metavar=("NAME", "FOLDER"),
                        help="a group's name and its run folders (or folders of seed-* run folders)")
    parser.add_argument("--file", default="references.json", help="the file in each run (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=50_000, help="bootstrap replications (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default: %(default)s)")
    args = parser.parse_args(argv)
    groups = []
    for name, *folders in args.group:
        if not folders:
            parser.error(f"--group {name}: give its run folders after the name")
        rows = [read_run(run, args.file) for folder in folders for run in find_runs(Path(folder), args.file)]
        seen = [row.run.resolve() for row in rows]
        if len(set(seen)) != len(seen):
            parser.error(f"--group {name}: a run is given twice")
        groups.append((name, rows))
    benchmarks = {row.benchmark for _, rows in groups for row in rows}
    if len(benchmarks) > 1:
        parser.error(f"the runs' references are of different benchmarks ({', '.join(sorted(benchmarks))}); "
                     "summarise each apart")
    benchmark = benchmarks.pop()
    _, meaning, reference, _, _ = METRICS[benchmark]
    print(f"{benchmark}: score = the policy's {meaning}; ratio = score / {reference}'s on the same tasks "
          f"({args.file})")
    print(f"{'group':<14} {'run':<52} {'score':>16} {reference:>9} {'ratio':>7}")
    for name, rows in groups:
        for row in rows:
            print(f"{name:<14} {str(row.run):<52} {row.score:>9.2f} ± {row.sem:4.2f} {row.reference:>9.2f} "
                  f"{row.ratio:>7.3f}")
        score, (slo, shi) = _interval(np.array([row.score for row in rows]), args.reps, args.seed)
        ratio, (rlo, rhi) = _interval(np.array([row.ratio for row in rows]), args.reps, args.seed)
        print(f"{name:<14} IQM over {len(rows)} run(s) [95% CI]: score {score:.2f} [{slo:.2f}, {shi:.2f}], "
              f"ratio {ratio:.3f} [{rlo:.3f}, {rhi:.3f}]")


if __name__ == "__main__":
    main()
