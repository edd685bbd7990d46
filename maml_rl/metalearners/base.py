"""What every meta-learner provides, and the check that its data is on-policy."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any, ClassVar, Mapping, NamedTuple, Optional, Sequence

import numpy as np
import torch

from maml_rl.data.episodes import BatchEpisodes
from maml_rl.config.hyperparameters import SHARED_KEYS, Hyperparameter, InvalidValue
from maml_rl.policies.factory import get_policy_for_env
from maml_rl.policies.policy import Params
from maml_rl.utils.progress import Progress

__all__ = ["Evaluation", "EvaluationProtocol", "MetaLearner", "StaleEpisodesError", "StepLogs"]
#: What :meth:`MetaLearner.step` reports: scalars by name (losses, KL, timings...).
StepLogs = dict[str, "float | int | bool"]


class Evaluation(NamedTuple):
    """A learner's evaluation of one batch of tasks (:meth:`MetaLearner.evaluate`)."""

    #: ``[stages, tasks, episodes]`` undiscounted returns: stage 0 before any adaptation, the last after it.
    returns: np.ndarray
    #: The same shape, 1.0 for an episode that succeeded; ``None`` for envs that report no ``success``.
    success: Optional[np.ndarray]


class EvaluationProtocol(NamedTuple):
    """How a learner's :meth:`~MetaLearner.evaluate` adapts, for test.py's record and its printout."""

    #: What report.py compares before pooling evaluations (``protocol`` names the algorithm's protocol).
    settings: dict
    #: After the policy's name in test.py's first line (" (RL²)"), and what each task got, after the tasks.
    label: str
    description: str
    #: Notes on the first and the last stage of the table (``None``: before / after adaptation).
    first: Optional[str]
    last: Optional[str]
    #: The names of the two stages the per-class table sets side by side.
    span: tuple


class StaleEpisodesError(ValueError):
    """The episodes were not sampled by the policy the meta-learner is about to update."""


class MetaLearner(ABC):
    """Every meta-learner: it samples its own batch from the sampler, then updates its policy.

    ``train.py``, ``test.py`` and the seed runner call only what is declared
    here, whatever the algorithm:

    * :meth:`make_policy` builds the policy a configuration trains;
    * :meth:`sample` gathers one iteration's batch with the sampler's rollout
      primitives (MAML's sample-adapt-sample, RL²'s trials);
    * :meth:`update` takes one meta-update from that batch and returns what to log;
    * :meth:`batch_stats` summarises that batch into the metrics ``train.py`` logs (returns before and after
      adaptation, env steps): the batch's type is the learner's own, and only it reads it;
    * :meth:`evaluate` adapts to tasks by the algorithm's own protocol and says how
      well the policy did at each stage (``test.py``);
    * :meth:`state_dict` / :meth:`load_state_dict` hold what a resume needs
      besides the policy (an optimiser's moments), nothing by default;
    * :meth:`env_steps_per_iteration` says what an iteration costs in env steps,
      for the budget train.py prints at start.

    A phase of :meth:`sample` or :meth:`update` that can take more than a few
    seconds reports itself through :attr:`progress` (shown by train.py).

    A new algorithm is a folder (or a file) of its own: a subclass, its
    configuration keys declared beside it and set as its :attr:`hyperparameters`,
    and one line in :data:`maml_rl.metalearners.METALEARNERS` under the name config
    files use (the ``algorithm`` key); ``train.py`` needs no change. Gradient-based
    ones derive from :class:`~maml_rl.metalearners.gradient.GradientMetaLearner`.

    :ivar policy: the meta-trained policy.
    """

    #: The configuration keys of this algorithm only (the shared ones apply to every algorithm).
    hyperparameters: ClassVar[tuple[Hyperparameter, ...]] = ()
    #: Shared keys this algorithm has no use for, with why: refused at any value but their default.
    unused_shared_keys: ClassVar[dict[str, str]] = {}
    #: Whether the policy adapts in its recurrent state over trials (RL²) rather than by gradient steps.
    recurrent: ClassVar[bool] = False
    policy: torch.nn.Module
    #: test.py's options of this learner's evaluation: flag ``--KEY`` of each, passed to :meth:`evaluate` and
    #: :meth:`evaluation_protocol` as its ``argument`` (its default when not given); test.py refuses a flag
    #: that only other learners declare.
    evaluation_options: ClassVar[tuple[Hyperparameter, ...]] = ()
    #: What train.py adds when :meth:`took_no_step` held for many iterations in a row: why, and what to change.
    stall_advice: ClassVar[str] = ""
    #: Where the long phases of an iteration report (:mod:`maml_rl.utils.progress`); shows nothing by default.
    progress: Progress = Progress()
    #: A tiny configuration (a few seconds of training) that the learner contract tests train, resume and
    #: evaluate, so that admitting a learner edits no test; and the rows of its evaluation with it.
    contract_config: ClassVar[Optional[dict]] = None
    contract_stages: ClassVar[Optional[int]] = None

    @classmethod
    def check_arguments(cls, **arguments: Any) -> None:
        """Check constructor keywords by the declarations of the keys they come from (:attr:`hyperparameters`
        and the shared keys), so that a Python call is refused as a config file would be.

        :raises ValueError: naming the keyword, what it takes and the config key.
        """
        declared = {h.argument: h for h in (*SHARED_KEYS, *cls.hyperparameters) if h.argument is not None}
        for name, value in arguments.items():
            hyperparameter = declared[name]
            try:
                hyperparameter.check.convert(value)
            except InvalidValue:
                raise ValueError(f"{cls.__name__}: {name} must be {hyperparameter.expected}, got {value!r} "
                                 f"(config key {hyperparameter.key})") from None

    @classmethod
    def from_config(cls, policy: torch.nn.Module, config: Mapping[str, Any],
                    device: str | torch.device = "cpu") -> "MetaLearner":
        """Build from a validated configuration (:func:`maml_rl.app.config_files.validate_config`).

        Every shared key and every key of :attr:`hyperparameters` that declares an
        ``argument`` is passed to the constructor as that keyword.
        """
        keys = (*SHARED_KEYS, *cls.hyperparameters)
        return cls(policy, device=device, **{h.argument: config[h.key] for h in keys if h.argument is not None})

    @staticmethod
    def make_policy(env: Any, config: Mapping[str, Any]) -> torch.nn.Module:
        """The policy a configuration trains: by default the MLP for the env's spaces."""
        return get_policy_for_env(env, hidden_sizes=config["hidden-sizes"], nonlinearity=config["nonlinearity"])

    @staticmethod
    def sampler_options(config: Mapping[str, Any]) -> dict:
        """Keyword arguments the algorithm needs of :class:`~maml_rl.samplers.MultiTaskSampler` (none by
        default; PEARL: ``conditioning_size``)."""
        return {}

    @staticmethod
    def env_steps_per_iteration(config: Mapping[str, Any], horizon: int) -> tuple[int, int]:
        """At most how many env steps an iteration takes, and once before the first (``horizon``: the
        episodes' time limit): by default ``fast-batch-size`` episodes per task."""
        return config["meta-batch-size"] * config["fast-batch-size"] * horizon, 0

    def sample_tasks(self, sampler: Any, num_tasks: int) -> list:
        """This iteration's tasks: by default ``num_tasks`` fresh ones from the sampler's distribution."""
        return list(sampler.sample_tasks(num_tasks))

    @classmethod
    def evaluation_protocol(cls, config: Mapping[str, Any], *, eval_actions: str, batch_size: int,
                            **options: Any) -> EvaluationProtocol:
        """How :meth:`evaluate` adapts, for test.py: its ``settings`` name the protocol and hold every value of
        the algorithm's own that changes a score (test.py adds the shared ones, ``maml_rl.app.results``).
        By default the class's name and nothing else.

        :param options: the values of :attr:`evaluation_options`, by ``argument``.
        """
        return EvaluationProtocol({"protocol": cls.__name__}, "", f"{batch_size} adaptation(s) per task by "
                                  f"{cls.__name__}.evaluate()", None, None, ("before", "after"))

    @staticmethod
    def config_problems(config: Mapping[str, Any]) -> list[str]:
        """What is wrong with a resolved configuration's keys taken together (nothing by default)."""
        return []

    def memory_needs(self, config: Mapping[str, Any], observation_size: int, action_size: int,
                     horizon: int) -> dict[str, int]:
        """Bytes the data of an iteration takes at least, by what holds it, besides the networks: checked
        against the machine's memory before a run writes anything. By default, one rollout's episodes.

        :param horizon: the most steps of an episode (the env's time limit).
        """
        rows = config["meta-batch-size"] * config["fast-batch-size"] * horizon
        return {"episodes of a rollout": rows * (observation_size + action_size + 4) * 4}

    @abstractmethod
    def sample(self, sampler: Any, tasks: Sequence[Any], gamma: float, device: str | torch.device = "cpu") -> Any:
        """One iteration's batch for :meth:`update`, gathered on ``tasks`` with ``sampler``."""

    @abstractmethod
    def update(self, batch: Any) -> StepLogs:
        """One meta-update of :attr:`policy` from what :meth:`sample` returned; returns what to log."""

    @abstractmethod
    def batch_stats(self, batch: Any) -> dict[str, float]:
        """What ``train.py`` logs of what :meth:`sample` returned: at least ``env_steps`` (steps taken),
        ``return_before`` and ``return_after`` (mean episode returns before and after adaptation), and
        ``success_before``/``success_after`` where the episodes carry ``success`` (:mod:`maml_rl.data.stats`)."""

    def evaluate(self, sampler: Any, tasks: Sequence[Any], gamma: float, device: str | torch.device = "cpu", *,
                 actions: str = "sample", **options: Any) -> Evaluation:
        """Adapt to ``tasks`` and report every stage's returns (``test.py``).

        :param actions: how the episodes after adaptation act, ``"sample"`` or ``"mean"``.
        :param options: the learner's own (:attr:`evaluation_options`, by ``argument``).
        """
        raise NotImplementedError(f"{type(self).__name__} has no evaluation protocol: define its evaluate()")

    @staticmethod
    def took_no_step(logs: Mapping[str, Any]) -> bool:
        """Whether one :meth:`update`'s logs say it left the policy unchanged (train.py warns after many in a
        row, with :attr:`stall_advice`); never, by default."""
        return False

    def state_dict(self) -> dict:
        """What a resume needs besides the policy (nothing unless the algorithm keeps state)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, but got {sorted(state)}")


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
