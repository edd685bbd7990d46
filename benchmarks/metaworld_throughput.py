"""Env-steps/s of Meta-World ML10 through MultiTaskSampler against gymnasium's vector envs.

Every contender steps the same N = ``--tasks`` x ``--batch-size`` Meta-World
envs, each set to one of the same ML10 train goals (several task classes),
for ``--horizon`` steps (Meta-World's 500 by default) from a reset,
evaluating the same policy (``NormalMLPPolicy(39, 4, (100, 100))``, as the
configs, under ``torch.no_grad``) on all N observations at every step and
recording observations, actions and rewards:

* ``sampler``: ``MultiTaskSampler.sample(tasks, num_steps=0)`` end to end
  (reset_task, reset, rollout, episodes with success, advantages) with
  ``--workers`` ChildEnv processes; ``sampler-partial`` the same in partial
  mode; ``in-process`` with ``num_workers=0``.
* ``sync``: gymnasium ``SyncVectorEnv`` of the N Meta-World envs (Meta-World's
  own classes with ``set_task``, in a ``TimeLimit``), one process.
* ``async``: gymnasium ``AsyncVectorEnv(shared_memory=True)`` of the same,
  one process per env, started with fork.

The tasks stay the same in every round, so no slot switches class (the
sampler pays for switching in real training, the peers would too). The
machine is shared: contenders run interleaved (the order rotates every
round); the script prints the median steps/s of each and, per pair, the
median of the per-round ratios with its range.

Usage::

    python benchmarks/metaworld_throughput.py              # 10 tasks x 2 episodes, horizon 500, 3 rounds
    python benchmarks/metaworld_throughput.py --quick      # smoke check
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
import statistics
import sys
import time

import gymnasium as gym
import numpy as np
import torch

import maml_rl.envs  # noqa: F401  (registers the envs)
from maml_rl.baseline import LinearFeatureBaseline
from maml_rl.envs.metaworld import _metaworld_task, benchmark_tasks
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler

OBS, ACT, HIDDEN = 39, 4, (100, 100)


def make_policy() -> NormalMLPPolicy:
    torch.manual_seed(0)
    return NormalMLPPolicy(OBS, ACT, hidden_sizes=HIDDEN)


def metaworld_env(env_name: str, rand_vec: np.ndarray, horizon: int) -> gym.Env:
    """A Meta-World env as its users build one: the class, ``set_task``, a ``TimeLimit``."""
    import metaworld.env_dict

    env = metaworld.env_dict.ALL_V3_ENVIRONMENTS[env_name]()
    env.set_task(_metaworld_task(env_name, rand_vec))
    return gym.wrappers.TimeLimit(env, max_episode_steps=horizon)


class SamplerContender:
    def __init__(self, key, tasks, batch_size, horizon, **kwargs):
        self.key, self.tasks = key, tasks
        self.sampler = MultiTaskSampler("MetaWorld-ML10-v3", {"max_episode_steps": horizon}, batch_size, make_policy(),
                                        LinearFeatureBaseline(OBS), seed=1, **kwargs)

    def run(self):
        start = time.perf_counter()
        _, episodes = self.sampler.sample(self.tasks, num_steps=0)
        return time.perf_counter() - start, sum(int(batch.lengths.sum()) for batch in episodes)

    def close(self):
        self.sampler.close()


class VectorContender:
    def __init__(self, key, tasks, batch_size, horizon):
        self.key, self.horizon = key, horizon
        fns = [functools.partial(metaworld_env, t["env_name"], t["rand_vec"], horizon)
               for t in tasks for _ in range(batch_size)]
        self.n = len(fns)
        self.env = (gym.vector.SyncVectorEnv(fns) if key == "sync"
                    else gym.vector.AsyncVectorEnv(fns, shared_memory=True, context="fork"))
        self.policy = make_policy()
        self.generator = torch.Generator().manual_seed(0)
        self.observations = np.zeros((horizon + 1, self.n, OBS), np.float32)
        self.actions = np.zeros((horizon, self.n, ACT), np.float32)
        self.rewards = np.zeros((horizon, self.n), np.float32)

    @torch.no_grad()
    def run(self):
        start = time.perf_counter()
        noise = torch.randn((self.horizon, self.n, ACT), generator=self.generator)
        self.observations[0] = self.env.reset(seed=0)[0]
        for t in range(self.horizon):
            base = self.policy(torch.from_numpy(self.observations[t])).base_dist
            actions = (base.loc + base.scale * noise[t]).numpy()
            self.actions[t] = actions
            observation, reward, _, _, _ = self.env.step(actions)
            self.observations[t + 1] = observation
            self.rewards[t] = reward
        return time.perf_counter() - start, self.n * self.horizon

    def close(self):
        self.env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--horizon", type=int, default=500)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5 tasks x 2, horizon 50, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.horizon, args.rounds = 5, 50, 2
    torch.set_num_threads(1)  # as the sampler does during a rollout

    train = benchmark_tasks("ML10", None, 0)["train"]
    # Every class in turn: task k is goal k // 10 of class k % 10.
    per_class = {}
    for name, rand_vec in train:
        per_class.setdefault(name, []).append(rand_vec)
    names = list(per_class)
    tasks = [{"benchmark": "ML10", "split": "train", "env_name": names[k % len(names)], "index": -1,
              "rand_vec": per_class[names[k % len(names)]][k // len(names)]} for k in range(args.tasks)]
    n = args.tasks * args.batch_size
    print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}, {platform.node()}, {os.cpu_count()} CPUs "
          f"({len(os.sched_getaffinity(0))} usable), python {platform.python_version()}, torch {torch.__version__}")
    import importlib.metadata

    import mujoco

    print(f"# Meta-World {importlib.metadata.version('metaworld')}, MuJoCo {mujoco.__version__}; "
          f"ML10 train goals of {len({t['env_name'] for t in tasks})} classes; N = {args.tasks} tasks x "
          f"{args.batch_size} = {n} envs, horizon {args.horizon}, {args.workers} sampler workers")
    print(f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")

    contenders = [
        SamplerContender("sampler", tasks, args.batch_size, args.horizon, num_workers=args.workers),
        SamplerContender("sampler-partial", tasks, args.batch_size, args.horizon, num_workers=args.workers, partial=True),
        SamplerContender("in-process", tasks, args.batch_size, args.horizon, num_workers=0),
        VectorContender("sync", tasks, args.batch_size, args.horizon),
        VectorContender("async", tasks, args.batch_size, args.horizon),
    ]
    rates = {c.key: [] for c in contenders}
    try:
        for c in contenders:
            c.run()  # warm-up: pools started, first resets done
        for r in range(args.rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for c in order:
                seconds, steps = c.run()
                rates[c.key].append(steps / seconds)
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items()),
                  flush=True)
    finally:
        for c in contenders:
            c.close()
    print("\ncontender        median env steps/s")
    for key, values in rates.items():
        print(f"{key:16s} {statistics.median(values):12,.0f}")
    print("\nratio (median of per-round ratios [min, max])")
    for mine in ("sampler", "sampler-partial", "in-process"):
        for peer in ("sync", "async"):
            ratios = [a / b for a, b in zip(rates[mine], rates[peer])]
            print(f"{mine:16s} / {peer:5s}  {statistics.median(ratios):5.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]")


if __name__ == "__main__":
    main()
