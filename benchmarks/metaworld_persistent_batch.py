"""A batched Meta-World class's physics with persistent and with state-copying ``mujoco.batch`` batches.

``BatchedSawyer`` keeps each simulation's whole ``MjData`` (``persistent=True``) only for the classes whose
outputs read contacts; the others copy each simulation's state in and out of one ``MjData`` per thread. This
script measures that choice: the ML10 train mix (or its first ``--classes`` classes), ``--envs`` envs a class,
as two ``MetaWorldStepper``s in one process, one with each kind of batch, stepped with the same random actions
in alternating blocks (so both see the same machine), timing only ``Batch.step``.

Usage::

    python benchmarks/metaworld_persistent_batch.py                    # 10 envs of each of the 10 classes
    python benchmarks/metaworld_persistent_batch.py --envs 20 --classes 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from maml_rl.envs.metaworld import MetaWorldEnv, benchmark_tasks
from maml_rl.envs.metaworld_fast.batched import sawyer
from maml_rl.envs.metaworld_fast.batched.stepper import MetaWorldStepper


def build(picked, envs_per_class: int, persistent: bool) -> MetaWorldStepper:
    batch_module = sawyer.mujoco_batch

    class Forced:  # BatchedSawyer's mujoco.batch, with every batch of the chosen kind
        @staticmethod
        def Batch(model, n, nthread=1, **_):
            return batch_module.Batch(model, n, nthread=nthread, persistent=persistent)

    sawyer.mujoco_batch = Forced
    try:
        envs = []
        for name, rand_vec in picked:
            for _ in range(envs_per_class):
                env = MetaWorldEnv("ML10", None, fast=True)
                env.reset_task({"benchmark": "ML10", "split": "train", "env_name": name, "index": -1,
                                "rand_vec": rand_vec})
                envs.append(env)
        stepper = MetaWorldStepper(envs, 1)
        stepper.assign(len(envs))
        for i, env in enumerate(envs):
            stepper.before_reset(i)
            env.reset()
            stepper.after_reset(i)
    finally:
        sawyer.mujoco_batch = batch_module
    return stepper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=10, help="envs a class (default 10)")
    parser.add_argument("--classes", type=int, default=10, help="the first classes of the ML10 train mix (default 10)")
    parser.add_argument("--blocks", type=int, default=16, help="alternating blocks (default 16)")
    parser.add_argument("--block-steps", type=int, default=30, help="steps a block (default 30)")
    args = parser.parse_args()
    if args.blocks * args.block_steps > 500:
        parser.error("--blocks x --block-steps steps each stepper within one 500-step episode: at most 500")
    if sawyer.mujoco_batch is None:
        raise SystemExit("this needs mujoco.batch (MuJoCo >= 4.0)")
    picked, seen = [], set()
    for name, rand_vec in benchmark_tasks("ML10", None, 0)["train"]:
        if name not in seen:
            seen.add(name)
            picked.append((name, rand_vec))
    picked = picked[:args.classes]
    steppers = {kind: build(picked, args.envs, kind) for kind in (True, False)}
    n = args.envs * len(picked)
    batch_type = type(steppers[True].groups[0][1].batch)
    step, current, seconds = batch_type.step, [True], {True: 0.0, False: 0.0}

    def timed(self, *a, **k):
        start = time.perf_counter()
        try:
            return step(self, *a, **k)
        finally:
            seconds[current[0]] += time.perf_counter() - start

    batch_type.step = timed
    rows = np.arange(n)
    actions = np.random.default_rng(0).uniform(-1, 1, (args.blocks * args.block_steps, n, 4))
    try:
        for block in range(args.blocks):  # the order alternates too
            for kind in (True, False) if block % 2 == 0 else (False, True):
                current[0] = kind
                for t in range(block * args.block_steps, (block + 1) * args.block_steps):
                    steppers[kind].step(rows, actions[t], ("success",))
    finally:
        batch_type.step = step
    steps = args.blocks * args.block_steps
    print(f"{len(picked)} class(es) x {args.envs} envs, {steps} steps each way, Batch.step only:")
    for kind in (True, False):
        print(f"  persistent={kind!s:5s} {1e3 * seconds[kind] / steps:6.2f} ms a step")
    print(f"  persistent / state-copying: {seconds[True] / seconds[False]:.3f}x")


if __name__ == "__main__":
    main()
