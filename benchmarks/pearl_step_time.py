"""PEARL's gradient step: steps per second at oyster's settings and at smaller ones, 1 and 2 threads.

One step is oyster's ``_take_step``: the encoder on a context batch, twin Q, V and the
actor on ``tasks-per-update x sac-batch-size`` transitions (PEARL.take_step, the code
training runs). Replays are filled with random transitions of HalfCheetahVel's sizes
(20 observations, 6 actions), so only the arithmetic is timed. Settings are interleaved
and repeated; the machine may be shared, so the CPU time per step (thread-summed) is
printed beside the wall time.

    python benchmarks/pearl_step_time.py                # oyster's and the reduced settings
    python benchmarks/pearl_step_time.py --steps 20 --repeats 3
"""

from __future__ import annotations

import argparse
import time

import torch

from maml_rl.data.transitions import Transitions
from maml_rl.metalearners.pearl import PEARL, PEARLPolicy

SETTINGS = {  # name -> (hidden, tasks per update, sac batch, context batch)
    "oyster (3x300, 16x256, ctx 100)": ((300, 300, 300), 16, 256, 100),
    "reduced (3x300, 8x128, ctx 64)": ((300, 300, 300), 8, 128, 64),
    "small (2x128, 8x128, ctx 64)": ((128, 128), 8, 128, 64),
}


def make_learner(hidden, tasks, batch, context, obs=20, act=6, num_tasks=16):
    torch.manual_seed(0)
    policy = PEARLPolicy(obs, act, 5, hidden, (200, 200, 200))
    learner = PEARL(policy, num_train_tasks=num_tasks, tasks_per_update=tasks, sac_batch_size=batch,
                    embedding_batch_size=context, hidden_sizes=hidden, replay_capacity=4096, num_iterations=1)
    from maml_rl.data.replay import MultiTaskReplay

    learner.replay = MultiTaskReplay(num_tasks, 4096, (obs,), (act,))
    learner.encoder_replay = MultiTaskReplay(num_tasks, 4096, (obs,), (act,))
    for i in range(num_tasks):
        n = 2048
        fake = Transitions(torch.randn(n, obs), torch.rand(n, act) * 2 - 1, torch.randn(n), torch.randn(n, obs),
                           torch.zeros(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool))
        learner.replay[i].add(fake)
        learner.encoder_replay[i].add(fake)
    return learner


def time_steps(learner, steps):
    indices = list(range(learner.tasks_per_update))
    learner.take_step(indices)  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        learner.take_step(indices)
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    learners = {name: make_learner(*s) for name, s in SETTINGS.items()}
    results = {(name, t): [] for name in SETTINGS for t in (1, 2)}
    for _ in range(args.repeats):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for name, learner in learners.items():
                results[(name, threads)].append(time_steps(learner, args.steps))
    print(f"{'setting':36s} threads  wall s/step  steps/s  CPU s/step")
    for (name, threads), values in results.items():
        wall = min(v[0] for v in values)
        cpu = min(v[1] for v in values)
        print(f"{name:36s} {threads:7d}  {wall:11.3f}  {1 / wall:7.2f}  {cpu:10.3f}")


if __name__ == "__main__":
    main()
