"""Env-steps/s of MultiTaskVectorEnv against gymnasium's SyncVectorEnv and AsyncVectorEnv (and envpool).

The caller owns the loop, as CleanRL does: at every step it computes the actions of all N
envs from their observations with a small MLP (obs -> 64 -> 64 -> act, tanh, torch on one
thread, under ``torch.no_grad``) and calls ``envs.step(actions)``. Contenders, each over N
HalfCheetahVel-v5 envs (one task per env, autoreset ``NEXT_STEP``, episodes of 200 steps):

* ``MultiTaskVectorEnv(num_workers=0, batch_threads=--workers)``: every env in this process, one
  ``mujoco.batch`` call a step on ``--workers`` threads (the default layout where MuJoCo >= 4);
* ``MultiTaskVectorEnv(num_workers=--workers)``: the sampler's ChildEnv processes, on the MuJoCo fast
  path (one ``mujoco.batch`` call per worker per step) and, with ``mujoco_batch=False``, stepping its
  envs one at a time;
* gymnasium ``SyncVectorEnv`` (this process);
* gymnasium ``AsyncVectorEnv(shared_memory=True)``: one process per env, started with fork;
  left out above ``--async-max-envs`` envs (one MuJoCo process per env on a few cores);
* with ``--metaworld``, the same three on Meta-World ML10's 20 test envs built as metaworld-algorithms
  builds them (Meta-World's ``make_vec``, ``SAME_STEP``; its SyncVectorEnv, and the others over its env
  functions);
* with ``--ml1 NAME``, on ``--ml1-envs`` envs of our ``MetaWorld-ML1-NAME`` (one goal per env, episodes of 500
  steps): ``MultiTaskVectorEnv`` in its default layout (each class's envs stepped together in this process),
  with ``mujoco_batch=False`` (one env at a time) in this process and in ``--workers`` workers, and with
  ``--workers`` workers each stepping its envs together; and ``SyncVectorEnv`` and ``AsyncVectorEnv``;
* with ``--ml10 PER_CLASS``, the same over ``MetaWorld-ML10-v3``'s train mix, PER_CLASS envs of each class
  (env k a goal of class k % 10); the default layout there is a worker per CPU, each stepping its envs of a
  class together where it holds at least 3 of them;
* envpool's ``HalfCheetah-v5`` (``num_threads=--workers``, synchronous), if envpool is
  installed: gymnasium's model without the task's reward (so not the same env), and shorter
  observations, zero-padded for the MLP.

Start-up is excluded. The contenders run interleaved, the order rotating every round, and the
script prints per N the median steps/s of each and, per contender, the median (and range) of
its per-round ratio to ``SyncVectorEnv`` (and to envpool, when it runs): the machine is usually shared, so the ratios from
one interleaved run mean more than the absolute numbers. It also prints the CPU time per env
step of this process and the contender's workers (Linux): a contender whose wall time per step
is its CPU time per step over the number of workers was given the cores; one whose wall time
is its CPU time was given one core in all (the others busy with other work).

Usage::

    python benchmarks/vector_env_throughput.py                      # N = 16, 64, 256
    python benchmarks/vector_env_throughput.py --envs 16 --rounds 3 --steps 100
    python benchmarks/vector_env_throughput.py --envs --metaworld                # Meta-World ML10 only
    python benchmarks/vector_env_throughput.py --envs --ml1 push-v3 --ml1-envs 20  # Meta-World ML1 push only
    python benchmarks/vector_env_throughput.py --envs --ml10 10     # the ML10 train mix, 10 envs a class
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from maml_rl.envs import make_env  # noqa: E402
from maml_rl.samplers import MultiTaskVectorEnv  # noqa: E402

ENV_ID = "HalfCheetahVel-v5"


def mlp(obs_size: int, act_size: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(obs_size, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                               torch.nn.Tanh(), torch.nn.Linear(64, act_size), torch.nn.Tanh())


def cpu_seconds(pids: List[int]) -> float:
    """User + system CPU seconds of the processes ``pids`` (Linux ``/proc``; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


class WithTask:
    """An env factory that sets the env's task (for gymnasium's vector envs, which have no reset_tasks)."""

    def __init__(self, env_fn: Callable[[], gym.Env], task):
        self.env_fn, self.task = env_fn, task

    def __call__(self) -> gym.Env:
        env = self.env_fn()
        env.unwrapped.reset_task(self.task)
        return env


class Contender:
    """A vector env and how to drive it for ``steps`` steps; steps per second."""

    def __init__(self, name: str, envs, policy: torch.nn.Module, obs_size: int, seeded: bool = True):
        self.name, self.envs, self.policy, self.obs_size = name, envs, policy, obs_size
        self.seeded = seeded  # envpool takes its seed when made, not in reset

    def actions(self, observations: np.ndarray) -> np.ndarray:
        if observations.shape[1] < self.obs_size:  # envpool's shorter observations
            observations = np.pad(observations, ((0, 0), (0, self.obs_size - observations.shape[1])))
        with torch.no_grad():
            return self.policy(torch.as_tensor(observations, dtype=torch.float32)).numpy()

    def pids(self) -> List[int]:
        """This process and the contender's worker processes (for their CPU time)."""
        workers = getattr(self.envs, "worker_pids", None)
        if workers is None:
            workers = [p.pid for p in getattr(self.envs, "processes", [])]
        return [os.getpid(), *workers]

    def run(self, steps: int) -> tuple:
        """(env steps per second, CPU microseconds per env step over this process and the workers)."""
        observations, _ = self.envs.reset(seed=0) if self.seeded else self.envs.reset()
        pids = self.pids()
        cpu = cpu_seconds(pids)
        start = time.perf_counter()
        for _ in range(steps):
            observations = self.envs.step(self.actions(observations))[0]
        seconds = time.perf_counter() - start
        env_steps = steps * self.envs.num_envs
        return env_steps / seconds, 1e6 * (cpu_seconds(pids) - cpu) / env_steps

    def close(self) -> None:
        self.envs.close()


class BuiltPerRun(Contender):
    """A contender whose vector env exists only while it runs: envpool's, whose threads, alive, slowed the
    others (SyncVectorEnv at 16 envs ran at 0.82x beside an idle envpool pool in a separate check)."""

    def __init__(self, name: str, make, policy: torch.nn.Module, obs_size: int):
        super().__init__(name, None, policy, obs_size, seeded=False)
        self.make = make

    def run(self, steps: int) -> tuple:
        self.envs = self.make()
        try:
            return super().run(steps)
        finally:
            self.envs.close()
            self.envs = None

    def close(self) -> None:
        pass


def contenders(num_envs: int, workers: int, async_max_envs: int) -> List[Contender]:
    env_fn = make_env(ENV_ID)
    probe = env_fn()
    tasks = probe.unwrapped.sample_tasks(num_envs)
    obs_size, act_size = probe.observation_space.shape[0], probe.action_space.shape[0]
    probe.close()
    policy = mlp(obs_size, act_size)

    with_tasks = [WithTask(env_fn, task) for task in tasks]
    ours = MultiTaskVectorEnv([env_fn] * num_envs, num_workers=workers)
    ours.reset_tasks(tasks)
    per_env = MultiTaskVectorEnv([env_fn] * num_envs, num_workers=workers, mujoco_batch=False)
    per_env.reset_tasks(tasks)
    in_process = MultiTaskVectorEnv([env_fn] * num_envs, num_workers=0, batch_threads=workers)
    in_process.reset_tasks(tasks)
    path = "fast path" if ours.mujoco_batch else "no mujoco.batch"
    built = [Contender(f"MultiTaskVectorEnv(in process, {workers} threads)", in_process, policy, obs_size),
             Contender(f"MultiTaskVectorEnv({workers} workers, {path})", ours, policy, obs_size),
             Contender(f"MultiTaskVectorEnv({workers} workers, per env)", per_env, policy, obs_size),
             Contender("SyncVectorEnv", gym.vector.SyncVectorEnv(with_tasks), policy, obs_size)]
    if num_envs <= async_max_envs:
        envs = gym.vector.AsyncVectorEnv(with_tasks, shared_memory=True, context="fork")
        built.append(Contender("AsyncVectorEnv(shared_memory)", envs, policy, obs_size))
    else:
        print(f"  AsyncVectorEnv left out at {num_envs} envs (--async-max-envs {async_max_envs})")
    try:
        import envpool

        make = partial(envpool.make_gymnasium, "HalfCheetah-v5", num_envs=num_envs, batch_size=num_envs,
                       num_threads=workers, seed=0)
        built.append(BuiltPerRun(f"envpool({workers} threads, no tasks)", make, policy, obs_size))
    except ImportError:
        print("  envpool is not installed: its row is left out")
    return built


def metaworld_contenders(workers: int) -> List[Contender]:
    """Meta-World ML10's 20 test envs as metaworld-algorithms builds them (Meta-World's make_vec, SAME_STEP),
    and the other contenders over the same env functions."""
    import maml_rl.envs.metaworld  # noqa: F401  (its weld shim for MuJoCo >= 3.17, inherited by forked workers)
    import metaworld  # noqa: F401  (registers Meta-World's ids)

    sync = gym.make_vec("Meta-World/ML10-test", vector_strategy="sync", seed=1, meta_batch_size=20,
                        total_tasks_per_cls=40)
    env_fns, mode = sync.unwrapped.env_fns, sync.metadata["autoreset_mode"]
    obs_size, act_size = sync.single_observation_space.shape[0], sync.single_action_space.shape[0]
    policy = mlp(obs_size, act_size)
    ours = MultiTaskVectorEnv(env_fns, num_workers=workers, start_method="fork", autoreset_mode=mode)
    envs = gym.vector.AsyncVectorEnv(env_fns, shared_memory=True, context="fork", autoreset_mode=mode)
    for vector_env in (sync, ours, envs):
        vector_env.call("sample_tasks")  # a goal for each env, as metalearning_evaluation does first
    return [Contender(f"MultiTaskVectorEnv({workers} workers)", ours, policy, obs_size),
            Contender("SyncVectorEnv", sync, policy, obs_size),
            Contender("AsyncVectorEnv(shared_memory)", envs, policy, obs_size)]


def ml1_contenders(name: str, num_envs: int, workers: int, async_max_envs: int) -> List[Contender]:
    """``num_envs`` envs of ``MetaWorld-ML1-<name>``, one goal each, stepped by each of the module's contenders."""
    env_fn = make_env(f"MetaWorld-ML1-{name}")
    probe = MultiTaskVectorEnv([env_fn], num_workers=0)
    tasks = probe.sample_tasks(num_envs, seed=0)
    probe.close()
    return metaworld_id_contenders(env_fn, tasks, workers, async_max_envs)


def mix_contenders(per_class: int, workers: int, async_max_envs: int) -> List[Contender]:
    """``MetaWorld-ML10-v3``'s train mix, ``per_class`` envs of each of its 10 classes (env k a goal of class
    k % 10, as ``metaworld_throughput.py``'s mix), stepped by each of the module's contenders."""
    env_fn = make_env("MetaWorld-ML10-v3")
    probe = env_fn()
    goals = probe.unwrapped.all_tasks("train")
    probe.close()
    per_name: Dict[str, list] = {}
    for task in goals:
        per_name.setdefault(task["env_name"], []).append(task)
    names = list(per_name)
    tasks = [per_name[names[k % len(names)]][k // len(names)] for k in range(per_class * len(names))]
    return metaworld_id_contenders(env_fn, tasks, workers, async_max_envs)


def metaworld_id_contenders(env_fn, tasks: list, workers: int, async_max_envs: int) -> List[Contender]:
    """The contenders over one of our ``MetaWorld-*`` ids, env i on ``tasks[i]``."""
    num_envs = len(tasks)
    probe = env_fn()
    obs_size, act_size = probe.observation_space.shape[0], probe.action_space.shape[0]
    probe.close()
    policy = mlp(obs_size, act_size)
    built = []
    for label, kwargs in (("default layout", {}), ("in process, per env", {"num_workers": 0, "mujoco_batch": False}),
                          (f"{workers} workers, per env", {"num_workers": workers, "mujoco_batch": False}),
                          (f"{workers} workers, batched", {"num_workers": workers})):
        envs = MultiTaskVectorEnv([env_fn] * num_envs, start_method="fork", **kwargs)
        envs.reset_tasks(tasks)
        built.append(Contender(f"MultiTaskVectorEnv({label})", envs, policy, obs_size))
    with_tasks = [WithTask(env_fn, task) for task in tasks]
    built.append(Contender("SyncVectorEnv", gym.vector.SyncVectorEnv(with_tasks), policy, obs_size))
    if num_envs <= async_max_envs:
        envs = gym.vector.AsyncVectorEnv(with_tasks, shared_memory=True, context="fork")
        built.append(Contender("AsyncVectorEnv(shared_memory)", envs, policy, obs_size))
    else:
        print(f"  AsyncVectorEnv left out at {num_envs} envs (--async-max-envs {async_max_envs})")
    return built


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, nargs="*", default=[16, 64, 256], help="HalfCheetahVel env counts")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200, help="steps per contender per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--async-max-envs", type=int, default=64)
    parser.add_argument("--metaworld", action="store_true", help="also Meta-World ML10's 20 test envs")
    parser.add_argument("--ml1", metavar="NAME", help="also Meta-World ML1's NAME (push-v3, reach-v3, ...)")
    parser.add_argument("--ml1-envs", type=int, default=20, help="envs of --ml1")
    parser.add_argument("--ml10", type=int, default=0, metavar="PER_CLASS",
                        help="also Meta-World ML10's train mix, PER_CLASS envs of each of its 10 classes")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    configs = [(f"{ENV_ID}, {n} envs", partial(contenders, n, args.workers, args.async_max_envs)) for n in args.envs]
    if args.metaworld:
        configs.append(("Meta-World ML10 test, 20 envs", partial(metaworld_contenders, args.workers)))
    if args.ml1:
        configs.append((f"MetaWorld-ML1-{args.ml1}, {args.ml1_envs} envs",
                        partial(ml1_contenders, args.ml1, args.ml1_envs, args.workers, args.async_max_envs)))
    if args.ml10:
        configs.append((f"MetaWorld-ML10-v3 train mix, {args.ml10} envs a class",
                        partial(mix_contenders, args.ml10, args.workers, args.async_max_envs)))
    for title, build in configs:
        print(f"{title}, {args.steps} steps x {args.rounds} rounds")
        built = build()
        rates: Dict[str, List[float]] = {c.name: [] for c in built}
        cpu: Dict[str, List[float]] = {c.name: [] for c in built}
        try:
            for c in built:  # warm-up
                c.run(5)
            for r in range(args.rounds):
                for c in built[r % len(built):] + built[:r % len(built)]:
                    rate, cpu_per_step = c.run(args.steps)
                    rates[c.name].append(rate)
                    cpu[c.name].append(cpu_per_step)
        finally:
            for c in built:
                c.close()
        sync = rates["SyncVectorEnv"]
        envpool = next((values for name, values in rates.items() if name.startswith("envpool")), None)
        for name, values in rates.items():
            ratios = [v / s for v, s in zip(values, sync)]
            line = (f"  {name:44s} {statistics.median(values):9.0f} steps/s   x Sync {statistics.median(ratios):5.2f}"
                    f" [{min(ratios):.2f}, {max(ratios):.2f}]   CPU {statistics.median(cpu[name]):6.1f} us/step")
            if envpool is not None and not name.startswith("envpool"):
                ratios = [v / e for v, e in zip(values, envpool)]
                line += f"   x envpool {statistics.median(ratios):5.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"
            print(line)


if __name__ == "__main__":
    main()
