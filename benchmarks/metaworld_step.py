"""CPU time of one Meta-World env step, per task class: Meta-World's own class against the fast path's.

One env of each, the same goal, the same random actions; 1,000 steps (a reset
every 500) per round, alternating the two envs round by round; thread CPU time,
best of ``--rounds``. This isolates the env step from the sampler and the
policy (``metaworld_throughput.py`` measures them together).

With ``--batched N`` a third contender, in the same rounds: N fast envs of the
class stepped together (``BatchedSawyer``, one ``mujoco.batch`` thread, the
infos the sampler reads by default: ``success``), the same actions to all,
its CPU time per env step; and the share of its rows that went to the env's
own ``evaluate_state`` (where Meta-World's arithmetic turns float32 with the
action, and so on: docs/environments.md).

Usage::

    python benchmarks/metaworld_step.py                      # the ML10 train classes
    python benchmarks/metaworld_step.py push-v3 reach-v3     # named classes
    python benchmarks/metaworld_step.py --all                # all 50 v3 classes
    python benchmarks/metaworld_step.py --all --batched 10   # and 10 envs of each stepped together
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import sys
import time

import numpy as np

from maml_rl.envs.metaworld import _metaworld_task, benchmark_tasks
from maml_rl.envs.metaworld_fast import fast_class


def main() -> None:
    import metaworld.env_dict
    import mujoco

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("classes", nargs="*", help="v3 task names (default: ML10's train classes)")
    parser.add_argument("--all", action="store_true", help="all 50 v3 classes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batched", type=int, default=0, metavar="N",
                        help="also N envs of each class stepped together (BatchedSawyer; needs MuJoCo 4)")
    args = parser.parse_args()
    if args.batched < 0:
        parser.error("--batched must be at least 1 (or 0: off)")
    names = (list(metaworld.env_dict.ALL_V3_ENVIRONMENTS) if args.all
             else args.classes or list(metaworld.env_dict.ML10_V3["train"]))
    print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}, {platform.node()}, python {platform.python_version()}, "
          f"Meta-World {importlib.metadata.version('metaworld')}, MuJoCo {mujoco.__version__}")
    print(f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    batched = f" {'batched us/env':>14s} {'fast/batched':>12s} {'by env':>6s}" if args.batched else ""
    print(f"{'class':28s} {'own us/step':>11s} {'fast us/step':>12s} {'own/fast':>8s}{batched}")
    totals = [0.0, 0.0, 0.0]
    for name in names:
        own_cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
        goal = benchmark_tasks("ML1", name, 0)["train"][0][1]
        envs = []
        for cls in (own_cls, fast_class(own_cls)):
            env = cls()
            env.set_task(_metaworld_task(name, goal))
            envs.append(env)
        actions = np.random.default_rng(0).uniform(-1, 1, (1000, 4)).astype(np.float32)
        batch = BatchedRun(fast_class(own_cls), name, goal, args.batched) if args.batched else None
        best = [float("inf"), float("inf"), float("inf")]
        for _ in range(args.rounds):
            for k, env in enumerate(envs):
                env.reset()
                start = time.thread_time()
                for t, action in enumerate(actions):
                    if t == 500:
                        env.reset()
                    env.step(action)
                best[k] = min(best[k], (time.thread_time() - start) / len(actions) * 1e6)
            if batch is not None:
                best[2] = min(best[2], batch.run(actions))
        totals = [a + b for a, b in zip(totals, best)]
        line = f"{name:28s} {best[0]:11.0f} {best[1]:12.0f} {best[0] / best[1]:7.2f}x"
        if batch is not None:
            line += f" {best[2]:14.0f} {best[1] / best[2]:11.2f}x {batch.by_env:6.1%}"
        print(line, flush=True)
    line = f"{'all (sum of per-step times)':28s} {totals[0]:11.0f} {totals[1]:12.0f} {totals[0] / totals[1]:7.2f}x"
    if args.batched:
        line += f" {totals[2]:14.0f} {totals[1] / totals[2]:11.2f}x"
    print(line)


class BatchedRun:
    """``n`` fast envs of one class stepped together, the same goal and actions as the single envs."""

    def __init__(self, cls, name: str, goal, n: int):
        from maml_rl.envs.metaworld_fast.batched import BatchedSawyer

        self.envs = []
        for _ in range(n):
            env = cls()
            env.set_task(_metaworld_task(name, goal))
            self.envs.append(env)
        self.batch = BatchedSawyer(self.envs)
        self.rows = self.evaluated = 0
        evaluate_rows = self.batch.evaluate_rows

        def counting(rows, *args):
            self.evaluated += len(rows)
            evaluate_rows(rows, *args)

        self.batch.evaluate_rows = counting

    def reset(self) -> None:
        for i, env in enumerate(self.envs):
            self.batch.sync(i)
            env.reset()
            self.batch.load(i)

    @property
    def by_env(self) -> float:
        return self.evaluated / max(self.rows, 1)

    def run(self, actions: np.ndarray) -> float:
        """CPU microseconds per env step over ``actions`` (each given to every env), resets included."""
        n = len(self.envs)
        self.reset()
        start = time.thread_time()
        for t, action in enumerate(actions):
            if t == 500:
                self.reset()
            self.batch.step(np.repeat(action[None], n, axis=0), ("success",))
        self.rows += n * len(actions)
        return (time.thread_time() - start) / (len(actions) * n) * 1e6


if __name__ == "__main__":
    main()
