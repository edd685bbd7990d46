"""PEARL's gradient step: steps per second at oyster's settings and at smaller ones, 1 and 2 threads.

One step is oyster's ``_take_step``: the encoder on a context batch, twin Q, V and the
actor on ``tasks-per-update x sac-batch-size`` transitions (PEARL.take_step, the code
training runs). Replays are filled with random transitions of HalfCheetahVel's sizes
(20 observations, 6 actions), so only the arithmetic is timed. Settings are interleaved
and repeated; the machine may be shared, so the CPU time per step (thread-summed) is
printed beside the wall time.

``--profile`` adds where one step's time goes (torch.profiler's operators by self CPU
time, at the setting of docs/results.md's runs); ``--collection`` adds the other half
of an iteration, env steps per second of ``rollout_transitions`` on HalfCheetahVel with
a z per slot (PEARL's collection), in this process and with 2 workers.

    python benchmarks/pearl_step_time.py                # oyster's and the reduced settings
    python benchmarks/pearl_step_time.py --steps 20 --repeats 3
    python benchmarks/pearl_step_time.py --profile --collection
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
    "results.md's runs (3x128, 8x128, ctx 100)": ((128, 128, 128), 8, 128, 100),
}
PROFILED = "results.md's runs (3x128, 8x128, ctx 100)"


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


def profile_step(learner, steps: int = 5, rows: int = 12) -> None:
    """torch.profiler's operators of ``steps`` gradient steps, by self CPU time, one thread."""
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    indices = list(range(learner.tasks_per_update))
    learner.take_step(indices)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            learner.take_step(indices)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    print(f"\nwhere a gradient step goes ({PROFILED}, 1 thread, {steps} steps; self CPU time):")
    for e in sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:rows]:
        print(f"  {e.key:40s} {100 * e.self_cpu_time_total / total:5.1f}%  {e.count // steps:5d} calls/step")


def collection_rate(num_workers: int, hidden, slots: int = 5, calls: int = 4) -> float:
    """Env steps per second of PEARL's collection: ``rollout_transitions`` of ``slots`` HalfCheetahVel tasks
    (100-step episodes), a z per slot, the actor of ``hidden`` layers."""
    from maml_rl.samplers import MultiTaskSampler

    torch.manual_seed(0)
    policy = PEARLPolicy(20, 6, 5, hidden, (200, 200, 200))
    kwargs = {"low": 0.0, "high": 2.0, "normalization_scale": 1.0, "max_episode_steps": 100}
    with MultiTaskSampler("HalfCheetahVel-v5", kwargs, 1, policy, seed=1, num_workers=num_workers,
                          conditioning_size=5) as sampler:
        tasks = sampler.sample_tasks(slots)
        z = torch.randn(slots, 1, 5)
        sampler.rollout_transitions(tasks, conditioning=z)  # warm-up (pool start)
        start, steps = time.perf_counter(), 0
        for _ in range(calls):
            steps += sum(len(t) for t in sampler.rollout_transitions(tasks, conditioning=z))
        return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="also where one step's time goes")
    parser.add_argument("--collection", action="store_true", help="also env steps/s of PEARL's collection")
    args = parser.parse_args()
    learners = {name: make_learner(*s) for name, s in SETTINGS.items()}
    results = {(name, t): [] for name in SETTINGS for t in (1, 2)}
    for _ in range(args.repeats):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for name, learner in learners.items():
                results[(name, threads)].append(time_steps(learner, args.steps))
    print(f"{'setting':42s} threads  wall s/step  steps/s  CPU s/step")
    for (name, threads), values in results.items():
        wall = min(v[0] for v in values)
        cpu = min(v[1] for v in values)
        print(f"{name:42s} {threads:7d}  {wall:11.3f}  {1 / wall:7.2f}  {cpu:10.3f}")
    if args.profile:
        profile_step(learners[PROFILED])
    if args.collection:
        print("\ncollection (rollout_transitions, HalfCheetahVel, 5 tasks x 1 slot, a z per slot, 100-step episodes):")
        for hidden in ((128, 128, 128), (300, 300, 300)):
            for workers in (0, 2):
                rates = [collection_rate(workers, hidden) for _ in range(args.repeats)]
                print(f"  actor {'x'.join(map(str, hidden)):11s} num_workers={workers}: {max(rates):8,.0f} env steps/s")


if __name__ == "__main__":
    main()
