"""MultiTaskSampler: tasks in, per-task batches of episodes out."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import cloudpickle
import gymnasium as gym
import numpy as np
import torch

from maml_rl.adaptation import InnerLoop, inner_step, unstack_task_params
from maml_rl.envs.vectorised import VectorisedMujocoEnv
from maml_rl.episodes import BatchEpisodes, check_loss_averaging
from maml_rl.hyperparameters import DEFAULTS
from maml_rl.policies.policy import expand_params

from .action_noise import check_action_mode
from .backend import RolloutBackend, RolloutSpec
from .child_env import HORIZON
from .errors import EnvOutputError, SamplerClosedError
from .local_backend import LocalBackend
from .vector_env import usable_cpus

logger = logging.getLogger(__name__)

Params = Dict[str, torch.Tensor]
ParamsArg = Union[None, Params, Sequence[Params]]
START_METHODS = ("fork", "forkserver", "spawn")
BACKENDS = ("local", "ray")
# Horizon of an env with no time limit of its own: the buffers need one.
NO_TIME_LIMIT_CAP = 1000


class MultiTaskSampler:
    """Samples batches of episodes for many tasks at once, in parallel.

    For K tasks and ``batch_size`` episodes each, a call uses ``K * batch_size``
    env slots; slot ``j`` runs one episode of task ``j // batch_size``. The
    slots are split into contiguous ranges, one per ChildEnv worker process,
    which steps its envs serially and exchanges actions, observations and
    rewards with this process through shared memory, one wake-up per worker
    per step. The policy runs here, batched over every slot, with each task's
    own parameters after adaptation.

    Everything is reproducible from ``seed``: env seeds and action noise
    derive from the seed, the number of rollouts so far and the slot, so the
    same seed gives bit-identical episodes whatever ``num_workers``, the start
    method or ``partial``.

    :param env_name: a registered gymnasium id (``import maml_rl.envs``
        registers this package's), used with ``env_kwargs`` unless ``env_fn``
        is given.
    :param env_kwargs: keyword arguments for ``gymnasium.make``.
    :param batch_size: episodes per task per rollout.
    :param policy: a ``torch.nn.Module`` mapping observations (and an optional
        ``params=`` dict) to a ``torch.distributions.Distribution``.
    :param baseline: a baseline with ``fit(episodes)`` and
        ``forward(episodes)`` (e.g. ``LinearFeatureBaseline``), used to
        compute advantages; ``None`` skips them.
    :param env_fn: any picklable callable returning a meta-learning env
        (with ``sample_tasks`` and ``reset_task``): a class, a function, a
        lambda or a ``functools.partial``; replaces ``env_name``/``env_kwargs``.
    :param seed: seed of everything random in sampling; ``None`` draws one
        (readable as ``sampler.seed``).
    :param num_workers: ChildEnv processes; ``0`` steps the envs in this
        process. Default: the number of CPUs this process may use, except on
        the MuJoCo fast path, where the default is ``0`` with one
        ``mujoco.batch`` thread per CPU (faster than as many processes).
    :param start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; default
        forkserver where available, else spawn.
    :param partial: if true, step each worker again as soon as it is ready
        instead of waiting for all of them at every step (see the README for
        when this pays).
    :param max_episode_steps: rollout horizon; default the env's
        ``spec.max_episode_steps`` (or its ``TimeLimit``). For an env with no
        time limit at all, episodes must end on their own within
        ``NO_TIME_LIMIT_CAP`` (1000) steps, or sampling fails saying so.
    :param mujoco_batch: the MuJoCo fast path, for envs that implement
        ``maml_rl.envs.vectorised.VectorisedMujocoEnv`` (this package's
        HalfCheetah and Ant envs): each worker steps all its envs with one
        ``mujoco.batch`` call per step, with bit-identical results. ``None``
        (default) uses it where it can, and logs one line saying why not for
        an env that implements it; ``True`` requires it (``ValueError`` if it
        cannot be used); ``False`` steps one env at a time.
    :param batch_threads: threads of each fast-path ``Batch``. Default: 1
        per worker process; with ``num_workers=0``, the CPUs this process may
        use (the batch then runs them in this process).
    :param info_keys: keys of ``step()``'s ``info`` whose values (numbers or
        bools, at every step) the workers carry through the shared buffers
        into ``BatchEpisodes.infos``, e.g. ``("success",)``. Default: the
        env's own ``info_keys`` attribute (Meta-World's envs: ``success``),
        else none. Carrying any steps the envs one at a time (the MuJoCo
        fast path computes no info).

    Example::

        import maml_rl.envs
        from maml_rl.baseline import LinearFeatureBaseline
        from maml_rl.policies import NormalMLPPolicy
        from maml_rl.samplers import MultiTaskSampler

        if __name__ == "__main__":
            policy = NormalMLPPolicy(2, 2, hidden_sizes=(64, 64))
            with MultiTaskSampler("2DNavigation-v0", {}, 20, policy,
                                  LinearFeatureBaseline(2), seed=1) as sampler:
                tasks = sampler.sample_tasks(8)
                train, valid = sampler.sample(tasks, num_steps=1, fast_lr=0.1)

    The sampler is not thread-safe: one thread at a time may use it (a second
    concurrent call raises ``RuntimeError``).
    """

    def __init__(
        self,
        env_name: Optional[str] = None,
        env_kwargs: Optional[dict] = None,
        batch_size: int = 20,
        policy: Optional[torch.nn.Module] = None,
        baseline: Any = None,
        *,
        env_fn: Optional[Callable[[], gym.Env]] = None,
        seed: Optional[int] = None,
        num_workers: Optional[int] = None,
        start_method: Optional[str] = None,
        partial: bool = False,
        max_episode_steps: Optional[int] = None,
        mujoco_batch: Optional[bool] = None,
        batch_threads: Optional[int] = None,
        backend: str = "local",
        ray_address: Optional[str] = None,
        ray_actors: Optional[int] = None,
        ray_cpus_per_actor: Optional[int] = None,
        info_keys: Optional[Sequence[str]] = None,
    ):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if policy is None or not callable(policy):
            raise TypeError(f"policy must be a torch.nn.Module returning a Distribution, got {policy!r}")
        self.batch_size = batch_size
        self.policy = policy
        self.baseline = baseline
        self.partial = bool(partial)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if backend != "ray" and (ray_address, ray_actors, ray_cpus_per_actor) != (None, None, None):
            raise ValueError("ray_address, ray_actors and ray_cpus_per_actor apply to backend='ray' only")
        self.backend = backend
        self.num_workers = _check_num_workers(num_workers)
        self.start_method = _check_start_method(start_method)
        self.seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else int(seed)

        self.env_fn = _resolve_env_fn(env_name, env_kwargs, env_fn)
        self._env_fn_bytes = _pickle_env_fn(self.env_fn)
        # One env in this process: the task distribution, the spaces, the horizon.
        self.env = self.env_fn()
        _check_meta_env(self.env)
        self.env.reset(seed=self.seed)
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self._env_name = getattr(self.env.spec, "id", None) or type(self.env.unwrapped).__name__
        self.horizon, self._horizon_is_cap = _resolve_horizon(self.env, max_episode_steps)
        self.info_keys = _resolve_info_keys(self.env, info_keys)
        self._buffer_spec = _buffer_spec(self.observation_space, self.action_space, self.horizon, self.info_keys)
        self.mujoco_batch = _resolve_mujoco_batch(self.env, self._env_name, mujoco_batch, self.info_keys)
        if num_workers is None and self.mujoco_batch and backend == "local":
            # Measured (benchmarks/sampler_throughput.py): Batch's threads in this
            # process beat as many worker processes, at 40 and at 800 slots.
            self.num_workers = 0
        self._batch_threads = _resolve_batch_threads(self.mujoco_batch, self.num_workers, batch_threads)

        self._backend: RolloutBackend
        if backend == "local":
            spec = RolloutSpec(
                env_fn_bytes=self._env_fn_bytes, env_name=self._env_name, buffer_spec=self._buffer_spec,
                batch_size=batch_size, partial=self.partial, start_method=self.start_method,
                num_workers=self.num_workers, batch_threads=self._batch_threads, mujoco_batch=self.mujoco_batch,
            )
            self._backend = LocalBackend(spec, self.env_fn, policy, self.action_space)
        else:
            # Each actor lays out its own CPUs: the local defaults are this machine's.
            spec = RolloutSpec(
                env_fn_bytes=self._env_fn_bytes, env_name=self._env_name, buffer_spec=self._buffer_spec,
                batch_size=batch_size, partial=self.partial, start_method=self.start_method,
                num_workers=num_workers, batch_threads=batch_threads, mujoco_batch=self.mujoco_batch,
            )
            from .ray_backend import RayBackend

            self._backend = RayBackend(spec, policy, self.action_space, address=ray_address, num_actors=ray_actors,
                                       cpus_per_actor=ray_cpus_per_actor)
        self._num_rollouts = 0
        self.closed = False
        # Not thread-safe by design (one shared set of buffers and workers):
        # a second concurrent call is refused rather than left to corrupt both.
        self._lock = threading.Lock()
        self._busy_with = ""

    # -- public API ---------------------------------------------------------

    def sample_tasks(self, num_tasks: int) -> List[Any]:
        """Draw ``num_tasks`` tasks from the env's task distribution (seeded)."""
        return list(self.env.unwrapped.sample_tasks(num_tasks))

    def sample(
        self,
        tasks: Sequence[Any],
        num_steps: Optional[int] = None,
        fast_lr: Optional[float] = None,
        gamma: float = DEFAULTS.gamma,
        gae_lambda: float = DEFAULTS.gae_lambda,
        device: Union[str, torch.device] = "cpu",
        averaging: Optional[str] = None,
        *,
        inner_loop: Optional[InnerLoop] = None,
        valid_actions: str = "sample",
    ) -> Tuple[List[List[BatchEpisodes]], List[BatchEpisodes]]:
        """Roll out, adapt, and roll out again with the adapted parameters.

        The adaptation is :class:`~maml_rl.adaptation.InnerLoop`'s: ``num_steps``
        REINFORCE steps of size ``fast_lr``, with ``averaging`` (``"step"`` or
        ``"episode"``) weighing the steps of a task in the inner loss and the
        advantage normalisation. Give either those three (defaults from
        :data:`maml_rl.hyperparameters.DEFAULTS`) or ``inner_loop``, e.g. a
        meta-learner's own ``learner.inner_loop``, so that both adapt alike.

        ``valid_actions="mean"`` rolls out the adapted policies' most likely
        actions after the last step (evaluation, as Meta-World's protocol
        does); the adaptation episodes are always sampled.

        :returns: ``(train_episodes, valid_episodes)``: ``train_episodes[step][task]``
            are the episodes gathered before inner step ``step`` and
            ``valid_episodes[task]`` those gathered after the last step. With
            ``num_steps=0`` there is no adaptation: ``train_episodes`` is empty
            and ``valid_episodes`` uses the current policy. Every batch records
            the parameters that sampled it (``behaviour_params``).
        """
        inner_loop = _resolve_inner_loop(inner_loop, num_steps, fast_lr, averaging)
        check_action_mode(valid_actions)
        if inner_loop.num_steps > 0 and self.baseline is None:
            raise ValueError(
                "sample() adapts with advantages, which need a baseline: create the sampler with "
                "baseline=LinearFeatureBaseline(observation_size), or use num_steps=0"
            )
        with self._in_use("sample"):
            params: ParamsArg = None
            stacked: Optional[Params] = None
            train_episodes = []
            for _ in range(inner_loop.num_steps):
                episodes = self._rollout(tasks, params, gamma, gae_lambda, device, inner_loop.averaging, inner_loop)
                train_episodes.append(episodes)
                stacked = self._adapt(episodes, stacked, inner_loop, device)
                params = unstack_task_params(stacked)
            valid_episodes = self._rollout(tasks, params, gamma, gae_lambda, device, inner_loop.averaging, inner_loop,
                                           valid_actions)
        return train_episodes, valid_episodes

    def rollout(
        self,
        tasks: Sequence[Any],
        params: ParamsArg = None,
        *,
        gamma: float = DEFAULTS.gamma,
        gae_lambda: float = DEFAULTS.gae_lambda,
        device: Union[str, torch.device] = "cpu",
        averaging: str = DEFAULTS.loss_averaging,
        actions: str = "sample",
    ) -> List[BatchEpisodes]:
        """Roll out ``batch_size`` episodes of each task under given parameters.

        The lower-level call for code with its own inner loop.

        :param tasks: tasks from ``sample_tasks`` (or any the env accepts).
        :param params: ``None`` for the policy's own parameters, one dict of
            parameters for every task, or a list with one dict (or ``None``)
            per task.
        :param actions: ``"sample"`` draws from the policy; ``"mean"`` takes
            its most likely action (Normal mean, categorical mode) at every
            step, for evaluation. Such episodes are marked
            (``actions_from == "mean"``) and refused by policy-gradient steps.
        :returns: one ``BatchEpisodes`` per task, in the order of ``tasks``,
            with advantages computed when a baseline was given (normalised
            with ``averaging``'s weighting), and a copy of the parameters that
            sampled them as ``behaviour_params``.
        """
        check_loss_averaging(averaging)
        check_action_mode(actions)
        with self._in_use("rollout"):
            return self._rollout(tasks, params, gamma, gae_lambda, device, averaging, None, actions)

    def _rollout(self, tasks, params, gamma, gae_lambda, device, averaging, inner_loop,
                 actions: str = "sample") -> List[BatchEpisodes]:
        if self.closed:
            raise SamplerClosedError("the sampler is closed; create a new one")
        tasks = list(tasks)
        if not tasks:
            raise ValueError("rollout() needs at least one task")
        per_task = _per_task_params(params, len(tasks))
        call = self._num_rollouts
        self._num_rollouts += 1
        try:
            trajectories = self._backend.run(tasks, per_task, self.seed, call, device, actions=actions)
            self._check_outputs(trajectories, tasks)
            episodes = self._assemble(trajectories, tasks, gamma, device)
        except BaseException:
            # Workers interrupted mid-step cannot be trusted; the next call starts new ones.
            self._backend.close()
            raise
        for batch, behaviour in zip(episodes, _behaviour_params(self.policy, per_task)):
            batch.behaviour_params = behaviour
            batch.inner_loop = inner_loop
            batch.actions_from = actions
        if self.baseline is not None:
            for batch in episodes:
                self.baseline.fit(batch)
                batch.compute_advantages(self.baseline, gae_lambda=gae_lambda, normalize=True, averaging=averaging)
        return episodes

    @property
    def backend_stats(self) -> dict:
        """What the last rollout moved, on ``backend="ray"``: the number of actors,
        ``puts`` and ``put_bytes`` (the parameters, put into the object store once),
        ``result_bytes`` (the trajectory arrays the actors returned), ``reruns``
        (task groups re-run after losing an actor). Empty for the local backend."""
        return dict(getattr(self._backend, "last_rollout", {}))

    def describe_backend(self) -> str:
        """Where the rollouts run, in words (for the Ray backend: its actors and their nodes)."""
        if self.backend == "ray":
            return f"{len(self._backend.names)} Ray sampling actor(s): {', '.join(self._backend.names)}"
        return f"{self.num_workers} worker process(es)" if self.num_workers else "this process"

    def state_dict(self) -> dict:
        """What a resumed run needs to continue exactly: the seed, the number
        of rollouts so far and the state of the task generator."""
        return {
            "seed": self.seed,
            "num_rollouts": self._num_rollouts,
            "task_rng": self.env.unwrapped.np_random.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state_dict()``: later tasks and episodes are those
        the original sampler would have produced."""
        self.seed = int(state["seed"])
        self._num_rollouts = int(state["num_rollouts"])
        self.env.unwrapped.np_random.bit_generator.state = state["task_rng"]

    def close(self) -> None:
        """End the worker processes and release the shared memory; idempotent."""
        if not self.closed:
            self.closed = True
            self._backend.close()
            self.env.close()

    def __enter__(self) -> "MultiTaskSampler":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"MultiTaskSampler(env_fn={self.env_fn!r}, batch_size={self.batch_size}, "
            f"num_workers={self.num_workers}, start_method={self.start_method!r}, "
            f"partial={self.partial}, mujoco_batch={self.mujoco_batch}, seed={self.seed})"
        )

    # -- internals ----------------------------------------------------------

    @contextlib.contextmanager
    def _in_use(self, call: str):
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                f"MultiTaskSampler.{call}() was called while {self._busy_with} is still running: "
                "the sampler is not thread-safe. Use one sampler per thread, or a lock around its calls."
            )
        self._busy_with = f"{call}() in thread {threading.current_thread().name!r}"
        try:
            yield
        finally:
            self._lock.release()

    def _adapt(self, episodes: List[BatchEpisodes], stacked: Optional[Params], inner_loop: InnerLoop, device) -> Params:
        """One inner step of every task, through the same function as the meta-learner's."""
        if stacked is None:
            own = OrderedDict((name, p.detach()) for name, p in _meta_parameters(self.policy))
            stacked = expand_params(own, len(episodes))
        # Leaves: sampling needs no meta-gradient.
        leaves = OrderedDict((name, p.detach().requires_grad_()) for name, p in stacked.items())
        batch = inner_loop.task_batch(episodes, device)
        with torch.enable_grad():
            new = inner_step(self.policy, batch, leaves, inner_loop.fast_lr, first_order=True)
        return OrderedDict((name, p.detach()) for name, p in new.items())

    def _check_outputs(self, views, tasks: List[Any]) -> None:
        """Refuse what the env returned that would silently poison the losses: non-finite
        observations or rewards, and, for an env without a time limit, episodes it never ended."""
        num_slots = len(tasks) * self.batch_size
        lengths = views.lengths[:num_slots]
        horizon = int(lengths.max())
        valid = np.arange(horizon)[:, None] < lengths[None, :]
        observations = views.observations[:horizon, :num_slots]
        for name, values in (("observation", observations), ("reward", views.rewards[:horizon, :num_slots])):
            if not np.issubdtype(values.dtype, np.floating):
                continue
            finite = np.isfinite(values).reshape(horizon, num_slots, -1).all(axis=2)
            bad = np.argwhere(valid & ~finite)
            if len(bad):
                t, slot = (int(i) for i in bad[0])
                # Observation row t comes from step t - 1 (row 0 from reset); reward row t from step t.
                step = t if name == "reward" else t - 1
                where = "from reset()" if step < 0 else f"from step() {step}"
                stored_as = "its observation space's dtype" if name == "observation" else "rewards"
                raise EnvOutputError(
                    f"{self._env_name} returned a non-finite {name} {values[t, slot].tolist()!r} {where} "
                    f"of env slot {slot} (task {tasks[slot // self.batch_size]!r}), in {len(bad)} place(s) in all. "
                    f"Check the env; a value beyond the range of {values.dtype} ({stored_as}) also becomes inf."
                )
        if self._horizon_is_cap:
            unended = np.flatnonzero(views.end_reason[:num_slots] == HORIZON)
            if len(unended):
                slot = int(unended[0])
                raise EnvOutputError(
                    f"{self._env_name} has no time limit and did not end the episode of env slot {slot} "
                    f"(task {tasks[slot // self.batch_size]!r}) within {self.horizon} steps, the sampler's safety "
                    "cap: pass max_episode_steps= to the sampler (or wrap the env in gymnasium's TimeLimit)."
                )

    def _assemble(self, views, tasks, gamma, device) -> List[BatchEpisodes]:
        """One masked copy of the used part of the buffers, laid out task-major
        so that each task's ``[T, B, ...]`` tensors are contiguous."""
        K, B = len(tasks), self.batch_size
        lengths = torch.from_numpy(views.lengths[:K * B].copy())
        horizon = int(lengths.max())
        invalid = (torch.arange(horizon).unsqueeze(1) >= lengths.unsqueeze(0)).view(horizon, K, B).transpose(0, 1)

        def per_task(array: np.ndarray) -> torch.Tensor:
            tensor = torch.from_numpy(array[:horizon, :K * B])
            rest = tensor.shape[2:]
            # Always a copy: `.contiguous()` would return a view of the shared
            # buffer when K == 1 or horizon == 1, and the next rollout would
            # overwrite the episodes handed out by this one.
            tensor = tensor.reshape(horizon, K, B, *rest).transpose(0, 1).clone(memory_format=torch.contiguous_format)
            # Rows past an episode's end hold stale values from earlier calls.
            return tensor.masked_fill_(invalid.reshape(K, horizon, B, *([1] * len(rest))), 0)

        observations, actions, rewards = (per_task(a) for a in (views.observations, views.actions, views.rewards))
        lengths = lengths.view(K, B)
        infos = per_task(views.infos) if self.info_keys else None
        return [
            BatchEpisodes(observations[k], actions[k], rewards[k], lengths[k], task=task, gamma=gamma, device=device,
                          infos=None if infos is None else
                          {key: infos[k, ..., i] for i, key in enumerate(self.info_keys)})
            for k, task in enumerate(tasks)
        ]


def _check_num_workers(num_workers: Optional[int]) -> int:
    if num_workers is None:
        return usable_cpus()
    if not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"num_workers must be an int >= 0 (0 steps the envs in this process), got {num_workers!r}")
    return num_workers


def _check_start_method(start_method: Optional[str]) -> str:
    available = mp.get_all_start_methods()
    if start_method is None:
        return "forkserver" if "forkserver" in available else "spawn"
    if start_method not in available:
        raise ValueError(f"start_method {start_method!r} is not available here; choose one of {available}")
    return start_method


def _resolve_env_fn(env_name, env_kwargs, env_fn) -> Callable[[], gym.Env]:
    if env_fn is not None:
        if env_name is not None:
            raise ValueError("give either env_name (with env_kwargs) or env_fn, not both")
        if isinstance(env_fn, gym.Env):
            raise TypeError(
                f"env_fn must be a factory that builds the env, got the env {env_fn!r} itself: "
                "pass its class or a function (e.g. `lambda: MyEnv(...)`) so each worker builds its own"
            )
        if not callable(env_fn):
            raise TypeError(f"env_fn must be a callable returning a gymnasium env, got {env_fn!r}")
        return env_fn
    if env_name is None:
        raise ValueError("give env_name (a registered gymnasium id) or env_fn (a factory)")
    from maml_rl.envs import make_env

    return make_env(env_name, **(env_kwargs or {}))


def _pickle_env_fn(env_fn: Callable[[], gym.Env]) -> bytes:
    try:
        return cloudpickle.dumps(env_fn)
    except Exception as exc:
        raise TypeError(
            f"env_fn {env_fn!r} cannot be pickled for the worker processes ({type(exc).__name__}: {exc}). "
            "It, or something it refers to, holds an object that cannot leave this process "
            "(a lock, a socket, an open file, a live simulator). Pass a factory that creates those "
            "objects when called, e.g. `lambda: MyEnv(...)` or `functools.partial(MyEnv, ...)`."
        ) from exc


def _check_meta_env(env: gym.Env) -> None:
    missing = [name for name in ("sample_tasks", "reset_task") if not hasattr(env.unwrapped, name)]
    if missing:
        raise TypeError(
            f"{env!r} is not a meta-learning environment: its unwrapped env lacks {', '.join(missing)}. "
            "Meta-learning envs define sample_tasks(num_tasks) -> list and reset_task(task)."
        )


def _resolve_horizon(env: gym.Env, max_episode_steps: Optional[int]) -> Tuple[int, bool]:
    """The rollout horizon, and whether it is only the safety cap of an env without a time limit."""
    horizon = max_episode_steps
    if horizon is None:
        horizon = getattr(env.spec, "max_episode_steps", None)
    wrapper = env
    while horizon is None and isinstance(wrapper, gym.Wrapper):
        if isinstance(wrapper, gym.wrappers.TimeLimit):
            horizon = wrapper._max_episode_steps
        wrapper = wrapper.env
    if horizon is None:
        # gymnasium does not require a TimeLimit: episodes the env ends itself are fine,
        # one that runs past the cap is an error (see _check_outputs).
        return NO_TIME_LIMIT_CAP, True
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"max_episode_steps must be a positive int, got {horizon!r}")
    return horizon, False


def _resolve_info_keys(env: gym.Env, requested: Optional[Sequence[str]]) -> Tuple[str, ...]:
    """The info keys to carry: those asked for, else the env's own ``info_keys``."""
    keys = getattr(env.unwrapped, "info_keys", ()) if requested is None else requested
    if isinstance(keys, str) or not all(isinstance(key, str) for key in keys):
        raise ValueError(f"info_keys must be a sequence of str keys of step()'s info, e.g. ('success',), got {keys!r}")
    keys = tuple(keys)
    if len(set(keys)) != len(keys):
        raise ValueError(f"info_keys has a key twice: {keys!r}")
    return keys


def _resolve_mujoco_batch(env: gym.Env, env_name: str, requested: Optional[bool], info_keys: Sequence[str] = ()) -> bool:
    """Whether the workers step ``env`` through the MuJoCo fast path."""
    if requested not in (None, True, False):
        raise ValueError(f"mujoco_batch must be None (where possible), True or False, got {requested!r}")
    if requested is False:
        return False
    if info_keys and isinstance(env.unwrapped, VectorisedMujocoEnv):
        if requested:
            raise ValueError(f"mujoco_batch=True, but info_keys={tuple(info_keys)!r} are asked for: the MuJoCo fast "
                             "path computes no step info; pass info_keys=() or mujoco_batch=None")
        return False
    if not isinstance(env.unwrapped, VectorisedMujocoEnv):
        if requested:
            raise ValueError(
                f"mujoco_batch=True, but {env_name} does not implement maml_rl.envs.vectorised.VectorisedMujocoEnv; "
                "leave mujoco_batch at None to step it one env at a time"
            )
        return False
    from .batched_child_env import batch_support

    reason = batch_support(env)
    if reason is None:
        return True
    if requested:
        raise ValueError(f"mujoco_batch=True, but the MuJoCo fast path cannot step {env_name}: {reason}")
    logger.warning("MultiTaskSampler: stepping %s one env at a time, without the MuJoCo fast path: %s", env_name, reason)
    return False


def _resolve_batch_threads(fast_path: bool, num_workers: int, requested: Optional[int]) -> Optional[int]:
    """Threads per fast-path ``Batch``, or ``None`` for the per-env path."""
    if requested is not None and (isinstance(requested, bool) or not isinstance(requested, int) or requested < 1):
        raise ValueError(f"batch_threads must be a positive int, got {requested!r}")
    if not fast_path:
        return None
    if requested is not None:
        return requested
    return usable_cpus() if num_workers == 0 else 1


def _buffer_spec(observation_space: gym.Space, action_space: gym.Space, horizon: int,
                 info_keys: Sequence[str] = ()) -> dict:
    if not isinstance(observation_space, gym.spaces.Box):
        raise TypeError(f"the sampler needs a Box observation space, got {observation_space}")
    if isinstance(action_space, gym.spaces.Discrete):
        action_shape, action_dtype = (), np.int64
    elif isinstance(action_space, gym.spaces.Box):
        action_shape, action_dtype = action_space.shape, np.float32
    else:
        raise TypeError(f"the sampler supports Box and Discrete action spaces, got {action_space}")
    return dict(
        horizon=horizon,
        observation_shape=observation_space.shape,
        observation_dtype=observation_space.dtype,
        action_shape=action_shape,
        action_dtype=action_dtype,
        info_keys=tuple(info_keys),
    )


def _per_task_params(params: ParamsArg, num_tasks: int) -> List[Optional[Params]]:
    if params is None or isinstance(params, dict):
        return [params] * num_tasks
    params = list(params)
    if len(params) != num_tasks:
        raise ValueError(f"got {len(params)} parameter sets for {num_tasks} tasks")
    return params


def _resolve_inner_loop(inner_loop: Optional[InnerLoop], num_steps, fast_lr, averaging) -> InnerLoop:
    if inner_loop is not None:
        given = [name for name, value in (("num_steps", num_steps), ("fast_lr", fast_lr), ("averaging", averaging))
                 if value is not None]
        if given:
            raise ValueError(f"give inner_loop or {', '.join(given)}, not both: inner_loop already sets them")
        if not isinstance(inner_loop, InnerLoop):
            raise TypeError(f"inner_loop must be a maml_rl.adaptation.InnerLoop, got {inner_loop!r}")
        return inner_loop
    return InnerLoop(
        fast_lr=DEFAULTS.fast_lr if fast_lr is None else fast_lr,
        num_steps=DEFAULTS.num_steps if num_steps is None else num_steps,
        averaging=DEFAULTS.loss_averaging if averaging is None else averaging,
    )


def _meta_parameters(policy: torch.nn.Module):
    named = getattr(policy, "named_meta_parameters", None)
    return named() if named is not None else ((n, p) for n, p in policy.named_parameters() if p.requires_grad)


def _behaviour_params(policy: torch.nn.Module, per_task: List[Optional[Params]]) -> List[Params]:
    """A detached copy of the parameters each task was sampled with (one copy per distinct dict)."""
    copies: Dict[int, Params] = {}
    out = []
    for params in per_task:
        key = id(params)
        if key not in copies:
            source = _meta_parameters(policy) if params is None else params.items()
            copies[key] = OrderedDict((name, p.detach().clone()) for name, p in source)
        out.append(copies[key])
    return out
