"""Meta-World's own ``metalearning_evaluation`` on MultiTaskVectorEnv and on AsyncVectorEnv: the same figures?

The test envs are built as metaworld-algorithms builds them (Meta-World 3.1.1's
``gym.make_vec("Meta-World/ML10-test", vector_strategy="async", seed=..., meta_batch_size=20,
total_tasks_per_cls=40)``: 20 envs, 4 per test class, ``SAME_STEP`` autoreset), and a
``MultiTaskVectorEnv`` over the very same env functions. One fixed agent (a seeded linear policy,
``tanh(obs @ W)``, no adaptation) is scored on each by ``metalearning_evaluation``; the script
prints both results (success, mean return, success per class), whether they are equal, and the
wall time of each. Both start their processes with fork (the Meta-World weld shim of
``maml_rl.envs.metaworld`` is then in every worker).

Usage::

    python benchmarks/metaworld_vector_evaluation.py                 # ML10, 1 round, 1 + 1 episodes
    python benchmarks/metaworld_vector_evaluation.py --num-evals 2 --adaptation-episodes 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import maml_rl.envs.metaworld  # noqa: E402,F401  (its weld shim for MuJoCo >= 3.17)
from maml_rl.samplers import MultiTaskVectorEnv  # noqa: E402

import metaworld  # noqa: E402,F401  (registers Meta-World's ids)
import metaworld.evaluation as mw_evaluation  # noqa: E402


class LinearAgent:
    """A fixed agent for Meta-World's ``MetaLearningAgent`` protocol: ``tanh(obs @ W)``, nothing adapted."""

    def __init__(self, obs_size: int, act_size: int, seed: int):
        self.weights = np.random.default_rng(seed).normal(scale=0.3, size=(obs_size, act_size))

    def init(self) -> None:
        pass

    def adapt_action(self, observations):
        return self.eval_action(observations), {}

    def step(self, timestep) -> None:
        pass

    def adapt(self) -> None:
        pass

    def eval_action(self, observations):
        return np.tanh(observations @ self.weights)

    def reset(self, env_mask) -> None:
        pass


def evaluate(envs, args) -> tuple:
    agent = LinearAgent(envs.single_observation_space.shape[0], envs.single_action_space.shape[0], args.seed)
    start = time.perf_counter()
    result = mw_evaluation.metalearning_evaluation(agent, envs, num_evals=args.num_evals,
                                                   adaptation_episodes=args.adaptation_episodes,
                                                   evaluation_episodes=args.evaluation_episodes)
    return result, time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", default="ML10")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--num-evals", type=int, default=1)
    parser.add_argument("--adaptation-episodes", type=int, default=1)
    parser.add_argument("--evaluation-episodes", type=int, default=1)
    args = parser.parse_args(argv)

    theirs = gym.make_vec(f"Meta-World/{args.benchmark}-test", vector_strategy="async", seed=args.seed,
                          meta_batch_size=20, total_tasks_per_cls=40, terminate_on_success=True)
    env_fns = theirs.unwrapped.env_fns
    try:
        (async_result, async_time) = evaluate(theirs, args)
    finally:
        theirs.close()
    ours = MultiTaskVectorEnv(env_fns, num_workers=args.workers, start_method="fork",
                              autoreset_mode=theirs.metadata["autoreset_mode"])
    try:
        (our_result, our_time) = evaluate(ours, args)
    finally:
        ours.close()

    print(f"Meta-World {args.benchmark} test, {len(env_fns)} envs, seed {args.seed}, {args.num_evals} round(s), "
          f"{args.adaptation_episodes} adaptation + {args.evaluation_episodes} evaluation episode(s)")
    for name, (success, mean_return, per_class), seconds in (
            ("AsyncVectorEnv", async_result, async_time),
            (f"MultiTaskVectorEnv({args.workers} workers)", our_result, our_time)):
        classes = ", ".join(f"{c} {v:.0%}" for c, v in sorted(per_class.items()))
        print(f"  {name:32s} success {success:.4f}, mean return {mean_return:.4f}, {seconds:.1f} s  ({classes})")
    same = async_result[:2] == our_result[:2] and dict(async_result[2]) == dict(our_result[2])
    print(f"  the same figures: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
