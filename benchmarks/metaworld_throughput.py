"""Meta-World env steps per second and per CPU-second: the sampler's fast path against its peers.

Every contender steps the same N = ``--tasks`` x ``--batch-size`` Meta-World
envs (one class, or the ML10 or ML45 train mix, where task k is a goal of class k % 10 or k % 45)
for ``--horizon`` steps from a reset, and all but ``physics`` evaluate the same
MLP policy (39 -> 100 -> 100 -> 4, tanh, as the configs) on all N observations
at every step:

* ``sampler``: ``MultiTaskSampler.sample(tasks, num_steps=0)`` end to end with
  ``--workers`` processes, each stepping its slots of each batched class together
  (``metaworld_fast/batched``, one ``mujoco.batch`` thread a worker) and the others one
  env at a time through ``maml_rl.envs.metaworld_fast``;
* ``sampler-0``: the same in this process, ``mujoco.batch`` on ``--workers`` threads (as many as the others use);
* ``per-env``: the sampler with ``mujoco_batch=False``: every env stepped one at a time through
  ``maml_rl.envs.metaworld_fast`` (the sampler's path before the batched classes; "fast" in older runs);
* ``plain``: the sampler with ``fast=False``: Meta-World's own classes;
* ``sync``: gymnasium ``SyncVectorEnv`` of Meta-World's own envs (class,
  ``set_task``, ``TimeLimit``) in a separate process that never imports
  ``maml_rl`` (its only change to Meta-World is the weld fix MuJoCo >= 3.17
  needs, the same 11 numbers as ``maml_rl.envs.metaworld``'s shim);
* ``envpool``: envpool's native C++ port (``MetaWorld/<Class>-v3``), N envs on
  ``--workers`` threads, one pool per class (it draws goals itself, so the
  goals differ from the others');
* ``batched``: ``maml_rl.envs.metaworld_fast.batched.BatchedSawyer``, the N envs of each class stepped
  together (one ``mujoco.batch`` call a step on ``--workers`` threads, the outputs as arrays), with the
  policy, in this process, without the sampler; a class not batched (none of Meta-World's 50 today) steps one env
  at a time through the fast path;
* ``physics``: the ceiling, only MuJoCo's calls of a Meta-World step
  (``mj_step`` x frame_skip, ``mj_rnePostConstraint``, ``mj_forward``) on
  the same models, in one thread.

CPU time counts every process and thread of a contender (the sampler's
workers, envpool's threads). The machine is shared: contenders run
interleaved, the order rotating every round; the script prints the median of
each and, per pair, the median of the per-round ratios with its range.

Usage::

    python benchmarks/metaworld_throughput.py                      # reach, push, pick-place, ML10, ML45; 3 rounds
    python benchmarks/metaworld_throughput.py --scenarios ml10 --rounds 5
    python benchmarks/metaworld_throughput.py --quick              # smoke check
    python benchmarks/metaworld_throughput.py --scenarios ml10 --batch-size 10 --contenders sampler envpool physics
    python benchmarks/metaworld_throughput.py --scenarios ml45 --tasks 45 --batch-size 4 --contenders sampler per-env envpool
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.envs import make_env
from maml_rl.envs.metaworld import benchmark_tasks
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

OBS, ACT, HIDDEN = 39, 4, (100, 100)
CONTENDERS = ("sampler", "sampler-0", "per-env", "plain", "sync", "envpool", "batched", "physics")
SCENARIOS = {"reach": "reach-v3", "push": "push-v3", "pick-place": "pick-place-v3", "ml10": None, "ml45": None}
MIXES = {"ml10": "ML10", "ml45": "ML45"}  # the train classes' mix of a benchmark
_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and its live descendants (all their threads), from /proc."""
    parents, times = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
            times[int(entry)] = (int(fields[11]) + int(fields[12])) / _TICK
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += times.get(pid, 0.0)
        stack += [child for child, parent in parents.items() if parent == pid]
    return total


def make_policy() -> NormalMLPPolicy:
    torch.manual_seed(0)
    return NormalMLPPolicy(OBS, ACT, hidden_sizes=HIDDEN)


def scenario_tasks(scenario: str, n_tasks: int) -> list[dict]:
    name = SCENARIOS[scenario]
    if name is None:
        benchmark = MIXES[scenario]
        goals = benchmark_tasks(benchmark, None, 0)["train"]
        per_class: dict[str, list] = {}
        for env_name, rand_vec in goals:
            per_class.setdefault(env_name, []).append(rand_vec)
        names = list(per_class)
        picks = [(names[k % len(names)], per_class[names[k % len(names)]][k // len(names)]) for k in range(n_tasks)]
    else:
        picks = [(name, rand_vec) for _, rand_vec in benchmark_tasks("ML1", name, 0)["train"][:n_tasks]]
        benchmark = "ML1"
    return [{"benchmark": benchmark, "split": "train", "env_name": env_name, "index": -1, "rand_vec": rand_vec}
            for env_name, rand_vec in picks]


def env_id(scenario: str) -> str:
    name = SCENARIOS[scenario]
    return f"MetaWorld-{MIXES[scenario]}-v3" if name is None else f"MetaWorld-ML1-{name}"


class SamplerContender:
    def __init__(self, key, scenario, tasks, batch_size, horizon, workers, fast, mujoco_batch=None, threads=None):
        self.key, self.tasks = key, tasks
        env_fn = make_env(env_id(scenario), max_episode_steps=horizon, fast=fast)
        self.sampler = MultiTaskSampler(None, None, batch_size, make_policy(), LinearFeatureBaseline(OBS),
                                        env_fn=env_fn, seed=1, num_workers=workers, mujoco_batch=mujoco_batch,
                                        batch_threads=threads)

    def run(self):
        cpu, start = tree_cpu_seconds(os.getpid()), time.perf_counter()
        _, episodes = sample_adapt_sample(self.sampler, self.tasks, num_steps=0)
        wall = time.perf_counter() - start
        return wall, tree_cpu_seconds(os.getpid()) - cpu, sum(int(batch.lengths.sum()) for batch in episodes)

    def close(self):
        self.sampler.close()


# The peer's whole program: Meta-World, gymnasium and torch, nothing of maml_rl.
PRISTINE = r'''
import json, pickle, sys, time
import gymnasium as gym, mujoco, numpy as np, torch
import metaworld, metaworld.env_dict, metaworld.sawyer_xyz_env as sx
assert "maml_rl" not in sys.modules
if getattr(mujoco, "mjNEQDATA", 11) != 11:  # MuJoCo >= 3.17: 12 numbers per weld row, Meta-World writes 11
    def reset_mocap_welds(self):
        if self.model.nmocap > 0 and self.model.eq_data is not None:
            for i in range(self.model.eq_data.shape[0]):
                if self.model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
                    self.model.eq_data[i, :11] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0]
    sx.SawyerMocapBase.reset_mocap_welds = reset_mocap_welds
spec = json.loads(sys.stdin.readline())
torch.set_num_threads(1)

def make(name, rand_vec):
    def thunk():
        cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[name]
        env = cls()
        data = {"rand_vec": np.array(rand_vec), "env_cls": cls, "partially_observable": True}
        env.set_task(metaworld.Task(env_name=name, data=pickle.dumps(data)))
        return gym.wrappers.TimeLimit(env, max_episode_steps=spec["horizon"])
    return thunk

envs = gym.vector.SyncVectorEnv([make(n, r) for n, r in spec["envs"]])
torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(39, 100), torch.nn.Tanh(), torch.nn.Linear(100, 100), torch.nn.Tanh(),
                             torch.nn.Linear(100, 4))
generator = torch.Generator().manual_seed(0)
n, horizon = len(spec["envs"]), spec["horizon"]
print("ready", flush=True)
for line in sys.stdin:
    cpu, start = time.process_time(), time.perf_counter()
    observations = envs.reset(seed=0)[0]
    with torch.no_grad():
        for t in range(horizon):
            mean = policy(torch.as_tensor(observations, dtype=torch.float32))
            actions = (mean + torch.randn((n, 4), generator=generator)).numpy()
            observations, rewards, _, _, _ = envs.step(actions)
    print(json.dumps([time.perf_counter() - start, time.process_time() - cpu, n * horizon]), flush=True)
'''


class SyncContender:
    def __init__(self, key, scenario, tasks, batch_size, horizon, workers):
        self.key = key
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen([sys.executable, "-c", PRISTINE], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, cwd="/")
        spec = {"horizon": horizon, "envs": [(t["env_name"], t["rand_vec"].tolist()) for t in tasks
                                             for _ in range(batch_size)]}
        self.process.stdin.write(json.dumps(spec) + "\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the pristine Meta-World process did not start")

    def run(self):
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        return tuple(json.loads(self.process.stdout.readline()))

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


def envpool_name(name: str) -> str:
    return "MetaWorld/" + "".join(part.capitalize() for part in name[:-3].split("-")) + "-v3"


class EnvpoolContender:
    """One envpool per class, stepped one after another, each on ``workers`` threads."""

    def __init__(self, key, scenario, tasks, batch_size, horizon, workers):
        import envpool

        self.key, self.horizon = key, horizon
        counts: dict[str, int] = {}
        for t in tasks:
            counts[t["env_name"]] = counts.get(t["env_name"], 0) + batch_size
        self.pools = [envpool.make(envpool_name(name), env_type="gymnasium", num_envs=count,
                                   num_threads=min(workers, count), seed=0, max_episode_steps=horizon)
                      for name, count in counts.items()]
        self.n = sum(counts.values())
        self.policy = make_policy()
        self.generator = torch.Generator().manual_seed(0)

    @torch.no_grad()
    def run(self):
        cpu, start = time.process_time(), time.perf_counter()
        observations = [pool.reset()[0] for pool in self.pools]
        for _ in range(self.horizon):
            batch = torch.as_tensor(np.concatenate(observations), dtype=torch.float32)
            actions = self.policy(batch).sample().numpy()
            offset = 0
            for k, pool in enumerate(self.pools):
                count = len(observations[k])
                observations[k] = pool.step(actions[offset:offset + count])[0]
                offset += count
        return time.perf_counter() - start, time.process_time() - cpu, self.n * self.horizon

    def close(self):
        for pool in self.pools:
            pool.close()


class BatchedContender:
    """The envs of each batched class in one ``BatchedSawyer`` (its physics on ``workers`` threads), those of
    the other classes stepped one by one through the fast path, and the policy, in this process."""

    class _PerEnv:
        """Envs of a class not batched, with a ``BatchedSawyer``'s calls."""

        def __init__(self, envs):
            self.envs = envs

        def sync(self, i):
            pass

        load = sync

        def step(self, actions):
            return (np.stack([env.step(action)[0] for env, action in zip(self.envs, actions)]),)

    def __init__(self, key, scenario, tasks, batch_size, horizon, workers):
        from maml_rl.envs.metaworld import MetaWorldEnv
        from maml_rl.envs.metaworld_fast.batched import BatchedSawyer, batched_spec

        self.key, self.horizon = key, horizon
        by_class: dict[str, list] = {}
        for t in tasks:
            for _ in range(batch_size):
                env = MetaWorldEnv(t["benchmark"], t["env_name"] if t["benchmark"] == "ML1" else None, fast=True)
                env.reset_task(t)
                env.reset()
                by_class.setdefault(t["env_name"], []).append(env._env)
        self.batches = [BatchedSawyer(envs, nthread=workers) if batched_spec(envs[0]) else self._PerEnv(envs)
                        for envs in by_class.values()]
        self.n = sum(len(b.envs) for b in self.batches)
        self.policy = make_policy()

    @torch.no_grad()
    def run(self):
        cpu, start = time.process_time(), time.perf_counter()
        observations = []
        for batch in self.batches:
            for i, env in enumerate(batch.envs):
                batch.sync(i)
                observations.append(env.reset()[0])
                batch.load(i)
        observations = np.stack(observations)
        for _ in range(self.horizon):
            actions = self.policy(torch.as_tensor(observations, dtype=torch.float32)).sample().numpy()
            offset, parts = 0, []
            for batch in self.batches:
                count = len(batch.envs)
                parts.append(batch.step(actions[offset:offset + count])[0])
                offset += count
            observations = np.concatenate(parts)
        return time.perf_counter() - start, time.process_time() - cpu, self.n * self.horizon

    def close(self):
        pass


def any_batched(tasks) -> bool:
    """Whether a class of ``tasks`` is batched (``BatchedSawyer``) and mujoco.batch is here."""
    import metaworld.env_dict

    from maml_rl.envs.metaworld_fast.batched import SPECS, mujoco_batch

    names = {metaworld.env_dict.ALL_V3_ENVIRONMENTS[t["env_name"]].__name__ for t in tasks}
    return mujoco_batch is not None and bool(names & set(SPECS))


class PhysicsContender:
    """Only MuJoCo's calls of a Meta-World step, on the envs' own models and data (one thread)."""

    def __init__(self, key, scenario, tasks, batch_size, horizon, workers):
        import mujoco

        from maml_rl.envs.metaworld import MetaWorldEnv

        self.key, self.horizon, self.mujoco = key, horizon, mujoco
        self.envs = []
        for t in tasks:
            for _ in range(batch_size):
                env = MetaWorldEnv(t["benchmark"], t["env_name"] if t["benchmark"] == "ML1" else None, fast=False)
                env.reset_task(t)
                env.reset()
                self.envs.append(env._env)
        self.actions = np.random.default_rng(0).uniform(-1, 1, (horizon, len(self.envs), 4))

    def run(self):
        mj = self.mujoco
        for env in self.envs:
            env.reset()
        cpu, start = time.process_time(), time.perf_counter()
        for t in range(self.horizon):
            for k, env in enumerate(self.envs):
                action = self.actions[t, k]  # moves the hand as Meta-World's set_xyz_action does
                env.data.mocap_pos[0] = np.clip(env.data.mocap_pos[0] + 0.01 * action[:3], env.mocap_low,
                                                env.mocap_high)
                env.data.ctrl[:] = (action[3], -action[3])
                mj.mj_step(env.model, env.data, nstep=env.frame_skip)
                mj.mj_rnePostConstraint(env.model, env.data)
                mj.mj_forward(env.model, env.data)
        return time.perf_counter() - start, time.process_time() - cpu, len(self.envs) * self.horizon

    def close(self):
        pass


def run_scenario(scenario: str, args) -> dict[str, dict[str, list[float]]]:
    tasks = scenario_tasks(scenario, args.tasks)
    n = args.tasks * args.batch_size
    classes = sorted({t["env_name"] for t in tasks})
    print(f"\n## {scenario}: {len(classes)} class(es), N = {args.tasks} tasks x {args.batch_size} = {n} envs, "
          f"horizon {args.horizon}, {args.workers} workers/threads", flush=True)
    common = (scenario, tasks, args.batch_size, args.horizon, args.workers)
    wanted = set(args.contenders or CONTENDERS)
    batched = any_batched(tasks)
    makers = [
        ("sampler", lambda: SamplerContender("sampler", *common, fast=True)),
        ("sampler-0", lambda: SamplerContender("sampler-0", scenario, tasks, args.batch_size, args.horizon, 0,
                                               fast=True, threads=args.workers) if batched else None),
        ("per-env", lambda: SamplerContender("per-env", *common, fast=True, mujoco_batch=False) if batched else None),
        ("plain", lambda: SamplerContender("plain", *common, fast=False)),
        ("sync", lambda: SyncContender("sync", *common)),
        ("envpool", lambda: None if args.no_envpool else EnvpoolContender("envpool", *common)),
        ("batched", lambda: BatchedContender("batched", *common) if batched else None),
        ("physics", lambda: PhysicsContender("physics", *common)),
    ]
    contenders = [c for c in (make() for key, make in makers if key in wanted) if c is not None]
    rates = {c.key: {"steps/s": [], "steps/cpu-s": []} for c in contenders}
    try:
        for c in contenders:
            c.run()  # warm-up: pools started, first resets done
        for r in range(args.rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for c in order:
                wall, cpu, steps = c.run()
                rates[c.key]["steps/s"].append(steps / wall)
                rates[c.key]["steps/cpu-s"].append(steps / cpu)
            print(f"round {r + 1}/{args.rounds} (steps/s, steps/cpu-s): " + ", ".join(
                f"{k} {v['steps/s'][-1]:,.0f} {v['steps/cpu-s'][-1]:,.0f}" for k, v in rates.items()), flush=True)
    finally:
        for c in contenders:
            c.close()
    print(f"\n{'contender':10s} {'steps/s':>10s} {'steps/cpu-s':>12s}   (medians)")
    for key, values in rates.items():
        print(f"{key:10s} {statistics.median(values['steps/s']):10,.0f} {statistics.median(values['steps/cpu-s']):12,.0f}")
    print("\nratio, median of per-round ratios [min, max]   steps/s                steps/cpu-s")
    for subject in [k for k in ("sampler", "sampler-0", "batched") if k in rates]:
        for peer in [k for k in rates if k != subject]:
            cells = []
            for metric in ("steps/s", "steps/cpu-s"):
                ratios = [a / b for a, b in zip(rates[subject][metric], rates[peer][metric])]
                cells.append(f"{statistics.median(ratios):5.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]")
            print(f"{subject:>7s} / {peer:8s} {cells[0]:>28s}   {cells[1]:>22s}")
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--horizon", type=int, default=500)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-envpool", action="store_true", help="leave envpool out (pip install envpool)")
    parser.add_argument("--contenders", nargs="+", metavar="NAME", choices=CONTENDERS,
                        help=f"run only these ({', '.join(CONTENDERS)}; default: all that apply)")
    parser.add_argument("--quick", action="store_true", help="5 tasks x 2, horizon 50, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.horizon, args.rounds = 5, 50, 2
    torch.set_num_threads(1)  # as the sampler does during a rollout
    import mujoco

    envpool_version = "not used" if args.no_envpool else importlib.metadata.version("envpool")
    print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}, {platform.node()}, {os.cpu_count()} CPUs "
          f"({len(os.sched_getaffinity(0))} usable), python {platform.python_version()}, torch {torch.__version__}")
    print(f"# Meta-World {importlib.metadata.version('metaworld')}, MuJoCo {mujoco.__version__}, "
          f"envpool {envpool_version}")
    print(f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    for scenario in args.scenarios:
        run_scenario(scenario, args)


if __name__ == "__main__":
    main()
