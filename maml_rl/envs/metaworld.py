"""Meta-World ML1, ML10 and ML45 as meta-learning environments (the ``metaworld`` extra).

A task is one of the benchmark's goals: a dict ``{"benchmark", "split",
"env_name", "index", "rand_vec"}``, where ``index`` is the goal's place in
the split's task list and ``rand_vec`` the goal itself (object and target
positions), so a worker can set it without rebuilding the benchmark's task
lists (31 s for ML45). ``sample_tasks`` draws from the **train** goals, or
from the held-out **test** goals with ``split="test"``.

Meta-World's own vector helpers are not used: ``gym.make("Meta-World/ML1-train")``
fails (Meta-World #541) and ``make_vec("Meta-World/ML1-train")`` silently uses
the test goals (a late-bound loop variable, Meta-World PR #573). The
benchmark classes (``metaworld.ML1``/``ML10``/``ML45``) are driven directly.

Each slot keeps at most ``max_cached_envs`` live Meta-World envs: ML10 and
ML45 mix task classes, and a slot that gets another class's task builds
that class's env (about 30 ms), evicting the least recently used one.

Every episode succeeds if ``info["success"]`` is set at any of its steps;
the sampler carries ``success`` by default (``info_keys``).

With ``fast=True`` (the default) each task class is stepped through
``maml_rl.envs.metaworld_fast``: the same observations, rewards and infos, bit
for bit, in about half the CPU time (docs/benchmarks.md). ``fast=False`` steps
Meta-World's own classes. The fast path turns itself off, with one log line
saying why, on a Meta-World version it was not checked against. On MuJoCo 4
the sampler also steps each task class's slots together
(``batch_stepper``: ``metaworld_fast/batched``), with the same bits again.
"""

from __future__ import annotations

import difflib
import functools
import logging
import pickle
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from maml_rl.envs.batch_stepping import BatchStepper, BatchSteppedEnv
from maml_rl.envs.meta_env import MetaEnv

try:
    import metaworld
    import metaworld.env_dict
    import metaworld.sawyer_xyz_env
    import mujoco
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        f"Meta-World is not installed ({exc}). Beside MuJoCo 4 (the README's get-going venv): pip install --no-deps "
        f"metaworld==3.1.1 && pip install packaging scipy imageio; or in a venv of its own (MuJoCo 3.3): "
        f"pip install -e \".[dev,metaworld]\". Not the metaworld extra in a venv with MuJoCo 4, which breaks MuJoCo "
        f"(docs/environments.md#installing)"
    ) from exc

from maml_rl.envs.metaworld_fast import fast_class, unavailable_reason  # noqa: E402 (it imports Meta-World)

__all__ = ["BENCHMARKS", "REWARD_VERSIONS", "MetaWorldEnv", "benchmark_tasks"]

logger = logging.getLogger(__name__)

BENCHMARKS = ("ML1", "ML10", "ML45")
REWARD_VERSIONS = ("v1", "v2")
SPLITS = ("train", "test")
#: Meta-World's own episode length (``max_path_length``): its envs truncate there.
MAX_PATH_LENGTH = 500

# The weld data Meta-World writes on reset: 11 numbers, as MuJoCo < 3.17 had.
_WELD_DATA = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0])


def _reset_mocap_welds(self) -> None:
    """``SawyerMocapBase.reset_mocap_welds`` for MuJoCo >= 3.17, whose weld rows hold 12 numbers:
    the same 11 numbers into the first 11 (the 12th keeps the model's value)."""
    if self.model.nmocap > 0 and self.model.eq_data is not None:
        for i in range(self.model.eq_data.shape[0]):
            if self.model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
                self.model.eq_data[i, : len(_WELD_DATA)] = _WELD_DATA


# metaworld 3.1.1 pins mujoco==3.3.0 (11 numbers per weld). On a newer MuJoCo
# (installed with --no-deps, e.g. for the MuJoCo fast path) its reset crashes
# with "could not broadcast (11,) into (12,)"; this is the only change needed.
WELD_SHIM = getattr(mujoco, "mjNEQDATA", len(_WELD_DATA)) != len(_WELD_DATA)
if WELD_SHIM:
    metaworld.sawyer_xyz_env.SawyerMocapBase.reset_mocap_welds = _reset_mocap_welds


def _classes(benchmark: str, env_name: str | None, split: str) -> "OrderedDict[str, type]":
    if benchmark == "ML1":
        return OrderedDict([(env_name, metaworld.env_dict.ALL_V3_ENVIRONMENTS[env_name])])
    return getattr(metaworld.env_dict, f"{benchmark}_V3")[split]


@functools.lru_cache(maxsize=64)
def benchmark_tasks(benchmark: str, env_name: str | None, seed: int) -> dict[str, tuple]:
    """``{"train": (...), "test": (...)}``: each split's goals as ``(env_name, rand_vec)``,
    in Meta-World's order, from ``metaworld.ML1(env_name, seed)`` / ``ML10(seed)`` / ``ML45(seed)``
    (built once per process: 1.4 s for ML1, 9 s for ML10, 31 s for ML45 on one core; the 64 kept hold every
    ML1 class of a seed, a few hundred kB in all, so a process that visits them all builds none twice)."""
    logger.info("building Meta-World %s task lists (seed %d)", benchmark if env_name is None else f"ML1 {env_name}", seed)
    bench = metaworld.ML1(env_name, seed=seed) if benchmark == "ML1" else getattr(metaworld, benchmark)(seed=seed)
    out = {}
    for split, tasks in (("train", bench.train_tasks), ("test", bench.test_tasks)):
        # Meta-World's own task data, unpickled once here: it comes from the benchmark object, not from a file.
        out[split] = tuple((task.env_name, np.array(pickle.loads(task.data)["rand_vec"], dtype=np.float64))
                           for task in tasks)
    return out


@functools.lru_cache(maxsize=1)
def _log_fast_path_off() -> None:
    logger.warning("Meta-World fast path off, stepping Meta-World's own envs: %s", unavailable_reason())


def _metaworld_task(env_name: str, rand_vec: np.ndarray) -> "metaworld.Task":
    """The ``metaworld.Task`` Meta-World's ``_make_tasks`` builds for this goal of an ML benchmark."""
    cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[env_name]
    data = {"rand_vec": np.array(rand_vec, dtype=np.float64), "env_cls": cls, "partially_observable": True}
    return metaworld.Task(env_name=env_name, data=pickle.dumps(data))


class MetaWorldEnv(gym.Env, MetaEnv, BatchSteppedEnv):
    """A Meta-World ML benchmark as one meta-learning env (see the module's docstring).

    :param benchmark: ``"ML1"``, ``"ML10"`` or ``"ML45"``.
    :param env_name: for ML1, the task class, e.g. ``"push-v3"`` (one of
        Meta-World's 50 v3 names); ``None`` for ML10/ML45.
    :param split: ``"train"`` (default) or ``"test"``: which goals
        ``sample_tasks`` draws from. ML1's test goals are other positions of
        the same class; ML10's and ML45's are other classes.
    :param reward_function_version: Meta-World's ``"v2"`` (default, as in
        Meta-World+) or ``"v1"`` rewards; results differ a lot between them.
    :param benchmark_seed: seed of Meta-World's goal lists (``ML1(name, seed)``);
        keep it fixed to compare runs.
    :param max_cached_envs: live Meta-World envs kept per slot for switching classes.
    :param fast: step the task classes through ``maml_rl.envs.metaworld_fast``
        (same bits, less CPU time); ``False`` steps Meta-World's own classes.
    """

    metadata = {"render_modes": []}
    #: Carried by the sampler into ``BatchEpisodes.infos`` by default.
    info_keys = ("success",)
    #: The task splits ``split=`` selects (test.py evaluates on ``"test"``).
    splits = SPLITS

    def __init__(self, benchmark: str = "ML1", env_name: str | None = None, split: str = "train",
                 reward_function_version: str = "v2", benchmark_seed: int = 0, max_cached_envs: int = 1,
                 fast: bool = True):
        super().__init__()
        if benchmark not in BENCHMARKS:
            raise ValueError(f"benchmark must be one of {BENCHMARKS}, got {benchmark!r}")
        names = metaworld.env_dict.ALL_V3_ENVIRONMENTS
        if benchmark == "ML1":
            if env_name not in names:
                close = difflib.get_close_matches(str(env_name), list(names), n=3)
                hint = f" Did you mean {close}?" if close else ""
                raise ValueError(f"ML1 needs env_name, one of Meta-World's v3 task names, got {env_name!r}.{hint} "
                                 f"All of them: {', '.join(names)}")
        elif env_name is not None:
            raise ValueError(f"env_name applies to ML1 only; {benchmark} has its own task classes (got {env_name!r})")
        if split not in SPLITS:
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if reward_function_version not in REWARD_VERSIONS:
            raise ValueError(f"reward_function_version must be one of {REWARD_VERSIONS}, got {reward_function_version!r}")
        if isinstance(max_cached_envs, bool) or not isinstance(max_cached_envs, int) or max_cached_envs < 1:
            raise ValueError(f"max_cached_envs must be a positive int, got {max_cached_envs!r}")
        if isinstance(benchmark_seed, bool) or not isinstance(benchmark_seed, int):
            raise ValueError(f"benchmark_seed must be an int, got {benchmark_seed!r}")
        if not isinstance(fast, bool):
            raise ValueError(f"fast must be true or false, got {fast!r}")
        self.benchmark, self.env_name, self.split = benchmark, env_name, split
        self.fast = fast
        self.reward_function_version = reward_function_version
        self.benchmark_seed = benchmark_seed
        self.max_cached_envs = max_cached_envs
        # The classes a task may name: both splits' (test.py runs test tasks).
        self.task_classes = OrderedDict(_classes(benchmark, env_name, "train"))
        self.task_classes.update(_classes(benchmark, env_name, "test"))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (39,), np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self._envs: "OrderedDict[str, Any]" = OrderedDict()
        self._env: Any = None
        self._task: dict[str, Any] | None = None

    # -- the task protocol -------------------------------------------------

    def task_shapes(self) -> dict[str, tuple[int, ...]]:
        # Unused: a task holds strings and an index too, checked by validate_task below.
        return {}

    def _split_tasks(self, split: str) -> tuple:
        return benchmark_tasks(self.benchmark, self.env_name, self.benchmark_seed)[split]

    def sample_tasks(self, num_tasks: int) -> list[dict[str, Any]]:
        """``num_tasks`` goals of the split, uniformly without replacement (with
        replacement only when more are asked for than the split has)."""
        num_tasks = self._check_num_tasks(num_tasks)
        tasks = self._split_tasks(self.split)
        indices = self.np_random.choice(len(tasks), size=num_tasks, replace=num_tasks > len(tasks))
        return [self._task_dict(self.split, int(i)) for i in indices]

    def all_tasks(self, split: str | None = None) -> list[dict[str, Any]]:
        """Every goal of ``split`` (default: this env's), in Meta-World's order."""
        split = self.split if split is None else split
        return [self._task_dict(split, i) for i in range(len(self._split_tasks(split)))]

    def _task_dict(self, split: str, index: int) -> dict[str, Any]:
        env_name, rand_vec = self._split_tasks(split)[index]
        return {"benchmark": self.benchmark, "split": split, "env_name": env_name, "index": index,
                "rand_vec": rand_vec.copy()}

    def validate_task(self, task: Any) -> dict[str, Any]:
        keys = ("benchmark", "split", "env_name", "index", "rand_vec")
        if not isinstance(task, Mapping) or set(task) != set(keys):
            got = sorted(task) if isinstance(task, Mapping) else type(task).__name__
            raise ValueError(f"A Meta-World task is a dict with keys {keys} (from sample_tasks), got {got}")
        if task["benchmark"] != self.benchmark:
            raise ValueError(f"task of {task['benchmark']} given to a {self.benchmark} env")
        if task["env_name"] not in self.task_classes:
            raise ValueError(f"task class {task['env_name']!r} is not part of {self.benchmark} "
                             f"(its classes: {', '.join(self.task_classes)})")
        rand_vec = np.array(task["rand_vec"], dtype=np.float64)
        if rand_vec.ndim != 1 or not np.all(np.isfinite(rand_vec)):
            raise ValueError(f"task rand_vec must be a finite vector, got {task['rand_vec']!r}")
        return {**task, "rand_vec": rand_vec}

    def reset_task(self, task: Mapping[str, Any]) -> None:
        task = self.validate_task(task)
        self._env = self._env_for(task["env_name"])
        self._env.set_task(_metaworld_task(task["env_name"], task["rand_vec"]))
        self._task = task

    def get_task(self) -> dict[str, Any]:
        if self._task is None:
            return {}
        return {**self._task, "rand_vec": self._task["rand_vec"].copy()}

    def _env_for(self, env_name: str):
        """This slot's env of ``env_name``'s class, built if needed; at most ``max_cached_envs`` kept."""
        if env_name in self._envs:
            self._envs.move_to_end(env_name)
            return self._envs[env_name]
        while len(self._envs) >= self.max_cached_envs:
            _, old = self._envs.popitem(last=False)
            old.close()
        env = self._class_for(env_name)(reward_function_version=self.reward_function_version)
        self._envs[env_name] = env
        return env

    def _class_for(self, env_name: str) -> type:
        cls = self.task_classes[env_name]
        if not self.fast:
            return cls
        fast = fast_class(cls)
        if fast is None:
            _log_fast_path_off()
            return cls
        return fast

    # -- the sampler's fast path (batch_stepping) ----------------------------

    def batch_support(self) -> str | None:
        from maml_rl.envs.metaworld_fast.batched import SPECS, mujoco_batch

        if not self.fast:
            return "fast=False steps Meta-World's own classes"
        reason = unavailable_reason()
        if reason is not None:
            return reason
        if mujoco_batch is None:
            return f"mujoco {mujoco.__version__} has no mujoco.batch (it needs MuJoCo >= 4.0)"
        if self.reward_function_version != "v2":
            return "only the v2 rewards are batched"
        if not any(cls.__name__ in SPECS for cls in self.task_classes.values()):
            return f"none of its task classes ({', '.join(self.task_classes)}) is batched yet"
        return None

    def batch_in_process(self) -> bool:
        """ML1's slots are all of one class, one batch in this process. ML10's and ML45's spread over many
        classes, some with too few slots to batch (``stepper.MIN_GROUP``), whose Python worker processes share
        out. Measured on 2 cores: ML1 push with 40 envs 1.36x faster in this process than in 2 workers; an RL²
        ML10 iteration (20 slots, 2 a class) sampled in 43-46 s in 2 workers stepping env by env, 54 s in this
        process with every class batched."""
        return len(self.task_classes) == 1

    def batch_stepper(self, envs, nthread: int) -> BatchStepper:
        """Each task class's slots stepped together (``metaworld_fast/batched/stepper.py``; all 50 of
        Meta-World's classes are batched); a class with too few slots, one at a time."""
        from maml_rl.envs.metaworld_fast.batched.stepper import MetaWorldStepper

        return MetaWorldStepper(envs, nthread)

    # -- gymnasium ----------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        # The seed goes to this env's task sampling; Meta-World's own reset is
        # deterministic given the goal (its reset ignores seeds).
        super().reset(seed=seed)
        if self._task is None:
            self.reset_task(self._task_dict(self.split, 0))
        observation, info = self._env.reset()
        return observation, info

    def step(self, action):
        observation, reward, terminated, truncated, info = self._env.step(action)
        return observation, float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        self._env = None
