"""CPU time of one Meta-World env step, per task class: Meta-World's own class against the fast path's.

One env of each, the same goal, the same random actions; 1,000 steps (a reset
every 500) per round, alternating the two envs round by round; thread CPU time,
best of ``--rounds``. This isolates the env step from the sampler and the
policy (``metaworld_throughput.py`` measures them together).

Usage::

    python benchmarks/metaworld_step.py                      # the ML10 train classes
    python benchmarks/metaworld_step.py push-v3 reach-v3     # named classes
    python benchmarks/metaworld_step.py --all                # all 50 v3 classes
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
    args = parser.parse_args()
    names = (list(metaworld.env_dict.ALL_V3_ENVIRONMENTS) if args.all
             else args.classes or list(metaworld.env_dict.ML10_V3["train"]))
    print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}, {platform.node()}, python {platform.python_version()}, "
          f"Meta-World {importlib.metadata.version('metaworld')}, MuJoCo {mujoco.__version__}")
    print(f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    print(f"{'class':28s} {'own us/step':>11s} {'fast us/step':>12s} {'own/fast':>8s}")
    totals = [0.0, 0.0]
    for name in names:
        own_cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
        goal = benchmark_tasks("ML1", name, 0)["train"][0][1]
        envs = []
        for cls in (own_cls, fast_class(own_cls)):
            env = cls()
            env.set_task(_metaworld_task(name, goal))
            envs.append(env)
        actions = np.random.default_rng(0).uniform(-1, 1, (1000, 4)).astype(np.float32)
        best = [float("inf"), float("inf")]
        for _ in range(args.rounds):
            for k, env in enumerate(envs):
                env.reset()
                start = time.thread_time()
                for t, action in enumerate(actions):
                    if t == 500:
                        env.reset()
                    env.step(action)
                best[k] = min(best[k], (time.thread_time() - start) / len(actions) * 1e6)
        totals = [a + b for a, b in zip(totals, best)]
        print(f"{name:28s} {best[0]:11.0f} {best[1]:12.0f} {best[0] / best[1]:7.2f}x", flush=True)
    print(f"{'all (sum of per-step times)':28s} {totals[0]:11.0f} {totals[1]:12.0f} {totals[0] / totals[1]:7.2f}x")


if __name__ == "__main__":
    main()
