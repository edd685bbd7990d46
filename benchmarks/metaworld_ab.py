"""Two checkouts of this project against each other (and envpool), in one interleaved run.

``metaworld_throughput.py`` compares contenders of one checkout; a change's effect needs the same contender
from two checkouts (``git worktree add /tmp/before <commit>``) on the same machine at the same time. Here
each (checkout, contender) pair runs in a long-lived process of its own, with ``PYTHONPATH`` set to its
checkout, builds that checkout's ``metaworld_throughput`` contender once, warms it up with one run, and then
runs once per round; the order rotates every round. It prints every round's steps/s and the median, with
its range, of the per-round ratios of every pair, per wall-second and per CPU-second. envpool runs from the
first checkout only (it is the same library for both).

Usage::

    git worktree add /tmp/before 0fa0fdc
    python benchmarks/metaworld_ab.py /tmp/before . --contenders sampler envpool --rounds 10
    python benchmarks/metaworld_ab.py /tmp/before . --scenario push --tasks 10 --batch-size 2 --contenders sampler-0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# One (checkout, contender) pair: reads its spec, builds the contender, answers "run" with its rates.
SERVER = r'''
import json, os, sys
spec = json.loads(sys.stdin.readline())
sys.path.insert(0, os.path.join(spec["checkout"], "benchmarks"))
import metaworld_throughput as mt
tasks = mt.scenario_tasks(spec["scenario"], spec["tasks"])
common = (spec["scenario"], tasks, spec["batch_size"], spec["horizon"])
make = {"sampler": lambda: mt.SamplerContender("sampler", *common, spec["workers"], True),
        "sampler-0": lambda: mt.SamplerContender("sampler-0", *common, 0, True),
        "per-env": lambda: mt.SamplerContender("per-env", *common, spec["workers"], True, mujoco_batch=False),
        "envpool": lambda: mt.EnvpoolContender("envpool", *common, spec["workers"])}[spec["contender"]]
contender = make()
contender.run()  # warm-up
print("ready", flush=True)
for line in sys.stdin:
    wall, cpu, steps = contender.run()
    print(json.dumps([steps / wall, steps / cpu]), flush=True)
contender.close()
'''
CONTENDERS = ("sampler", "sampler-0", "per-env", "envpool")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs=2, metavar="CHECKOUT", help="two checkouts of this project (before, after)")
    parser.add_argument("--contenders", nargs="+", default=["sampler", "envpool"], choices=CONTENDERS)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--scenario", default="ml10", choices=("reach", "push", "pick-place", "ml10"))
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    checkouts = [os.path.abspath(c) for c in args.checkouts]
    for c in checkouts:
        if not os.path.isfile(os.path.join(c, "benchmarks", "metaworld_throughput.py")):
            parser.error(f"{c} is not a checkout of this project (no benchmarks/metaworld_throughput.py)")
    names = [f"{i}:{os.path.basename(c) or c}" for i, c in enumerate(checkouts)]
    processes = {}
    try:
        for name, checkout in zip(names, checkouts):
            for contender in args.contenders:
                if contender == "envpool" and checkout != checkouts[0]:
                    continue
                env = dict(os.environ, PYTHONPATH=checkout, OMP_NUM_THREADS="1")
                process = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True, env=env, cwd=checkout)
                spec = {"checkout": checkout, "contender": contender, "scenario": args.scenario, "tasks": args.tasks,
                        "batch_size": args.batch_size, "horizon": args.horizon, "workers": args.workers}
                process.stdin.write(json.dumps(spec) + "\n")
                process.stdin.flush()
                if process.stdout.readline().strip() != "ready":
                    raise SystemExit(f"{name} {contender} did not start (its error is above)")
                processes[(name, contender)] = process
        keys = list(processes)
        rates = {key: [] for key in keys}
        print(f"# {args.scenario}: {args.tasks} tasks x {args.batch_size}, horizon {args.horizon}, "
              f"{args.workers} workers; checkouts {', '.join(f'{n} = {c}' for n, c in zip(names, checkouts))}")
        for r in range(args.rounds):
            for key in keys[r % len(keys):] + keys[:r % len(keys)]:
                processes[key].stdin.write("run\n")
                processes[key].stdin.flush()
                rates[key].append(json.loads(processes[key].stdout.readline()))
            print(f"round {r + 1}/{args.rounds} (steps/s): "
                  + ", ".join(f"{n} {c} {rates[(n, c)][-1][0]:,.0f}" for n, c in keys), flush=True)
        for n, c in keys:
            print(f"{n} {c}: median {statistics.median(x[0] for x in rates[(n, c)]):,.0f} steps/s, "
                  f"{statistics.median(x[1] for x in rates[(n, c)]):,.0f} steps/cpu-s")

        def ratio(a, b, i):
            values = [x[i] / y[i] for x, y in zip(rates[a], rates[b])]
            return f"{statistics.median(values):.2f}x [{min(values):.2f}, {max(values):.2f}]"

        print("ratio, median of per-round ratios [min, max]: steps/s, steps/cpu-s")
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                print(f"  {' '.join(b)} / {' '.join(a)}: {ratio(b, a, 0)}, {ratio(b, a, 1)}")
    finally:
        for process in processes.values():
            process.stdin.close()
            process.wait(timeout=60)


if __name__ == "__main__":
    main()
