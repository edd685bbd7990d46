"""The Transformer trial policy's key/value cache: its step by trial position, and the sampler against the GRU.

    python benchmarks/trial_policy_step.py step --positions 10 100 1000 2000 --batch-sizes 1 20 --rounds 5
    python benchmarks/trial_policy_step.py sampler --tasks 4 --batch-size 5 --episodes-per-trial 3 \\
        --max-episode-steps 500 --num-workers 0 2 --rounds 3
    python benchmarks/trial_policy_step.py update --trials 10 --tokens 1500 --rounds 3

``step`` times ``TransformerPolicy.step`` (the call the sampler makes for a task's rows, under
``torch.no_grad`` and the sampler's torch settings) on one token per row at each trial position, the cache
already holding the earlier positions (capacity as the sampler's doubling leaves it; its contents random: the
arithmetic does not depend on them). A round times every position, in a rotating order, ``--calls`` calls
each, and takes the median call; the script reports, per batch size, the median over rounds of the per-round
ratio against the first position, with its [min, max].

``update`` times the update's one pass over whole trials (``forward_trials``, then the backward pass of the
log-probabilities' sum) with ``attention="math"`` (the explicit ``T x T`` scores) and ``"fused"`` (torch's
``scaled_dot_product_attention``), interleaved, and prints the ratio math/fused per round.

``sampler`` times ``MultiTaskSampler.rollout_trials`` end to end with RL²'s GRU policy and with the Transformer
at the same width (GRU: hidden layers ``--width`` x 2 and a state of ``--width``, as configs/rl2/2d-navigation.yaml;
Transformer: ``d_model`` ``--width``, as configs/transformer/2d-navigation.yaml), on the same tasks and seeds,
interleaved (the order alternates every round), and prints the env steps/s of each and the ratio
Transformer/GRU per round, then its median [min, max].

torch runs with one thread (the sampler's own setting for its policy calls); the machine is usually shared,
so compare ratios within a round, not rates across runs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from typing import Dict, List

import gymnasium as gym
import torch

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.policies import GRUPolicy, rl2_input_size
from maml_rl.policies.transformer import KVCache, TransformerPolicy
from maml_rl.samplers import MultiTaskSampler
from maml_rl.samplers.rollout.torch_settings import rollout_torch_settings


def _capacity(tokens: int) -> int:
    """The cache's capacity after ``tokens`` steps of ``TransformerPolicy.step`` (16, then doubling)."""
    capacity = 16
    while capacity < tokens:
        capacity *= 2
    return capacity


def _summary(ratios: List[float]) -> str:
    return f"{statistics.median(ratios):5.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"


def step_benchmark(args: argparse.Namespace) -> None:
    policy = TransformerPolicy(args.input_size, args.action_size, d_model=args.width, num_layers=args.layers,
                               num_heads=args.heads)
    policy.eval()
    head_size = args.width // args.heads
    positions = list(args.positions)
    print(f"TransformerPolicy.step: d_model {args.width}, {args.layers} layers, {args.heads} heads, input "
          f"{args.input_size}, {args.calls} calls a position a round, {args.rounds} rounds; median us per call")
    for n in args.batch_sizes:
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn((n, args.input_size), generator=generator)
        states = {}
        for p in positions:
            shape = (n, args.heads, _capacity(p + 1), head_size)
            states[p] = KVCache(tuple(torch.randn(shape, generator=generator) for _ in range(args.layers)),
                                tuple(torch.randn(shape, generator=generator) for _ in range(args.layers)),
                                torch.full((n,), p, dtype=torch.int64))
        times: Dict[int, List[float]] = {p: [] for p in positions}
        with torch.no_grad(), rollout_torch_settings():
            for p in positions:  # warm-up
                for _ in range(3):
                    policy.step(inputs, states[p])
            for r in range(args.rounds):
                for p in positions[r % len(positions):] + positions[:r % len(positions)]:
                    calls = []
                    for _ in range(args.calls):
                        # The step writes its token at the row's position, so the state can be reused as is.
                        started = time.perf_counter()
                        policy.step(inputs, states[p])
                        calls.append(time.perf_counter() - started)
                    times[p].append(statistics.median(calls) * 1e6)
        base = positions[0]
        print(f"  batch {n}:")
        for p in positions:
            ratios = [t / b for t, b in zip(times[p], times[base])]
            print(f"    position {p:5d}: {statistics.median(times[p]):8.0f} us   x pos{base}: {_summary(ratios)}"
                  f"   rounds: {' '.join(f'{t:.0f}' for t in times[p])}")


def sampler_benchmark(args: argparse.Namespace) -> None:
    kwargs = {"max_episode_steps": args.max_episode_steps}
    env = gym.make(args.env, **kwargs)
    obs, act = int(env.observation_space.shape[0]), int(env.action_space.shape[0])
    env.close()
    width = rl2_input_size(obs, act)
    torch.manual_seed(0)
    policies = {
        "gru": GRUPolicy(width, act, (args.width, args.width), args.width),
        "transformer": TransformerPolicy(width, act, d_model=args.width, num_layers=args.layers,
                                         num_heads=args.heads),
    }
    N = args.episodes_per_trial
    print(f"{args.env} (max_episode_steps {args.max_episode_steps}): {args.tasks} tasks x {args.batch_size} trials "
          f"({args.tasks * args.batch_size} slots) x {N} episodes; GRU (hidden {args.width}x2, state {args.width}) "
          f"vs Transformer (d_model {args.width}, {args.layers} layers, {args.heads} heads); {args.rounds} rounds")
    for workers in args.num_workers:
        samplers = {name: MultiTaskSampler(args.env, kwargs, args.batch_size, policy, seed=1, num_workers=workers)
                    for name, policy in policies.items()}
        rates: Dict[str, List[float]] = {name: [] for name in samplers}
        try:
            tasks = samplers["gru"].sample_tasks(args.tasks)
            for sampler in samplers.values():  # warm-up (one episode): workers started, pools built
                sampler.rollout_trials(tasks, 1)
            names = list(samplers)
            for r in range(args.rounds):
                for name in (names if r % 2 == 0 else names[::-1]):
                    started = time.perf_counter()
                    batches = samplers[name].rollout_trials(tasks, N)
                    elapsed = time.perf_counter() - started
                    rates[name].append(sum(int(b.lengths.sum()) for b in batches) / elapsed)
        finally:
            for sampler in samplers.values():
                sampler.close()
        ratios = [t / g for t, g in zip(rates["transformer"], rates["gru"])]
        print(f"  num_workers={workers}:")
        for name, values in rates.items():
            print(f"    {name:12s} {statistics.median(values):9.0f} env steps/s (median)   rounds: "
                  f"{' '.join(f'{v:.0f}' for v in values)}")
        print(f"    transformer/gru per round: {' '.join(f'{x:.2f}' for x in ratios)}   median {_summary(ratios)}")


def update_benchmark(args: argparse.Namespace) -> None:
    policies = {}
    for attention in ("math", "fused"):
        torch.manual_seed(0)
        policies[attention] = TransformerPolicy(args.input_size, args.action_size, d_model=args.width,
                                                num_layers=args.layers, num_heads=args.heads, attention=attention)
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn((args.tokens, args.trials, args.input_size), generator=generator)
    actions = torch.randn((args.tokens, args.trials, args.action_size), generator=generator)
    print(f"TransformerPolicy.forward_trials and its backward pass: {args.trials} trials of {args.tokens} tokens, "
          f"d_model {args.width}, {args.layers} layers, {args.heads} heads; {args.rounds} rounds; seconds a pass")
    times: Dict[str, List[float]] = {name: [] for name in policies}
    names = list(policies)
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            policy = policies[name]
            started = time.perf_counter()
            policy.forward_trials(inputs)[0].log_prob(actions).sum().backward()
            times[name].append(time.perf_counter() - started)
            policy.zero_grad(set_to_none=True)
    for name, values in times.items():
        print(f"    {name:6s} {statistics.median(values):7.3f} s (median)   rounds: {' '.join(f'{v:.3f}' for v in values)}")
    ratios = [m / f for m, f in zip(times["math"], times["fused"])]
    print(f"    math/fused per round: {' '.join(f'{x:.2f}' for x in ratios)}   median {_summary(ratios)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=64, help="d_model, and the GRU's hidden and state size")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parts = parser.add_subparsers(dest="part", required=True)
    step = parts.add_parser("step", help="TransformerPolicy.step by trial position")
    step.add_argument("--positions", type=int, nargs="+", default=[10, 100, 1000, 2000])
    step.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 20])
    step.add_argument("--calls", type=int, default=200, help="calls a position a round")
    step.add_argument("--input-size", type=int, default=rl2_input_size(2, 2), help="default: 2D navigation's")
    step.add_argument("--action-size", type=int, default=2)
    sampler = parts.add_parser("sampler", help="rollout_trials steps/s, Transformer against GRU")
    sampler.add_argument("--env", default="SparsePointRobot-v0")
    sampler.add_argument("--max-episode-steps", type=int, default=500)
    sampler.add_argument("--tasks", type=int, default=4)
    sampler.add_argument("--batch-size", type=int, default=5, help="trials (slots) per task")
    sampler.add_argument("--episodes-per-trial", type=int, default=3)
    sampler.add_argument("--num-workers", type=int, nargs="+", default=[0, 2])
    update = parts.add_parser("update", help="the update's pass over whole trials, attention math against fused")
    update.add_argument("--trials", type=int, default=10, help="trials in the pass (a minibatch)")
    update.add_argument("--tokens", type=int, default=1500)
    update.add_argument("--input-size", type=int, default=rl2_input_size(39, 4), help="default: Meta-World's")
    update.add_argument("--action-size", type=int, default=4)
    args = parser.parse_args()
    if args.width % args.heads or args.width % 2:
        parser.error(f"--width ({args.width}) must be even and a multiple of --heads ({args.heads})")
    torch.set_num_threads(1)
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
          f"torch {torch.__version__}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    print(f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    {"step": step_benchmark, "sampler": sampler_benchmark, "update": update_benchmark}[args.part](args)


if __name__ == "__main__":
    main()
