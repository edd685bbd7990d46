"""The gradient-based meta-learners' common part: the inner loop, its sampling, the shared checks."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections import OrderedDict
from typing import Any, ClassVar, Mapping, NamedTuple, Sequence

import numpy as np
import torch
from gymnasium import spaces

from maml_rl.metalearners.gradient.adaptation import InnerLoop
from maml_rl.data.baseline import LinearFeatureBaseline
from maml_rl.data.episodes import BatchEpisodes
from maml_rl.data.stats import episode_stats
from maml_rl.config.hyperparameters import POSITIVE_INT, Hyperparameter
from maml_rl.metalearners.gradient.keys import DEFAULTS, GRADIENT_KEYS
from maml_rl.metalearners.base import Evaluation, EvaluationProtocol, MetaLearner, StepLogs
from maml_rl.metalearners.gradient.sampling_loop import sample_adapt_sample

__all__ = ["AdaptationBatch", "GradientMetaLearner", "TrainEpisodes", "ValidEpisodes"]

#: ``train_episodes[step][task]``: the episodes gathered before inner step ``step``.
TrainEpisodes = Sequence[Sequence[BatchEpisodes]]
#: ``valid_episodes[task]``: the episodes gathered after the last inner step.
ValidEpisodes = Sequence[BatchEpisodes]


class AdaptationBatch(NamedTuple):
    """One iteration of a gradient-based meta-learner: ``train, valid = learner.sample(...)``."""

    train: TrainEpisodes
    valid: ValidEpisodes


class GradientMetaLearner(MetaLearner):
    """A meta-learner that adapts per task with gradient steps (:attr:`inner_loop`), then updates the policy.

    :meth:`sample` rolls out each task, adapts, and rolls out again with the
    adapted parameters (:func:`~maml_rl.metalearners.gradient.sampling_loop.sample_adapt_sample`
    on the sampler's ``rollout``); :meth:`step` takes ``(train_episodes, valid_episodes)``.

    :ivar inner_loop: the adaptation, the same function the sampling adapts with.
    :ivar gae_lambda: GAE's lambda for the advantages of the sampled episodes.
    """

    #: The algorithm's name in messages.
    title: ClassVar[str] = "gradient-based meta-learner"
    #: The inner loop's keys; a member lists them before its own.
    hyperparameters: ClassVar[tuple[Hyperparameter, ...]] = GRADIENT_KEYS
    evaluation_options: ClassVar[tuple[Hyperparameter, ...]] = (
        Hyperparameter("num-steps", int, None, POSITIVE_INT,
                       "adaptation gradient steps (default: the config's num-steps)", argument="num_steps"),
    )
    inner_loop: InnerLoop
    gae_lambda: float = DEFAULTS.gae_lambda
    #: The value baseline :meth:`sample` fits the advantages with (refitted on every task's episodes, so it
    #: holds no state between iterations); ``None`` until the first call builds a ``LinearFeatureBaseline``.
    baseline: Any = None

    def batch_stats(self, batch: AdaptationBatch) -> dict[str, float]:
        return episode_stats(batch.train, batch.valid)

    def memory_needs(self, config: Mapping[str, Any], observation_size: int, action_size: int,
                     horizon: int) -> dict[str, int]:
        # The episodes before each inner step and after the last one, all kept for the meta-update.
        rows = config["meta-batch-size"] * config["fast-batch-size"] * horizon * (config["num-steps"] + 1)
        # Each task's parameters after each inner step, and their gradients in the meta-graph.
        adapted = config["meta-batch-size"] * config["num-steps"] * sum(p.numel() for p in self.policy.parameters())
        return {"episodes of an iteration": rows * (observation_size + action_size + 4) * 4,
                "adapted parameters": adapted * 4 * 2}

    def _setup(self, policy: torch.nn.Module, device: str | torch.device, fast_lr: float, num_steps: int,
               averaging: str, gae_lambda: float, objective: str = "reinforce") -> None:
        """The checks and attributes every gradient-based learner shares."""
        name = self.title
        if getattr(policy, "is_recurrent", False):
            raise TypeError(f"{name} adapts a feed-forward policy's parameters; {type(policy).__name__} is "
                            "recurrent: train it with RL2PPO (algorithm: rl2-ppo)")
        if not getattr(policy, "supports_batched_params", False):
            raise TypeError(f"{type(policy).__name__} does not support stacked per-task parameters")
        self.check_arguments(num_steps=num_steps, gae_lambda=gae_lambda)
        self.device = torch.device(device)
        self.policy = policy.to(self.device)
        self.inner_loop = InnerLoop(fast_lr=fast_lr, num_steps=num_steps, averaging=averaging, objective=objective)
        self.gae_lambda = float(gae_lambda)

    @property
    def fast_lr(self) -> float:
        """The inner loop's step size."""
        return self.inner_loop.fast_lr

    @property
    def num_steps(self) -> int:
        """The inner loop's number of gradient steps."""
        return self.inner_loop.num_steps

    @property
    def averaging(self) -> str:
        """How the losses weigh a task's steps, ``"step"`` or ``"episode"``."""
        return self.inner_loop.averaging

    def sample(self, sampler: Any, tasks: Sequence[Any], gamma: float = DEFAULTS.gamma,
               device: str | torch.device = "cpu", *, valid_actions: str = "sample") -> AdaptationBatch:
        """Each task's episodes before every inner step and after the last, adapted with :attr:`inner_loop`.

        ``valid_actions="mean"`` rolls out the adapted policies' most likely actions after
        the last step (evaluation); such episodes cannot be given to :meth:`update`.
        """
        with self.progress.phase("sampling", self.num_steps + 1, "rollout") as advance:
            train, valid = sample_adapt_sample(sampler, tasks, inner_loop=self.inner_loop,
                                               baseline=self._baseline(sampler, device),
                                               gamma=gamma, gae_lambda=self.gae_lambda, device=device,
                                               valid_actions=valid_actions, on_rollout=advance)
        return AdaptationBatch(train, valid)

    @staticmethod
    def env_steps_per_iteration(config: Mapping[str, Any], horizon: int) -> tuple[int, int]:
        """``fast-batch-size`` episodes per task before each inner step and after the last."""
        return config["meta-batch-size"] * config["fast-batch-size"] * horizon * (config["num-steps"] + 1), 0

    @classmethod
    def evaluation_protocol(cls, config: Mapping[str, Any], *, eval_actions: str, batch_size: int,
                            num_steps: int | None = None) -> EvaluationProtocol:
        """Gradient steps on ``batch_size`` episodes per task (``num_steps``; ``None``: the config's)."""
        num_steps = num_steps or config["num-steps"]
        mean = ", mean actions after adaptation" if eval_actions == "mean" else ""
        return EvaluationProtocol(
            {"protocol": "gradient-steps", "num-steps": num_steps, "fast-lr": config["fast-lr"]}, "",
            f"{batch_size} episodes per task per step, fast-lr {config['fast-lr']}{mean}", None, None,
            ("before", "after"))

    def evaluate(self, sampler: Any, tasks: Sequence[Any], gamma: float = DEFAULTS.gamma,
                 device: str | torch.device = "cpu", *, actions: str = "sample",
                 num_steps: int | None = None) -> Evaluation:
        """``num_steps`` REINFORCE steps of :attr:`fast_lr` per task (ProMP's LVC step has the same value at
        the behaviour policy), returns before each step and after the last, with ``actions`` after it."""
        inner_loop = InnerLoop(self.fast_lr, self.num_steps if num_steps is None else num_steps, self.averaging)
        train, valid = sample_adapt_sample(sampler, tasks, inner_loop=inner_loop, baseline=self._baseline(sampler, device),
                                           gamma=gamma, gae_lambda=self.gae_lambda, device=device,
                                           valid_actions=actions)
        stages = [*train, valid]
        returns = np.stack([np.stack([b.total_rewards.detach().cpu().numpy() for b in stage]) for stage in stages])
        if not all("success" in b.infos for b in valid):
            return Evaluation(returns, None)
        success = np.stack([np.stack([b.success().cpu().numpy().astype(np.float64) for b in stage])
                            for stage in stages])
        return Evaluation(returns, success)

    def _baseline(self, sampler: Any, device: str | torch.device) -> Any:
        if self.baseline is None:
            self.baseline = LinearFeatureBaseline(spaces.flatdim(sampler.observation_space)).to(device)
        return self.baseline

    def update(self, batch: AdaptationBatch) -> StepLogs:
        train, valid = batch
        return self.step(train, valid)

    def check_episodes(self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes | None) -> int:
        """The number of tasks, once the episodes are known to fit :attr:`num_steps` and to cover the same tasks.

        :raises ValueError: saying what does not fit.
        """
        if len(train_episodes) != self.num_steps:
            raise ValueError(f"expected train episodes for {self.num_steps} inner step(s), got {len(train_episodes)}: "
                             f"give the learner the sampler's number of steps, "
                             f"{type(self).__name__}(policy, num_steps=...)")
        num_tasks = len(train_episodes[0])
        if any(len(step) != num_tasks for step in train_episodes) or \
                (valid_episodes is not None and len(valid_episodes) != num_tasks):
            raise ValueError("every inner step needs train episodes for the same tasks as valid_episodes")
        return num_tasks

    @staticmethod
    def check_finite(value: float, what: str) -> None:
        """Refuse a non-finite loss before any parameter moves."""
        if not math.isfinite(value):
            raise RuntimeError(f"{what} is not finite ({value}); check the episodes' advantages")

    @abstractmethod
    def adapt(self, train_episodes: TrainEpisodes, first_order: bool | None = None) -> "OrderedDict[str, torch.Tensor]":
        """Every task's adapted parameters, stacked ``[K, ...]``, from ``train_episodes[step][task]``."""

    @abstractmethod
    def step(self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes) -> StepLogs:
        """One meta-update of :attr:`policy` from one batch of tasks; returns what to log."""
