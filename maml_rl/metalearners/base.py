"""What every gradient-based meta-learner provides, and the check that its data is on-policy."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any, ClassVar, Mapping, Sequence

import torch

from maml_rl.adaptation import InnerLoop
from maml_rl.episodes import BatchEpisodes
from maml_rl.hyperparameters import SHARED_KEYS, Hyperparameter
from maml_rl.policies.policy import Params, Policy

__all__ = ["MetaLearner", "StaleEpisodesError", "StepLogs", "TrainEpisodes", "ValidEpisodes"]

#: ``train_episodes[step][task]``: the episodes gathered before inner step ``step``.
TrainEpisodes = Sequence[Sequence[BatchEpisodes]]
#: ``valid_episodes[task]``: the episodes gathered after the last inner step.
ValidEpisodes = Sequence[BatchEpisodes]
#: What :meth:`MetaLearner.step` reports: scalars by name (losses, KL, timings...).
StepLogs = dict[str, "float | int | bool"]


class StaleEpisodesError(ValueError):
    """The episodes were not sampled by the policy the meta-learner is about to update."""


class MetaLearner(ABC):
    """A gradient-based meta-learner: adapts per task with :attr:`inner_loop`, then updates the policy.

    A new algorithm is a subclass in its own file, added to
    :data:`maml_rl.metalearners.METALEARNERS` under the name config files use
    (the ``algorithm`` key), with its own configuration keys declared in
    :data:`maml_rl.hyperparameters.ALGORITHM_KEYS` under the same name and
    set as its :attr:`hyperparameters`; ``train.py`` needs no change.

    :ivar policy: the meta-trained policy.
    :ivar inner_loop: the adaptation, shared with the sampler
        (``sampler.sample(tasks, inner_loop=learner.inner_loop)``).
    """

    #: The configuration keys of this algorithm only (the shared ones apply to every algorithm).
    hyperparameters: ClassVar[tuple[Hyperparameter, ...]] = ()
    policy: Policy
    inner_loop: InnerLoop

    @classmethod
    def from_config(cls, policy: Policy, config: Mapping[str, Any], device: str | torch.device = "cpu") -> "MetaLearner":
        """Build from a validated configuration (:func:`maml_rl.config.validate_config`).

        Every shared key and every key of :attr:`hyperparameters` that declares an
        ``argument`` is passed to the constructor as that keyword.
        """
        keys = (*SHARED_KEYS, *cls.hyperparameters)
        return cls(policy, device=device, **{h.argument: config[h.key] for h in keys if h.argument is not None})

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

    @abstractmethod
    def adapt(self, train_episodes: TrainEpisodes, first_order: bool | None = None) -> "OrderedDict[str, torch.Tensor]":
        """Every task's adapted parameters, stacked ``[K, ...]``, from ``train_episodes[step][task]``."""

    @abstractmethod
    def step(self, train_episodes: TrainEpisodes, valid_episodes: ValidEpisodes) -> StepLogs:
        """One meta-update of :attr:`policy` from one batch of tasks; returns what to log."""


def recorded_params(episodes: Sequence[BatchEpisodes], names: Sequence[str]) -> "OrderedDict[str, torch.Tensor] | None":
    """The behaviour parameters recorded in each task's batch, stacked ``[K, ...]``; ``None`` if any batch has none."""
    if any(batch.behaviour_params is None for batch in episodes):
        return None
    missing = [name for name in names if name not in episodes[0].behaviour_params]
    if missing:
        raise StaleEpisodesError(
            f"the episodes' behaviour_params lack {', '.join(map(repr, missing))}: they were not sampled by this policy"
        )
    return OrderedDict((name, torch.stack([batch.behaviour_params[name] for batch in episodes])) for name in names)


def check_same_params(expected: Params, recorded: Params, what: str, remedy: str) -> None:
    """Raise :class:`StaleEpisodesError` unless ``recorded`` equals ``expected`` bit for bit.

    :param what: which episodes, for the message.
    :param remedy: what to do about it, for the message.
    """
    for name, value in expected.items():
        value = value.detach()
        other = recorded[name].to(value.device)
        if other.shape != value.shape or not torch.equal(other, value):
            gap = "shape " + str(tuple(other.shape)) if other.shape != value.shape else \
                f"largest difference {(other - value).abs().max().item():.3g}"
            raise StaleEpisodesError(
                f"{what} were sampled by other parameters than the ones this update starts from "
                f"({gap} in {name!r}); the importance ratios would be wrong. {remedy}"
            )
