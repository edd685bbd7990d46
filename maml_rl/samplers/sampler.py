"""MultiTaskSampler: tasks in, per-task batches of episodes out.

The facade of the sampler's layers (``docs/architecture.md``): it checks its arguments once
(``settings/``), asks a backend for each rollout (``backends``), and turns the trajectories into
checked episodes (``trajectories``); it knows nothing of adaptation, nor of advantages.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Union

import gymnasium as gym
import numpy as np
import torch

from maml_rl.data.episodes import BatchEpisodes
from maml_rl.config.hyperparameters import DEFAULTS
from maml_rl.policies.recurrent import is_recurrent
from maml_rl.utils.seeding import draw_seed
from maml_rl.data.transitions import Transitions
from maml_rl.data.trials import TrialBatch

from .backends.base import RolloutBackend
from .backends.local import LocalBackend
from .rollout.actions import check_policy
from .errors import SamplerClosedError
from .exclusive import OneCallAtATime
from .inspection import SamplerInspection
from .rollout.request import ActionMode, ParamsArg, RolloutRequest, TaskParams, check_tasks_picklable
from .rollout.trial import Trial, refuse_recurrent, trial_request
from .settings.arguments import check_gamma, check_state
from .settings.execution import RayOptions, local_layout, resolve_settings
from .settings.workload import describe_workload, resolve_env_fn
from .conditioning import check_conditioning_size, checked_conditioning
from .trajectories import check_outputs, to_episodes, to_transitions, to_trials

class MultiTaskSampler(SamplerInspection):
    """Samples batches of episodes for many tasks at once, in parallel.

    For K tasks and ``batch_size`` episodes each, a call uses ``K * batch_size``
    env slots, slot ``j`` running one episode of task ``j // batch_size``, in
    ChildEnv worker processes over shared memory; the policy runs here,
    batched over every slot with each task's own parameters. The same
    ``seed`` gives bit-identical episodes whatever ``num_workers``, the start
    method, ``partial``, the fast path or the backend.

    Every argument is described in ``docs/sampler.md`` ("API"); in short:

    :param env_name, env_kwargs: a registered gymnasium id and ``gymnasium.make``'s keywords
        (``import maml_rl.envs`` registers this package's); or ``env_fn``, any picklable
        callable returning a meta-learning env (``sample_tasks``, ``reset_task``).
    :param batch_size: episodes per task per rollout.
    :param policy: a ``torch.nn.Module`` mapping observations (and an optional ``params=``
        dict) to a ``torch.distributions.Distribution``.
    :param baseline: pytorch-maml-rl's argument, kept as ``sampler.baseline``: the baseline
        ``maml_rl.metalearners.sample_adapt_sample`` fits when given none. The sampler never fits it.
    :param seed: seed of everything random in sampling; ``None`` draws one (``sampler.seed``).
    :param num_workers: ChildEnv processes (``0``: step the envs in this process); default one
        per usable CPU, ``0`` on one CPU and on the MuJoCo fast path.
    :param start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"`` (default forkserver where available).
    :param partial: step each worker again as soon as it is ready, not in lockstep.
    :param max_episode_steps: the horizon; default the env's time limit (episodes of an env
        without one must end within ``NO_TIME_LIMIT_CAP`` steps).
    :param mujoco_batch, batch_threads: the MuJoCo fast path (one ``mujoco.batch`` call a step,
        the same bits): ``None`` where it can, ``True`` required, ``False`` never; its threads.
    :param info_keys: keys of ``step()``'s ``info`` carried into ``BatchEpisodes.infos``
        (default the env's ``info_keys``, e.g. Meta-World's ``success``).
    :param conditioning_size: the policy reads this many numbers after each (flat) observation,
        given per task or per slot in every call (``conditioning=``; PEARL's latent z).
    :param backend, ray_address, ray_actors, ray_cpus_per_actor: ``"local"`` or ``"ray"``
        (sampling actors across a cluster; ``docs/ray.md``).
    :param step_timeout: seconds a worker process may take over one step (or reset) before the
        call raises ``StepTimeoutError`` (the worker killed, the others ended); ``None``: wait forever.
        Steps in this process (``num_workers=0``) cannot be interrupted.

    See ``docs/sampler.md`` for a complete example and the reproducibility contract.

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
        conditioning_size: int = 0,
        step_timeout: Optional[float] = None,
    ):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if policy is None or not callable(policy):
            raise TypeError(f"policy must be a torch.nn.Module returning a Distribution, got {policy!r}")
        self.batch_size = batch_size
        self.policy = policy
        self.baseline = baseline
        settings = resolve_settings(
            num_workers=num_workers, start_method=start_method, partial=partial, mujoco_batch=mujoco_batch,
            batch_threads=batch_threads, backend=backend,
            ray=RayOptions(ray_address, ray_actors, ray_cpus_per_actor), step_timeout=step_timeout,
        )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be an int >= 0 (or None to draw one), got {seed!r}")
        self.seed = draw_seed() if seed is None else int(seed)
        self.env_fn = resolve_env_fn(env_name, env_kwargs, env_fn)
        # One env in this process: the task distribution, the spaces, the horizon.
        self.env = self.env_fn()
        #: The env, the buffers' spec and the episodes per task, as every backend gets them.
        self.workload = describe_workload(self.env_fn, self.env, batch_size, max_episode_steps, info_keys)
        self.env.reset(seed=self.seed)
        self.observation_space, self.action_space = self.env.observation_space, self.env.action_space
        self.horizon, self.info_keys = self.workload.spec.horizon, self.workload.spec.info_keys
        self.conditioning_size = check_conditioning_size(conditioning_size, policy, self.workload.spec)
        if not is_recurrent(policy):
            check_policy(policy, self.workload.spec, self.conditioning_size)
        self._checked_inputs: set = set()
        #: How rollouts run (frozen): backend, start method, partial, fast path, Ray options.
        self.settings = settings.for_env(self.env, self.workload.env_name, self.info_keys)
        layout = local_layout(self.settings)
        self._backend: RolloutBackend
        if self.settings.backend == "local":
            self._backend = LocalBackend(self.workload, self.settings, layout, self.env_fn, policy)
        else:
            from .backends.ray import RayBackend

            self._backend = RayBackend(self.workload, self.settings, policy)
        self.num_workers = layout.num_workers
        self._num_rollouts = 0
        self.closed = False
        self._in_use = OneCallAtATime("MultiTaskSampler")

    # -- public API ---------------------------------------------------------

    def sample_tasks(self, num_tasks: int) -> List[Any]:
        """Draw ``num_tasks`` tasks from the env's task distribution (seeded)."""
        self._in_use.check_process("sample_tasks")
        return list(self.env.unwrapped.sample_tasks(num_tasks))

    def rollout(
        self,
        tasks: Sequence[Any],
        params: ParamsArg = None,
        *,
        gamma: float = DEFAULTS.gamma,
        device: Union[str, torch.device, None] = None,
        actions: str = "sample",
        conditioning: Any = None,
    ) -> List[BatchEpisodes]:
        """Roll out ``batch_size`` episodes of each task under given parameters.

        :param tasks: tasks from ``sample_tasks`` (or any the env accepts).
        :param params: ``None`` for the policy's own parameters, one dict of
            parameters for every task, or a list with one dict (or ``None``)
            per task.
        :param conditioning: with ``conditioning_size``, ``[K, d]`` or ``[K, B, d]`` numbers the policy
            reads after each observation.
        :param device: where the episodes' tensors go and the in-process policy runs; ``None``
            (the default): where the policy's parameters are.
        :param actions: ``"sample"`` draws from the policy; ``"mean"`` takes
            its most likely action (Normal mean, categorical mode) at every
            step, for evaluation. Such episodes are marked
            (``actions_from == "mean"``) and refused by policy-gradient steps.
        :returns: one ``BatchEpisodes`` per task, in the order of ``tasks``, with
            their discounted returns (``gamma``) and no advantages
            (``maml_rl.data.baseline.fit_advantages`` sets them), and a copy of
            the parameters that sampled them as ``behaviour_params``.
        """
        refuse_recurrent(self.policy, "rollout")
        check_gamma(gamma)
        tasks = list(tasks)
        if not tasks and not self.closed:
            raise ValueError("rollout() needs at least one task")
        device = self.batch_device(device)
        with self._in_use("rollout"):
            return self._run(tasks, params, device, actions, Trial(), conditioning,
                             lambda trajectories: to_episodes(trajectories, tasks, self.workload, gamma, device))

    def rollout_trials(self, tasks: Sequence[Any], episodes_per_trial: int, *, params: ParamsArg = None,
                       start=None, actions: str = "sample", inputs: Any = "rl2", reward_scale: float = 1.0,
                       chunk: Optional[int] = None, gamma: float = DEFAULTS.gamma,
                       device: Union[str, torch.device, None] = None, conditioning: Any = None,
                       reset_each_episode: bool = False) -> List[TrialBatch]:
        """Roll out ``batch_size`` trials of each task: ``episodes_per_trial``
        episodes back to back per slot, the env reset (with its next seed)
        whenever an episode ends, a recurrent policy's state kept across those
        resets (``docs/sampler.md``, "Trials and recurrent policies").

        :param inputs: what a recurrent policy sees: a
            :class:`~maml_rl.policies.trial_inputs.InputFormat` (the policy's or learner's
            declaration; ``reward_scale`` then unused), or ``"rl2"`` (the observation, the
            previous action, ``reward_scale`` times the previous reward and done flag,
            zero at a trial's start), ``"rl2-autoreset"`` or ``"observations"``. A feed-forward
            policy sees observations (with ``params`` as in :meth:`rollout`).
        :param start: continue each slot from a finished trial's end,
            ``maml_rl.data.trials.stack_start(batches)`` (Meta-World's evaluation protocol).
        :param chunk: record the state before every ``chunk``-th step (truncated BPTT).
        :param conditioning: as in :meth:`rollout` (feed-forward policies).
        :param reset_each_episode: a recurrent policy starts each episode from its initial state and a
            trial's first input (same weights, no memory of the earlier attempts): an evaluation's ablation.
        :returns: one :class:`~maml_rl.data.trials.TrialBatch` per task (no advantages).
        """
        check_gamma(gamma)
        tasks = list(tasks)
        trial = trial_request(self.policy, self.workload.spec, tasks, params, episodes_per_trial, inputs,
                              reward_scale, chunk, start, self.batch_size, self._checked_inputs,
                              reset_each_episode)
        device = self.batch_device(device)
        with self._in_use("rollout_trials"):
            return self._run(tasks, params, device, actions, trial, conditioning,
                             lambda trajectories: to_trials(trajectories, tasks, self.workload, gamma, device, trial))

    def rollout_transitions(self, tasks: Sequence[Any], params: ParamsArg = None, *, episodes: int = 1,
                            conditioning: Any = None, actions: str = "sample",
                            device: Union[str, torch.device, None] = None) -> List[Transitions]:
        """Roll out ``episodes`` episodes back to back in each of a task's ``batch_size`` slots and
        return each task's steps as :class:`~maml_rl.data.transitions.Transitions` (with next
        observations, the final one of a truncated episode included, for off-policy learners).
        ``params``, ``conditioning`` and ``actions`` as in :meth:`rollout`."""
        tasks = list(tasks)
        refuse_recurrent(self.policy, "rollout_transitions")
        trial = trial_request(self.policy, self.workload.spec, tasks, params, episodes, "observations", 1.0,
                              None, None, self.batch_size, self._checked_inputs)
        device = self.batch_device(device)
        with self._in_use("rollout_transitions"):
            return self._run(tasks, params, device, actions, trial, conditioning,
                             lambda trajectories: to_transitions(trajectories, tasks, self.workload, device))

    def _run(self, tasks: List[Any], params: ParamsArg, device, actions: str, trial: Trial, conditioning, assemble):
        """One rollout of ``tasks`` through the backend; ``assemble(trajectories)``
        makes the per-task batches, which record the parameters that sampled them."""
        if self.closed:
            raise SamplerClosedError("the sampler is closed; create a new one")
        # Checked before the call counter moves: a refused call leaves the seeds of later calls unchanged.
        actions = ActionMode.parse(actions)
        conditioning = checked_conditioning(conditioning, self.conditioning_size, len(tasks), self.batch_size)
        check_tasks_picklable(tasks)
        params = TaskParams.from_argument(self.policy, params, len(tasks))
        request = RolloutRequest(tuple(tasks), params, self.seed, self._num_rollouts, self.batch_size,
                                 actions, trial=trial, conditioning=conditioning)
        self._num_rollouts += 1
        try:
            trajectories = self._backend.run(request, device)
            check_outputs(trajectories, tasks, self.workload)
            batches = assemble(trajectories)
        except BaseException:
            # Workers interrupted mid-step cannot be trusted; the next call starts new ones.
            self._backend.close()
            raise
        for batch, behaviour in zip(batches, params.behaviour(self.policy)):
            batch.behaviour_params = behaviour
            batch.actions_from = actions.value
        return batches

    def state_dict(self) -> dict:
        """What a resumed run needs to continue exactly: the seed, the number
        of rollouts so far and the state of the task generator."""
        self._in_use.check_process("state_dict")
        return {
            "seed": self.seed,
            "num_rollouts": self._num_rollouts,
            "task_rng": self.env.unwrapped.np_random.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state_dict()``: later tasks and episodes are those
        the original sampler would have produced."""
        self._in_use.check_process("load_state_dict")
        check_state(state)
        # First what numpy may still refuse: a refused state leaves the sampler as it was.
        self.env.unwrapped.np_random.bit_generator.state = state["task_rng"]
        self.seed = int(state["seed"])
        self._num_rollouts = int(state["num_rollouts"])

    def close(self) -> None:
        """End the worker processes and release the shared memory; idempotent. In a child
        process (``os.fork()``) of the one that built the sampler: nothing, they are the parent's."""
        if not self.closed and self._in_use.in_owner_process:
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
            f"partial={self.partial}, mujoco_batch={self.mujoco_batch}, backend={self.backend!r}, seed={self.seed})"
        )
