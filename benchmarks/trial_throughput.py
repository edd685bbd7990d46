"""Trial sampling with a GRU policy against feed-forward sampling on the same envs, interleaved.

    python benchmarks/trial_throughput.py --env 2DNavigation-v0 --tasks 20 --batch-size 10 --rounds 3

Each round samples the same number of env steps three ways, in turn: episodes of
an MLP policy (``rollout``), trials of N episodes of the MLP (``rollout_trials``)
and trials of RL²'s GRU policy. It prints env steps per second of each and the
ratios against the MLP episodes of the same round (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.policies import GRUPolicy, get_policy_for_env, rl2_input_size
from maml_rl.samplers import MultiTaskSampler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="2DNavigation-v0")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--episodes-per-trial", type=int, default=4)
    parser.add_argument("--max-episode-steps", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--num-workers", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    kwargs = {"max_episode_steps": args.max_episode_steps}
    torch.manual_seed(0)
    probe = MultiTaskSampler(args.env, kwargs, 1, get_policy_for_env(
        __import__("gymnasium").make(args.env, **kwargs), hidden_sizes=(args.hidden, args.hidden)), seed=0,
        num_workers=0)
    obs = int(probe.observation_space.shape[0])
    act = int(probe.action_space.shape[0])
    mlp = probe.policy
    probe.close()
    gru = GRUPolicy(rl2_input_size(obs, act), act, (args.hidden, args.hidden), args.hidden)
    N = args.episodes_per_trial
    options = {"num_workers": args.num_workers} if args.num_workers is not None else {}
    samplers = {
        "mlp episodes": MultiTaskSampler(args.env, kwargs, args.batch_size * N, mlp, seed=1, **options),
        "mlp trials": MultiTaskSampler(args.env, kwargs, args.batch_size, mlp, seed=1, **options),
        "gru trials": MultiTaskSampler(args.env, kwargs, args.batch_size, gru, seed=1, **options),
    }
    rates = {name: [] for name in samplers}
    try:
        tasks = samplers["mlp episodes"].sample_tasks(args.tasks)
        for name, sampler in samplers.items():  # warm-up: workers started, pools built
            sampler.rollout(tasks) if name == "mlp episodes" else sampler.rollout_trials(tasks, N)
        for _ in range(args.rounds):
            for name, sampler in samplers.items():
                started = time.perf_counter()
                batches = sampler.rollout(tasks) if name == "mlp episodes" else sampler.rollout_trials(tasks, N)
                elapsed = time.perf_counter() - started
                rates[name].append(sum(int(b.lengths.sum()) for b in batches) / elapsed)
    finally:
        for sampler in samplers.values():
            sampler.close()
    base = statistics.median(rates["mlp episodes"])
    print(f"{args.env}: {args.tasks} tasks x {args.batch_size} trials x {N} episodes "
          f"(MLP episodes: {args.batch_size * N} per task), {args.rounds} interleaved rounds, median")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"  {name:13s} {median:10.0f} env steps/s   x{median / base:.2f} of MLP episodes")


if __name__ == "__main__":
    main()
