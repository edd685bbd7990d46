"""Env-steps/s of MultiTaskSampler against gymnasium's vector envs, envpool and raw physics.

Every contender steps the same number N of envs (``--env halfcheetah``:
HalfCheetahVel-v5, the default; ``--env ant``: AntVel-v5) for ``--horizon``
steps from a reset, evaluating the same policy network
(``NormalMLPPolicy(obs, act, hidden_sizes=(64, 64))``, tanh, under
``torch.no_grad``) on all N observations at every step and recording
observations, actions and rewards:

* ``MultiTaskSampler.sample(tasks, num_steps=0)`` end to end, i.e.
  reset_task, reset, the rollout, assembling the ``BatchEpisodes`` and
  computing advantages with a ``LinearFeatureBaseline`` fitted per task (the
  baseline's share is timed and printed). Four layouts: the MuJoCo fast path
  (one ``mujoco.batch`` call per worker per step) with ``--workers`` ChildEnv
  processes, lockstep and partial; the fast path in this process
  (``num_workers=0``, ``batch_threads=--workers``); and the per-env path
  (``mujoco_batch=False``), one env at a time in each worker. N = tasks x
  episodes (40 = 8 x 5, 800 = 40 x 20, other counts N/20 x 20 or N x 1).
* The physics ceiling: ``mujoco.batch.Batch`` stepping N simulations of the
  same model on ``--workers`` threads, with random controls, no policy, no
  termination and nothing recorded. How far the sampler is below it is what
  everything but physics costs.
* gymnasium ``SyncVectorEnv`` of N envs (one process).
* gymnasium ``AsyncVectorEnv(shared_memory=True)`` of N envs: one process
  per env, started with ``fork`` (forkserver or spawn would import gymnasium
  and MuJoCo once per env). It is capped below N when the processes would
  not fit in half the available memory, or by ``--async-max-envs``; the
  output says so.
* envpool's ``HalfCheetah-v5`` / ``Ant-v5`` (gymnasium's v5 models, frame
  skip 5, in C++ with envpool's own MuJoCo build), ``num_envs=batch_size=N``,
  ``num_threads=--workers``, synchronous ``step``. Its observations are
  shorter and are zero-padded for the policy. It resets a terminated env and
  steps it on, so with Ant it always steps N envs, where the sampler steps
  only the episodes still running (steps are counted as stepped).

Pool start-up is excluded (one untimed warm-up call per contender); each
timed call starts with a reset of all N envs. torch runs with one thread for
every contender, as the sampler itself does during a rollout.

The machine is usually shared, so absolute numbers mean little: the
contenders run interleaved (the order rotates every round) and the script
reports, per contender, the median steps/s over rounds and, per pair, the
median of the per-round ratios with its range. On Linux it also reads the
scheduler statistics of this process tree around every call: the cores a
contender kept busy, how long its threads were runnable but waiting for a
core (other load on the machine), and its env steps per CPU-second, which
tell a slow design from a starved one.

Usage::

    python benchmarks/sampler_throughput.py                    # 40 and 800 slots
    python benchmarks/sampler_throughput.py --env ant --no-async --no-sync
    python benchmarks/sampler_throughput.py --slots 40 --rounds 9
    python benchmarks/sampler_throughput.py --quick            # smoke check, seconds
    python benchmarks/sampler_throughput.py --profile          # + cProfile of the sampler

envpool is optional and only used here: ``pip install envpool`` (1.2.5 has
cp311 wheels that work with numpy 2; it pulls in dm-env, optree and
matplotlib, so a separate virtualenv keeps them out of the project's).
Without it the envpool row is skipped with a note.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import os
import platform
import pstats
import re
import shlex
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import torch

import maml_rl.envs  # noqa: F401  (registers HalfCheetahVel-v5)
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.envs import make_env
from maml_rl.policies import NormalMLPPolicy
from maml_rl.samplers import MultiTaskSampler
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

# --env: (this package's id, envpool's id, observation size, action size)
ENVS = {
    "halfcheetah": ("HalfCheetahVel-v5", "HalfCheetah-v5", 20, 6),
    "ant": ("AntVel-v5", "Ant-v5", 125, 8),
}
ENV_ID, ENVPOOL_ID, OBS_DIM, ACT_DIM = ENVS["halfcheetah"]
HIDDEN = (64, 64)
# Private memory of one AsyncVectorEnv worker (measured ~7.5 MB USS), with margin.
ASYNC_BYTES_PER_PROCESS = 12 * 2**20

# The least ratio of the sampler to each peer that it aims for (the MuJoCo
# fast-path issue's targets: HalfCheetah 1.25x envpool at 800 slots, 1.1x at
# 40; Ant 1.2x), and the sampler modes compared.
TARGETS = {"sync": 2.2, "async": 5.0, "envpool": 1.25}
PEERS = {"sync": "SyncVectorEnv", "async": "AsyncVectorEnv", "envpool": "envpool", "per-env": "per-env path",
         "physics": "raw Batch physics"}
SAMPLER_MODES = ("lockstep", "partial", "in-process", "per-env")


# -- contenders ---------------------------------------------------------------


class Contender:
    """One row of the table: ``start()`` builds and warms up, ``run()`` times one call."""

    key = ""

    def start(self) -> None:
        pass

    def run(self, round_index: int) -> Tuple[float, int]:
        """Seconds and env steps of one timed call."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class TimedBaseline:
    """A baseline that adds the time spent in its ``fit`` and evaluation to ``seconds``."""

    def __init__(self, baseline):
        self.baseline = baseline
        self.seconds = 0.0

    def fit(self, episodes) -> None:
        start = time.perf_counter()
        self.baseline.fit(episodes)
        self.seconds += time.perf_counter() - start

    def __call__(self, episodes):
        start = time.perf_counter()
        values = self.baseline(episodes)
        self.seconds += time.perf_counter() - start
        return values


class SamplerContender(Contender):
    """``MultiTaskSampler.sample(tasks, num_steps=0)``, lockstep or partial."""

    def __init__(self, policy, num_slots: int, workers: int, horizon: int, mode: str):
        self.key = mode
        self.num_tasks, self.batch_size = split_slots(num_slots)
        self.baseline = TimedBaseline(LinearFeatureBaseline(OBS_DIM))
        self.sampler = MultiTaskSampler(
            ENV_ID,
            {},
            self.batch_size,
            policy,
            self.baseline,
            seed=0,
            # in-process: the fast path's Batch on `workers` threads in this process.
            num_workers=0 if mode == "in-process" else workers,
            batch_threads=workers if mode == "in-process" else None,
            partial=mode == "partial",
            max_episode_steps=horizon,
            mujoco_batch=mode != "per-env",
        )
        self.tasks = self.sampler.sample_tasks(self.num_tasks)
        self.baseline_seconds: List[float] = []
        self.call_seconds: List[float] = []

    def start(self) -> None:
        sample_adapt_sample(self.sampler, self.tasks, num_steps=0)

    def run(self, round_index: int) -> Tuple[float, int]:
        self.baseline.seconds = 0.0
        start = time.perf_counter()
        _, episodes = sample_adapt_sample(self.sampler, self.tasks, num_steps=0)
        seconds = time.perf_counter() - start
        self.call_seconds.append(seconds)
        self.baseline_seconds.append(self.baseline.seconds)
        return seconds, sum(int(batch.lengths.sum()) for batch in episodes)

    def close(self) -> None:
        self.sampler.close()


class PeerContender(Contender):
    """A vector env stepped by the loop every RL library writes: policy, step, record."""

    def __init__(self, policy, num_envs: int, horizon: int):
        self.policy, self.num_envs, self.horizon = policy, num_envs, horizon
        self.observations = np.zeros((horizon + 1, num_envs, OBS_DIM), np.float32)
        self.actions = np.zeros((horizon, num_envs, ACT_DIM), np.float32)
        self.rewards = np.zeros((horizon, num_envs), np.float32)
        self.generator = torch.Generator().manual_seed(0)
        self.env = None

    def reset(self, seed: int) -> np.ndarray:
        raise NotImplementedError

    def step(self, actions: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def start(self) -> None:
        self.run(-1)

    @torch.no_grad()
    def run(self, round_index: int) -> Tuple[float, int]:
        n = self.num_envs
        start = time.perf_counter()
        noise = torch.randn((self.horizon, n, ACT_DIM), generator=self.generator)
        observation = self.reset(seed=1000 * (round_index + 2))
        obs_dim = observation.shape[1]
        self.observations[0, :, :obs_dim] = observation
        for t in range(self.horizon):
            distribution = self.policy(torch.from_numpy(self.observations[t]))
            base = distribution.base_dist
            actions = (base.loc + base.scale * noise[t]).numpy()
            self.actions[t] = actions
            observation, reward = self.step(actions)
            self.observations[t + 1, :, :obs_dim] = observation
            self.rewards[t] = reward
        return time.perf_counter() - start, n * self.horizon

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class GymVectorContender(PeerContender):
    def __init__(self, policy, num_envs: int, horizon: int, kind: str):
        super().__init__(policy, num_envs, horizon)
        self.kind = self.key = kind
        self.factory = make_env(ENV_ID, max_episode_steps=horizon)

    def start(self) -> None:
        fns = [self.factory] * self.num_envs
        if self.kind == "sync":
            self.env = gym.vector.SyncVectorEnv(fns)
        else:
            self.env = gym.vector.AsyncVectorEnv(fns, shared_memory=True, context="fork")
        super().start()

    def reset(self, seed: int) -> np.ndarray:
        return self.env.reset(seed=seed)[0]

    def step(self, actions):
        observation, reward, _, _, _ = self.env.step(actions)
        return observation, reward


class EnvpoolContender(PeerContender):
    key = "envpool"

    def __init__(self, policy, num_envs: int, horizon: int, threads: int):
        super().__init__(policy, num_envs, horizon)
        self.threads = threads

    def start(self) -> None:
        import envpool

        self.env = envpool.make(
            ENVPOOL_ID,
            env_type="gymnasium",
            num_envs=self.num_envs,
            batch_size=self.num_envs,
            num_threads=self.threads,
            max_episode_steps=self.horizon,
            seed=0,
        )
        super().start()

    def reset(self, seed: int) -> np.ndarray:
        return self.env.reset()[0]

    def step(self, actions):
        observation, reward, _, _, _ = self.env.step(actions)
        return observation, reward


class PhysicsContender(Contender):
    """The ceiling: ``mujoco.batch`` stepping N simulations of the env's model
    on ``threads`` threads, frame skip 5, with random controls and no policy,
    no termination and nothing recorded."""

    key = "physics"

    def __init__(self, num_envs: int, horizon: int, threads: int):
        from mujoco import batch as mujoco_batch

        env = gym.make(ENV_ID).unwrapped
        self.num_envs, self.horizon, self.frame_skip = num_envs, horizon, env.frame_skip
        self.init_qpos, self.init_qvel = env.init_qpos, env.init_qvel
        self.batch = mujoco_batch.Batch(env.model, num_envs, nthread=threads)
        self.qpos, self.qvel, self.ctrl = (self.batch.bind(name) for name in ("qpos", "qvel", "ctrl"))
        self.generator = np.random.default_rng(0)

    def start(self) -> None:
        self.run(-1)

    def run(self, round_index: int) -> Tuple[float, int]:
        n, nu = self.num_envs, self.ctrl.shape[1]
        start = time.perf_counter()
        self.batch.reset(stage=0)
        self.qpos[:] = self.init_qpos + self.generator.uniform(-0.1, 0.1, self.qpos.shape)
        self.qvel[:] = self.init_qvel + 0.1 * self.generator.standard_normal(self.qvel.shape)
        self.batch.forward()
        controls = self.generator.uniform(-1.0, 1.0, (self.horizon, n, nu))
        for t in range(self.horizon):
            self.ctrl[:] = controls[t]
            self.batch.step(nstep=self.frame_skip)
        return time.perf_counter() - start, n * self.horizon


# -- set-up helpers -------------------------------------------------------------


def split_slots(num_slots: int) -> Tuple[int, int]:
    """(tasks, episodes per task): 40 -> 8 x 5, multiples of 20 -> N/20 x 20."""
    if num_slots == 40:
        return 8, 5
    if num_slots % 20 == 0:
        return num_slots // 20, 20
    return num_slots, 1


def mem_available() -> Optional[int]:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def async_env_count(num_slots: int, cap: Optional[int]) -> Tuple[int, str]:
    """How many AsyncVectorEnv processes to start for ``num_slots``, and why."""
    count, why = num_slots, ""
    if cap is not None and cap < count:
        count, why = cap, f"capped at {cap} by --async-max-envs"
    available = mem_available()
    if available is not None:
        fits = int(available / 2 // ASYNC_BYTES_PER_PROCESS)
        if fits < count:
            count = max(1, fits)
            why = (
                f"capped at {count}: {num_slots} processes would not fit in half "
                f"of the {available / 2**30:.1f} GiB available"
            )
    return count, why


def envpool_info() -> Tuple[Optional[str], str]:
    """envpool's version (None when missing) and a line on its HalfCheetah model."""
    try:
        import envpool
    except ImportError as exc:
        return None, f"envpool not importable ({exc}); `pip install envpool` to add it"
    try:
        spec = envpool.make_spec(ENVPOOL_ID)
        config = spec.config
        xml = os.path.join(config.base_path, "mujoco", "assets_gym", config.xml_file)
        gym_xml = os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets", config.xml_file)
        same = _same_file(xml, gym_xml)
        model = f"xml_file={config.xml_file} ({'byte-identical to' if same else 'differs from'} gymnasium's v5 asset)"
        mujoco_version = _envpool_mujoco_version()
        return envpool.__version__, (
            f"envpool {ENVPOOL_ID}: {model}, frame_skip={config.frame_skip}, "
            f"observation {spec.observation_space.shape[0]} values (zero-padded to {OBS_DIM}); "
            "it resets an env that terminates and steps it on, so all N envs step every step, "
            "where the sampler steps only the episodes still running, "
            f"MuJoCo {mujoco_version} built into envpool"
        )
    except Exception as exc:  # the spec is informational only
        return envpool.__version__, f"envpool {ENVPOOL_ID}: could not read its spec ({exc!r})"


def _same_file(a: str, b: str) -> bool:
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def _envpool_mujoco_version() -> str:
    """Best effort: the one version-like string in envpool's MuJoCo extension."""
    try:
        import envpool.mujoco as package

        path = os.path.join(os.path.dirname(package.__file__), "mujoco_gym_envpool.so")
        with open(path, "rb") as f:
            found = set(re.findall(rb"\x00(\d\.\d{1,2}\.\d{1,2})\x00", f.read()))
        if len(found) == 1:
            return found.pop().decode()
    except Exception:
        pass
    return "(version unknown)"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _children_map() -> Dict[int, List[int]]:
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(name))
    return children


def cpu_snapshot() -> Optional[Dict[Tuple[int, int], Tuple[int, int]]]:
    """(on-CPU ns, runnable-but-waiting ns) of every thread of this process and
    its descendants (sampler workers under the forkserver, AsyncVectorEnv
    processes, envpool threads), or None where /proc has no schedstat."""
    if not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"):
        return None
    children = _children_map()
    pids, stack = [], [os.getpid()]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        stack += children.get(pid, [])
    snapshot = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    run, wait = f.read().split()[:2]
            except (OSError, ValueError):
                continue
            snapshot[(pid, int(tid))] = (int(run), int(wait))
    return snapshot


def cpu_delta(before, after) -> Optional[Tuple[float, float]]:
    """Seconds on a CPU and seconds runnable but waiting, between two snapshots."""
    if before is None or after is None:
        return None
    run = wait = 0
    for key, (run_after, wait_after) in after.items():
        run_before, wait_before = before.get(key, (0, 0))
        run += run_after - run_before
        wait += wait_after - wait_before
    return run / 1e9, wait / 1e9


# -- measurement ------------------------------------------------------------------


class Sample:
    """One timed call: steps/s and, where available, CPU seconds and runnable-wait seconds."""

    def __init__(self, seconds: float, steps: int, cpu: Optional[Tuple[float, float]]):
        self.seconds, self.steps = seconds, steps
        self.rate = steps / seconds
        self.cpu, self.wait = cpu if cpu is not None else (None, None)


def measure(contenders: List[Contender], rounds: int, log: Callable[[str], None]) -> Dict[str, List[Sample]]:
    """Every contender once per round, in an order that rotates every round."""
    samples: Dict[str, List[Sample]] = {c.key: [] for c in contenders}
    for r in range(rounds):
        shift = r % len(contenders)
        order = contenders[shift:] + contenders[:shift]
        parts = []
        for contender in order:
            before = cpu_snapshot()
            seconds, steps = contender.run(r)
            sample = Sample(seconds, steps, cpu_delta(before, cpu_snapshot()))
            samples[contender.key].append(sample)
            parts.append(f"{contender.key} {sample.rate:,.0f}")
        log(f"  round {r + 1}/{rounds}: " + ", ".join(parts) + f" (load average {load_average()})")
    return samples


def profile_sampler(contender: SamplerContender, lines: int) -> str:
    """cProfile of the main process during one sample(num_steps=0) call."""
    profiler = cProfile.Profile()
    profiler.enable()
    sample_adapt_sample(contender.sampler, contender.tasks, num_steps=0)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(lines)
    text = out.getvalue()
    body = text[text.find("ncalls"):] if "ncalls" in text else text
    head = f"total {stats.total_tt:.3f} s (profiled, so slower than the timed calls)"
    slots = contender.num_tasks * contender.batch_size
    return f"--- cProfile, maml_rl {contender.key}, {slots} slots: {head}\n{body.rstrip()}"


# -- report ------------------------------------------------------------------------


def ratio_stats(num: List[Sample], den: List[Sample]) -> Tuple[float, float, float]:
    per_round = [a.rate / b.rate for a, b in zip(num, den)]
    return statistics.median(per_round), min(per_round), max(per_round)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, nargs="+", default=None, help="env slot counts (default 40 800)")
    parser.add_argument(
        "--rounds", type=int, default=None, help="timed rounds per contender (default 15 up to 100 slots, else 5)"
    )
    parser.add_argument("--horizon", type=int, default=None, help="steps per episode (default 100)")
    parser.add_argument("--env", choices=sorted(ENVS), default="halfcheetah",
                        help="HalfCheetahVel-v5 against envpool HalfCheetah-v5 (default), or AntVel-v5 against Ant-v5")
    parser.add_argument("--workers", type=int, default=2,
                        help="sampler workers, Batch threads of the in-process mode and the physics ceiling, "
                             "envpool threads")
    parser.add_argument("--no-per-env", action="store_true", help="skip the sampler's per-env path")
    parser.add_argument("--no-sync", action="store_true", help="skip SyncVectorEnv")
    parser.add_argument("--async-max-envs", type=int, default=None, help="cap on AsyncVectorEnv processes")
    parser.add_argument("--no-async", action="store_true", help="skip AsyncVectorEnv")
    parser.add_argument("--no-envpool", action="store_true", help="skip envpool even when installed")
    parser.add_argument("--profile", action="store_true", help="also cProfile one sample() per sampler mode")
    parser.add_argument("--quick", action="store_true", help="smoke check: 40 and 80 slots, horizon 20, 2 rounds")
    args = parser.parse_args()
    global ENV_ID, ENVPOOL_ID, OBS_DIM, ACT_DIM
    ENV_ID, ENVPOOL_ID, OBS_DIM, ACT_DIM = ENVS[args.env]
    slots = args.slots or ([40, 80] if args.quick else [40, 800])

    def rounds_for(num_slots: int) -> int:
        return args.rounds or (2 if args.quick else 15 if num_slots <= 100 else 5)

    horizon = args.horizon or (20 if args.quick else 100)
    async_cap = args.async_max_envs if args.async_max_envs is not None else (80 if args.quick else None)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    torch.set_num_threads(1)
    torch.manual_seed(0)
    policy = NormalMLPPolicy(OBS_DIM, ACT_DIM, hidden_sizes=HIDDEN)
    envpool_version, envpool_line = (None, "envpool skipped (--no-envpool)") if args.no_envpool else envpool_info()
    load_before = load_average()
    started = datetime.datetime.now().astimezone()

    results: Dict[int, Dict[str, List[Sample]]] = {}
    notes: List[str] = []
    profiles: List[str] = []
    splits: Dict[int, Dict[str, Tuple[List[float], List[float]]]] = {}
    for num_slots in slots:
        log(f"{num_slots} slots: starting the contenders")
        contenders: List[Contender] = []
        try:
            # AsyncVectorEnv forks first, before any other pool has started threads.
            if not args.no_async:
                count, why = async_env_count(num_slots, async_cap)
                if why:
                    notes.append(f"{num_slots} slots: AsyncVectorEnv {why}; its steps/s are for {count} envs")
                contenders.append(GymVectorContender(policy, count, horizon, "async"))
            modes = [m for m in SAMPLER_MODES if not (m == "per-env" and args.no_per_env)]
            samplers = [SamplerContender(policy, num_slots, args.workers, horizon, mode) for mode in modes]
            contenders += samplers
            contenders.append(PhysicsContender(num_slots, horizon, args.workers))
            if not args.no_sync:
                contenders.append(GymVectorContender(policy, num_slots, horizon, "sync"))
            if envpool_version is not None:
                contenders.append(EnvpoolContender(policy, num_slots, horizon, args.workers))
            for contender in contenders:
                t = time.perf_counter()
                contender.start()
                log(f"  started {contender.key} ({time.perf_counter() - t:.1f} s, with one warm-up call)")
            results[num_slots] = measure(contenders, rounds_for(num_slots), log)
            splits[num_slots] = {c.key: (c.call_seconds, c.baseline_seconds) for c in samplers}
            if args.profile:
                profiles += [profile_sampler(c, 25) for c in samplers]
        finally:
            for contender in contenders:
                contender.close()

    # The table.
    print()
    print(
        f"### Sampling throughput: {ENV_ID}, horizon {horizon}, "
        f"NormalMLPPolicy({OBS_DIM}, {ACT_DIM}, hidden_sizes={HIDDEN}) tanh, {args.workers} workers"
    )
    if args.quick:
        print("\n(quick smoke run: short horizon, few rounds; the numbers are not representative)")
    print()
    print("| contender | " + " | ".join(f"{n} slots steps/s" for n in slots) + " |")
    print("|---|" + "---:|" * len(slots))
    rows = {
        "lockstep": f"maml_rl MultiTaskSampler, fast path, lockstep, {args.workers} workers: sample(num_steps=0)",
        "partial": f"maml_rl MultiTaskSampler, fast path, partial, {args.workers} workers",
        "in-process": f"maml_rl MultiTaskSampler, fast path, num_workers=0, batch_threads={args.workers}",
        "per-env": f"maml_rl MultiTaskSampler, per-env path (mujoco_batch=False), lockstep, {args.workers} workers",
        "physics": f"raw mujoco.batch physics, {args.workers} threads, no policy (the ceiling)",
        "sync": "gymnasium SyncVectorEnv (1 process)",
        "async": "gymnasium AsyncVectorEnv(shared_memory=True), 1 process per env",
        "envpool": f"envpool {ENVPOOL_ID}, sync, {args.workers} threads",
    }
    if any("AsyncVectorEnv" in note for note in notes):
        rows["async"] += " (capped, see notes)"
    for key, label in rows.items():
        cells = [
            f"{statistics.median(s.rate for s in results[n][key]):,.0f}" if key in results[n] else "n/a" for n in slots
        ]
        if any(cell != "n/a" for cell in cells):
            print(f"| {label} | " + " | ".join(cells) + " |")

    print()
    print("Ratios: median of the per-round ratios [min-max over rounds]; targets from the sampler's spec.")
    for n in slots:
        rates = results[n]
        print(f"{n} slots ({rounds_for(n)} rounds):")
        for mode in SAMPLER_MODES:
            if mode not in rates:
                continue
            for peer, name in PEERS.items():
                if peer not in rates or peer == mode:
                    continue
                median, low, high = ratio_stats(rates[mode], rates[peer])
                target = TARGETS.get(peer)
                if peer == "envpool":
                    target = 1.2 if ENV_ID.startswith("Ant") else 1.1 if n <= 100 else 1.25
                if mode == "per-env" or target is None:
                    print(f"  {mode} / {name}: {median:.2f}x [{low:.2f}-{high:.2f}]")
                    continue
                verdict = "met" if median >= target else "MISSED"
                print(f"  {mode} / {name}: {median:.2f}x [{low:.2f}-{high:.2f}]  (target >= {target}x: {verdict})")
        for mode in SAMPLER_MODES:
            if mode not in splits[n]:
                continue
            calls, baseline = splits[n][mode]
            call, fit = statistics.median(calls), statistics.median(baseline)
            share = statistics.median([b / c for b, c in zip(baseline, calls)])
            # The timed calls' own step counts (Ant's episodes end early).
            without = statistics.median([s.steps / (c - b) for s, c, b in zip(rates[mode], calls, baseline)])
            print(
                f"  {mode}: sample() {call * 1e3:.0f} ms/call, of which baseline fit + evaluation "
                f"{fit * 1e3:.0f} ms ({100 * share:.0f}%); without it ~{without:,.0f} steps/s"
            )
        median, low, high = ratio_stats(rates["partial"], rates["lockstep"])
        print(f"  partial / lockstep: {median:.2f}x [{low:.2f}-{high:.2f}]")
        for mode in ("lockstep", "in-process"):
            median, low, high = ratio_stats(rates[mode], rates["physics"])
            print(f"  {mode} is {100 * (1 - median):.0f}% below the physics ceiling "
                  f"[per round {100 * (1 - high):.0f}-{100 * (1 - low):.0f}%] (target: within 15%)")

    if all(s.cpu is not None for n in slots for runs in results[n].values() for s in runs):
        print()
        print(
            "CPU use per call, medians: cores kept busy (CPU-s / wall-s) | runnable but waiting for a core "
            "(thread-s / wall-s; > 0 means other load took cores) | env steps per CPU-second"
        )
        for n in slots:
            print(f"{n} slots:")
            for key, samples in results[n].items():
                busy = statistics.median(s.cpu / s.seconds for s in samples)
                wait = statistics.median(s.wait / s.seconds for s in samples)
                per_cpu = statistics.median(s.steps / s.cpu for s in samples if s.cpu > 0)
                print(f"  {key:>10}: {busy:.2f} cores busy | {wait:.2f} waiting | {per_cpu:,.0f} steps/CPU-s")
            if "envpool" in results[n]:
                cpu_rate = {key: statistics.median(s.steps / s.cpu for s in samples if s.cpu > 0)
                            for key, samples in results[n].items()}
                for mode in SAMPLER_MODES:
                    if mode in cpu_rate and mode != "per-env":
                        print(f"  {mode} / envpool, steps per CPU-second: {cpu_rate[mode] / cpu_rate['envpool']:.2f}x "
                              "(target >= 1.3x)")
                print(f"  physics / envpool, steps per CPU-second: {cpu_rate['physics'] / cpu_rate['envpool']:.2f}x "
                      "(the most the sampler could reach)")

    print()
    print("Notes:")
    print(
        "- every contender steps N envs from a reset for the horizon, evaluating the same policy on all N "
        "observations per step under torch.no_grad, with torch.set_num_threads(1) (the sampler sets it "
        "during its rollouts too); start-up and one warm-up call per contender are not timed"
    )
    print(
        "- the sampler's sample() also sets the tasks, assembles BatchEpisodes and fits the baseline; the "
        "peers record observations, actions and rewards into preallocated arrays and do nothing else"
    )
    forks = "" if args.no_async else "; AsyncVectorEnv forks its processes"
    print(f"- SyncVectorEnv steps all envs in this process{forks}")
    print(f"- {envpool_line}")
    for note in notes:
        print(f"- {note}")
    print()
    print(f"Command: {shlex.join([os.path.basename(sys.executable)] + sys.argv)}")
    print(f"Date: {started.isoformat(timespec='seconds')}")
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"CPU: {cpu_model()}, {affinity} cores usable; load average before {load_before}, "
        f"after {load_average()} (counting this run's own processes)"
    )
    import mujoco

    print(
        f"Versions: python {platform.python_version()}, torch {torch.__version__}, gymnasium {gym.__version__}, "
        f"mujoco {mujoco.__version__}, numpy {np.__version__}, envpool {envpool_version or 'not installed'}"
    )
    for text in profiles:
        print()
        print(text)


if __name__ == "__main__":
    main()
