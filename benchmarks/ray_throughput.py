"""What going through Ray costs: the Ray backend against the local sampler, and the bytes it moves.

Starts a Ray cluster on this machine with ``ray.cluster_utils.Cluster``: a
head with no CPUs (the driver's) and ``--nodes`` nodes of ``--cpus-per-node``
CPUs, each its own raylet and object store. Then, interleaved (the order
rotates every round), ``MultiTaskSampler.sample(tasks, num_steps=0)`` of
``--tasks`` x ``--batch-size`` slots of HalfCheetahVel-v5 (horizon 200,
``NormalMLPPolicy(20, 6, (64, 64))``, advantages with a
``LinearFeatureBaseline``) on:

* ``ray``: the Ray backend, one sampling actor per node;
* ``local-workers``: the local sampler with as many ChildEnv processes as
  the nodes have CPUs in all (``num_workers``), the MuJoCo fast path in each;
* ``local-default``: the local sampler's default layout (this process, one
  ``mujoco.batch`` thread per CPU).

It reports the median env steps/s of each, the per-round ratios
ray/local (median and range), and what one rollout moves through Ray: the
bytes put into the object store (the parameters: put once, read by every
actor) and the bytes the actors return (the trajectories), for 1 .. N actors.
With ``--adapted`` the rollout runs under per-task parameters (the
second rollout of ``sample(num_steps=1)``), which adds K copies of the
parameters to the put.

Usage::

    python benchmarks/ray_throughput.py                 # 2 one-CPU nodes, 800 slots, 5 rounds
    python benchmarks/ray_throughput.py --quick         # smoke check
    python benchmarks/ray_throughput.py --nodes 4 --cpus-per-node 4 --tasks 80   # a bigger machine
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import statistics
import sys
import time

import torch

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler

ENV = "HalfCheetahVel-v5"


def make_sampler(batch_size: int, **kwargs) -> MultiTaskSampler:
    torch.manual_seed(0)
    policy = NormalMLPPolicy(20, 6, hidden_sizes=(64, 64))
    return MultiTaskSampler(ENV, {}, batch_size, policy, LinearFeatureBaseline(20), seed=1, **kwargs)


def timed(sampler: MultiTaskSampler, tasks, adapted: bool):
    params = None
    if adapted:
        own = {name: p.detach() for name, p in sampler.policy.named_parameters()}
        params = [{name: p + 1e-3 * k for name, p in own.items()} for k in range(len(tasks))]
    start = time.perf_counter()
    episodes = sampler.rollout(tasks, params)
    seconds = time.perf_counter() - start
    return sum(int(b.lengths.sum()) for b in episodes) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--cpus-per-node", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--adapted", action="store_true", help="per-task parameters in the timed rollouts")
    parser.add_argument("--quick", action="store_true", help="8 x 5 slots, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.batch_size, args.rounds = 8, 5, 2
    logging.basicConfig(level=logging.WARNING)

    import ray
    from ray.cluster_utils import Cluster

    print(f"# {datetime.datetime.now().isoformat(timespec='seconds')}  {' '.join(sys.argv)}")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, ray {ray.__version__}, "
          f"torch {torch.__version__}")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(args.nodes):
        cluster.add_node(num_cpus=args.cpus_per_node)
    ray.init(address=cluster.address, log_to_driver=False)
    cpus = args.nodes * args.cpus_per_node
    slots = args.tasks * args.batch_size
    print(f"# cluster: head (0 CPUs) + {args.nodes} node(s) x {args.cpus_per_node} CPU(s); "
          f"{args.tasks} tasks x {args.batch_size} episodes = {slots} slots of {ENV}, horizon 200, "
          f"{'per-task' if args.adapted else 'shared'} parameters")
    samplers = {
        "ray": make_sampler(args.batch_size, backend="ray"),
        "local-workers": make_sampler(args.batch_size, num_workers=cpus),
        "local-default": make_sampler(args.batch_size),
    }
    try:
        tasks = samplers["ray"].sample_tasks(args.tasks)
        for sampler in samplers.values():
            timed(sampler, tasks, args.adapted)  # start-up and warm-up, untimed
        rates = {key: [] for key in samplers}
        keys = list(samplers)
        for r in range(args.rounds):
            order = keys[r % len(keys):] + keys[:r % len(keys)]
            for key in order:
                rates[key].append(timed(samplers[key], tasks, args.adapted))
            print(f"  round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {rates[k][-1]:,.0f}" for k in order), flush=True)
        print("\nenv steps/s (median over rounds):")
        for key in keys:
            print(f"  {key:14s} {statistics.median(rates[key]):>10,.0f}")
        print("\nratios (median of per-round ratios [min, max]):")
        for other in ("local-workers", "local-default"):
            per_round = [a / b for a, b in zip(rates["ray"], rates[other])]
            print(f"  ray / {other:14s} {statistics.median(per_round):.2f}x "
                  f"[{min(per_round):.2f}, {max(per_round):.2f}]")
    finally:
        for sampler in samplers.values():
            sampler.close()

    print("\nbytes per rollout through Ray (one rollout each):")
    print(f"  {'actors':>6}  {'puts':>4}  {'put (params)':>14}  {'returned (trajectories)':>24}")
    for actors in range(1, args.nodes + 1):
        with make_sampler(args.batch_size, backend="ray", ray_actors=actors) as sampler:
            timed(sampler, tasks, args.adapted)
            stats = sampler.backend_stats
        print(f"  {actors:>6}  {stats['puts']:>4}  {stats['put_bytes']:>14,}  {stats['result_bytes']:>24,}")
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main()
