"""``MultiTaskVectorEnv``: the sampler's worker processes as a ``gymnasium.vector.VectorEnv``.

For RL code that owns its loop (``envs.step(actions)``): several envs per worker process,
stepped one after another, one wake-up per worker per step; observations, actions, rewards
and flags in shared memory. With ``num_workers=0`` (the default on the MuJoCo fast path) the
envs step in this process instead, their physics on ``mujoco.batch``'s threads. Built as
``AsyncVectorEnv`` is, with gymnasium 1.x's semantics (``SyncVectorEnv``'s, env for env:
``tests/samplers/test_vector_env.py`` holds it to them), and the meta-learning task control of the sampler
(``reset_tasks``, ``sample_tasks``). Its two errors live with the sampler's, in :mod:`.errors`.
``docs/vector.md`` shows it in use and lists what differs from ``AsyncVectorEnv``.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any, Callable, Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.error import AlreadyPendingCallError, CustomSpaceError, NoAsyncCallError
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, create_shared_memory, read_from_shared_memory

from maml_rl.envs.factory import make_env

from .errors import VectorEnvClosedError, VectorResetNeeded
from .exclusive import OneCallAtATime
from .settings.execution import _start_method, checked_step_timeout
from .workers.processes import usable_cpus
from .workers.in_process_vector_pool import InProcessVectorPool
from .workers.vector_child_env import InfoColumns, VectorSpec, fits_buffer, read_copies
from .workers.vector_children import fast_path_choice
from .workers.vector_mistakes import action_rows, check_reset_mask, raise_from_envs
from .workers.vector_pool import VectorEnvPool

__all__ = ["MultiTaskVectorEnv", "VectorEnvClosedError", "VectorResetNeeded", "make_vector_env"]


class MultiTaskVectorEnv(VectorEnv):
    """A gymnasium vector env over ChildEnv worker processes and shared memory (or this process).

    :param env_fns: one callable per env, each returning a gymnasium env (the same spaces).
    :param num_workers: worker processes (each steps ``~num_envs / num_workers`` envs one after
        another), at most ``num_envs``. ``0``: every env steps in this process, with no wake-up, pipe
        or pickled reply a step; on the MuJoCo fast path its one ``mujoco.batch`` call a step runs on
        ``batch_threads`` threads (the faster layout there: docs/benchmarks.md). ``None``, as the
        sampler: ``0`` where the fast path is taken (or on one CPU) and no ``step_timeout`` is set,
        else one worker process per usable CPU.
    :param batch_threads: with ``num_workers=0`` on the fast path, the ``mujoco.batch`` threads (this one
        included); ``None``: one per usable CPU.
    :param start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; ``None``: forkserver
        where available (as the sampler).
    :param autoreset_mode: gymnasium's ``AutoresetMode`` (or its value).
    :param copy: ``reset`` and ``step`` return a copy of the observations (else a view of the
        shared memory, overwritten by the next step).
    :param observation_mode: ``"same"`` only (every env has env 0's observation space).
    :param step_timeout: seconds a worker may take over one command (a step, a reset, a call) before
        it is killed and the call raises ``StepTimeoutError`` naming it, the env and its task; the vector
        env is then closed. ``None`` (default): wait forever.
    :param mujoco_batch: the fast path, as the sampler's, under MuJoCo >= 4, with the same observations,
        rewards, flags and infos: each worker advances its envs in one ``mujoco.batch`` call per step for envs
        that implement ``VectorisedMujocoEnv`` (the HalfCheetah and Ant families), or through the envs' own
        stepper for those that implement ``BatchSteppedEnv`` (Meta-World's benchmarks: each task class's envs
        of a worker step together; docs/vector.md says when they step one at a time instead).
        ``None`` (default): where possible (a worker whose envs differ in class steps them one at a time);
        ``True``: required (refused, naming why, where it cannot); ``False``: never.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, num_workers: Optional[int] = None,
                 start_method: Optional[str] = None, autoreset_mode: Any = AutoresetMode.NEXT_STEP,
                 copy: bool = True, observation_mode: str = "same", step_timeout: Optional[float] = None,
                 mujoco_batch: Optional[bool] = None, batch_threads: Optional[int] = None):
        self._pool: Optional[VectorEnvPool | InProcessVectorPool] = None
        self._task_env: Optional[gym.Env] = None
        self._pending: Optional[tuple] = None  # a reset_async's or call_async's (name, arguments)
        self.closed = False
        self.env_fns = list(env_fns)
        if not self.env_fns:
            raise ValueError("MultiTaskVectorEnv needs at least one env function")
        if observation_mode != "same":
            raise ValueError(f"MultiTaskVectorEnv supports observation_mode='same' only, got {observation_mode!r}")
        if num_workers is not None and (isinstance(num_workers, bool) or not isinstance(num_workers, int)
                                        or num_workers < 0):
            raise ValueError("num_workers must be an int >= 0 (0: the envs step in this process; None: the default "
                             f"layout), got {num_workers!r}")
        if batch_threads is not None and (isinstance(batch_threads, bool) or not isinstance(batch_threads, int)
                                          or batch_threads < 1):
            raise ValueError(f"batch_threads must be an int >= 1 (or None: one per usable CPU), got {batch_threads!r}")
        self.copy = copy
        self.autoreset_mode = autoreset_mode if isinstance(autoreset_mode, AutoresetMode) \
            else AutoresetMode(autoreset_mode)
        self.num_envs = len(self.env_fns)
        self.start_method = _start_method(start_method)
        self.step_timeout = checked_step_timeout(step_timeout)
        if self.step_timeout is not None and num_workers == 0:
            raise ValueError("step_timeout needs worker processes (a step in this process cannot be cut short): "
                             "pass num_workers >= 1, or leave step_timeout at None")
        self._guard = OneCallAtATime("MultiTaskVectorEnv")

        # As AsyncVectorEnv: the spaces and metadata of a first env built here, kept to draw tasks.
        env = self._task_env = self.env_fns[0]()
        self.metadata = dict(env.metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = env.render_mode
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        try:
            create_shared_memory(self.single_observation_space, n=1)
        except CustomSpaceError as e:
            # AsyncVectorEnv(shared_memory=True)'s refusal; a dynamic space (Graph, Sequence) raises
            # gymnasium's own TypeError from create_shared_memory, as there.
            raise ValueError(
                "Using `MultiTaskVectorEnv` caused an error: its observations travel through shared memory, which "
                f"gymnasium cannot create for {self.single_observation_space}"
            ) from e

        if mujoco_batch not in (None, True, False):
            raise ValueError(f"mujoco_batch must be None (where possible), True or False, got {mujoco_batch!r}")
        mujoco_batch, own_stepper, in_process = fast_path_choice(env, mujoco_batch)
        #: Whether the envs step through the fast path (each worker's whose envs all allow it, with None): the
        #: MuJoCo fast path's one ``mujoco.batch`` call, or the envs' own stepper (Meta-World's benchmarks).
        self.mujoco_batch = mujoco_batch is not False
        if num_workers is None:  # the sampler's default layout (settings.execution.ExecutionSettings.layout)
            cpus = usable_cpus()
            num_workers = 0 if (in_process or cpus == 1) and self.step_timeout is None else cpus
        if batch_threads is not None and num_workers != 0:
            raise ValueError(f"batch_threads applies when the envs step in this process (num_workers=0), not with "
                             f"{num_workers} worker processes, each of which steps its envs on one thread")
        #: Worker processes; 0 when the envs step in this process.
        self.num_workers = min(num_workers, self.num_envs)
        self._spec = VectorSpec(self.single_observation_space, self.single_action_space, self.num_envs,
                                max(1, self.num_workers), self.autoreset_mode.value, mujoco_batch,
                                own_stepper)
        try:
            if self.num_workers == 0:
                self._pool = InProcessVectorPool(self.env_fns, self._spec, batch_threads or usable_cpus())
            else:
                self._pool = VectorEnvPool(self.env_fns, self._spec, self.start_method, self.step_timeout)
        except BaseException:
            self.close()
            raise
        views = self._pool.views
        self._observation_memory = views.observation_memory
        # gymnasium reads Text and OneOf spaces out of shared memory as new tuples, not as views: those are
        # read again after every step (AsyncVectorEnv(shared_memory=True) reads them once, at its start).
        self._read_again = read_copies(self.single_observation_space)
        self._observations = views.observations
        self._actions = views.actions
        self._rewards, self._terminations, self._truncations = views.rewards, views.terminated, views.truncated
        self._reset_done = False
        self._stepping = False
        self._autoreset_envs = np.zeros(self.num_envs, dtype=np.bool_)

    # -- gymnasium's VectorEnv -------------------------------------------------

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: Optional[Dict[str, Any]] = None) -> tuple[Any, Dict[str, Any]]:
        """Reset every env (or those of ``options["reset_mask"]``); env ``i`` gets ``seed + i``
        for an int ``seed``, as in gymnasium."""
        with self._guard("reset"):
            self._check_open("reset")
            self._check_not_stepping("reset")
            if seed is None:
                seed = [None for _ in range(self.num_envs)]
            elif isinstance(seed, int):
                seed = [seed + i for i in range(self.num_envs)]
            if len(seed) != self.num_envs:
                raise ValueError(f"If seeds are passed as a list the length must match num_envs={self.num_envs} "
                                 f"but got length={len(seed)}.")
            mask = None
            if options is not None and "reset_mask" in options:
                mask = options.pop("reset_mask")
                check_reset_mask(mask, self.num_envs)
            replies = self._pool.reset_envs(seed, options, mask)
            self._autoreset_envs[mask if mask is not None else slice(None)] = False
            self._reset_done = True
            infos = self._assemble_infos(replies)
            return self._observation_batch(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        """Step every env with its action; autoreset as ``metadata["autoreset_mode"]`` says."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Hand the actions to the workers and return; ``step_wait`` collects the results."""
        with self._guard("step_async"):
            self._check_open("step_async")
            self._check_not_stepping("step_async")
            if not self._reset_done:
                raise VectorResetNeeded("Cannot call `step` before `reset`: reset the vector env first")
            if self.autoreset_mode == AutoresetMode.DISABLED and self._autoreset_envs.any():
                raise VectorResetNeeded(
                    f"env(s) {np.flatnonzero(self._autoreset_envs).tolist()} ended their episode and autoreset_mode "
                    "is DISABLED: reset them first, e.g. reset(options={'reset_mask': terminations | truncations})")
            if self._actions is not None and fits_buffer(actions, self._actions):
                self._actions[...] = actions
                self._pool.step_shared()
            else:  # checked here, before any env steps: SyncVectorEnv's errors, and the vector env usable after them
                self._pool.step_pickled(action_rows(self.single_action_space, self.action_space, self.num_envs,
                                                    actions))
            self._stepping = True

    def step_wait(self, timeout: Optional[float] = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray,
                                                                   Dict[str, Any]]:
        """The results of the step that ``step_async`` started (``timeout``: ``None`` only)."""
        with self._guard("step_wait"):
            self._check_open("step_wait")
            if not self._stepping:
                raise NoAsyncCallError("Calling `step_wait` without any prior call to `step_async`.", "step")
            if timeout is not None:
                raise NotImplementedError("MultiTaskVectorEnv.step_wait waits until the step is done: "
                                          "pass timeout=None")
            try:
                replies = self._pool.collect()
            finally:
                self._stepping = False
            infos = self._assemble_infos(replies)
            np.logical_or(self._terminations, self._truncations, out=self._autoreset_envs)
            return (self._observation_batch(), np.copy(self._rewards), np.copy(self._terminations),
                    np.copy(self._truncations), infos)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``env.get_wrapper_attr(name)`` of each env, called with the arguments if callable."""
        with self._guard("call"):
            return self._call(name, args, kwargs)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of each env."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` on each env: one value for all, or a list or tuple of one per env."""
        with self._guard("set_attr"):
            if not isinstance(values, (list, tuple)):
                values = [values for _ in range(self.num_envs)]
            if len(values) != self.num_envs:
                raise ValueError("Values must be a list or tuple with length equal to the number of environments. "
                                 f"Got `{len(values)}` values for {self.num_envs} environments.")
            payloads = [(name, list(values[r.start:r.stop])) for r in self._spec.ranges]
            raise_from_envs(self._request("set_attr", payloads))

    # AsyncVectorEnv's split reset and call: the work runs when the results are asked for, so that code
    # written for AsyncVectorEnv runs unchanged (one pending call at a time, gymnasium's errors).
    def reset_async(self, seed: int | Sequence[int | None] | None = None,
                    options: Optional[Dict[str, Any]] = None) -> None:
        """Start a :meth:`reset`; ``reset_wait`` returns its results."""
        self._begin("reset", {"seed": seed, "options": options})

    def reset_wait(self, timeout: Optional[float] = None) -> tuple[Any, Dict[str, Any]]:
        """The results of the reset that ``reset_async`` started (``timeout``: ``None`` only)."""
        return self.reset(**self._end("reset", timeout))

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Start a :meth:`call`; ``call_wait`` returns its results."""
        self._begin("call", (name, args, kwargs))

    def call_wait(self, timeout: Optional[float] = None) -> tuple[Any, ...]:
        """The results of the call that ``call_async`` started (``timeout``: ``None`` only)."""
        name, args, kwargs = self._end("call", timeout)
        return self.call(name, *args, **kwargs)

    def _begin(self, call: str, arguments: Any) -> None:
        with self._guard(f"{call}_async"):
            self._check_open(f"{call}_async")
            self._check_not_stepping(f"{call}_async")
            self._pending = (call, arguments)

    def _end(self, call: str, timeout: Optional[float]) -> Any:
        with self._guard(f"{call}_wait"):
            self._check_open(f"{call}_wait")
            if self._pending is None or self._pending[0] != call:
                raise NoAsyncCallError(f"Calling `{call}_wait` without any prior call to `{call}_async`.", call)
            if timeout is not None:
                raise NotImplementedError(f"MultiTaskVectorEnv.{call}_wait waits until the {call} is done: pass "
                                          "timeout=None")
            _, arguments = self._pending
            self._pending = None
            return arguments

    def render(self) -> tuple[Any, ...]:
        """Each env's ``render()``."""
        return self.call("render")

    def close_extras(self, **kwargs: Any) -> None:
        """End the workers and free the shared memory (``close`` is idempotent)."""
        if self._pool is not None:
            self._pool.close()
        if self._task_env is not None:
            task_env, self._task_env = self._task_env, None
            task_env.close()

    # -- meta-learning tasks -----------------------------------------------------

    def reset_tasks(self, tasks: Sequence[Any]) -> None:
        """Give env ``i`` the task ``tasks[i]`` (``env.unwrapped.reset_task``); it takes effect
        from the env's next reset (call ``reset`` after it)."""
        with self._guard("reset_tasks"):
            self._check_open("reset_tasks")
            self._check_not_stepping("reset_tasks")
            if len(tasks) != self.num_envs:
                raise ValueError(f"reset_tasks() got {len(tasks)} tasks for {self.num_envs} envs: one per env")
            raise_from_envs(self._pool.reset_tasks(list(tasks)))

    def sample_tasks(self, num_tasks: int, *, seed: Optional[int] = None) -> List[Any]:
        """Draw ``num_tasks`` tasks from the envs' task distribution
        (``env.unwrapped.sample_tasks``, on an env of this process). ``seed`` seeds the draw;
        without it the draws go on from the last seeded one."""
        with self._guard("sample_tasks"):
            self._check_open("sample_tasks")
            if seed is not None:
                self._task_env.reset(seed=seed)
            return list(self._task_env.unwrapped.sample_tasks(num_tasks))

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """Each env's ``np_random_seed``, as ``SyncVectorEnv`` and ``AsyncVectorEnv`` give them."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """Each env's ``np_random`` (from worker processes, copies), as ``AsyncVectorEnv`` gives them."""
        return self.get_attr("np_random")

    @property
    def worker_pids(self) -> List[int]:
        """Process ids of the worker processes."""
        return [] if self._pool is None else self._pool.worker_pids

    @property
    def env_pool(self) -> Optional[VectorEnvPool | InProcessVectorPool]:
        """The pool that steps the envs, for inspection (an in-process one's ``child``); ``None`` before use."""
        return self._pool

    # -- internals ---------------------------------------------------------------

    def _call(self, name: str, args: tuple, kwargs: dict) -> tuple[Any, ...]:
        workers = range(self._spec.num_workers)
        replies = self._request("call", [(name, args, kwargs)] * len(workers))
        raise_from_envs(replies)
        return tuple(value for w in workers for value in replies[w])

    def _request(self, kind: str, payloads: List[Any]) -> Dict[int, Any]:
        self._check_open(kind)
        self._check_not_stepping(kind)
        return self._pool.request(kind, payloads)

    def _observation_batch(self) -> Any:
        if self._read_again:
            self._observations = read_from_shared_memory(self.single_observation_space, self._observation_memory,
                                                         n=self.num_envs)
        return deepcopy(self._observations) if self.copy else self._observations

    def _assemble_infos(self, replies: Dict[int, Any]) -> Dict[str, Any]:
        """gymnasium's vector infos, env by env in order, as ``SyncVectorEnv`` builds them."""
        infos: Dict[str, Any] = {}
        for w in sorted(replies):
            reply = replies[w]
            if isinstance(reply, InfoColumns):
                reply.add_to(infos, self.num_envs)
                continue
            for env_index, info in reply:
                infos = self._add_info(infos, info, env_index)
        return infos

    def _check_open(self, call: str) -> None:
        if self.closed or self._pool is None or self._pool.closed:
            raise VectorEnvClosedError(
                f"{call}() on a closed MultiTaskVectorEnv (close() was called, or a worker failed); create a new one")

    def _check_not_stepping(self, call: str) -> None:
        pending = "step" if self._stepping else None if self._pending is None else self._pending[0]
        if pending is not None:
            raise AlreadyPendingCallError(
                f"Calling `{call}` while waiting for a pending call to `{pending}` to complete: call "
                f"`{pending}_wait` first", pending)

    def __getstate__(self) -> None:
        raise TypeError("a MultiTaskVectorEnv cannot be pickled: it holds worker processes (or, with num_workers=0, "
                        "live simulations) and shared memory; pickle its env functions and build a new one from them")

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self.close()


def make_vector_env(env_id: str, num_envs: int = 1, *, num_workers: Optional[int] = None,
                    start_method: Optional[str] = None, autoreset_mode: Any = AutoresetMode.NEXT_STEP,
                    copy: bool = True, step_timeout: Optional[float] = None, mujoco_batch: Optional[bool] = None,
                    batch_threads: Optional[int] = None, **env_kwargs: Any) -> MultiTaskVectorEnv:
    """A :class:`MultiTaskVectorEnv` of ``num_envs`` envs ``gymnasium.make(env_id, **env_kwargs)``:
    the ``vector_entry_point`` of the registered meta-envs, so that
    ``gymnasium.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point", num_workers=2)``
    builds one (gymnasium passes the vector env's arguments among the env's keyword arguments)."""
    env_fn = make_env(env_id, **env_kwargs)
    return MultiTaskVectorEnv([env_fn] * num_envs, num_workers=num_workers, start_method=start_method,
                              autoreset_mode=autoreset_mode, copy=copy, step_timeout=step_timeout,
                              mujoco_batch=mujoco_batch, batch_threads=batch_threads)
