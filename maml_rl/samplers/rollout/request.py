"""What one rollout is asked to do: tasks, parameters, seed, call, action mode, slots covered."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from collections.abc import Mapping
from typing import Any, Optional, Sequence, Tuple

import cloudpickle
import numpy as np

from maml_rl.policies.task_params import ParamsArg, TaskParams

from .trial import Trial, TrialStart

__all__ = ["ActionMode", "ParamsArg", "RolloutRequest", "TaskParams", "Trial", "TrialStart",
           "check_tasks_picklable"]


def check_tasks_picklable(tasks: Sequence[Any]) -> None:
    """Refuse a task that cannot be pickled, whatever the layout.

    Worker processes and Ray actors receive their tasks pickled (cloudpickle),
    while ``num_workers=0`` uses them in place; without this check the layout
    decided whether a call failed, and the worker's bare ``TypeError`` named
    neither the task nor what in it could not be pickled.
    """
    for index, task in enumerate(tasks):
        try:
            cloudpickle.dumps(task)
        except Exception as exc:  # pickling raises TypeError, PicklingError, AttributeError, ...
            raise TypeError(
                f"task {index} ({task!r}) cannot be pickled{_unpicklable_part(task)}: {exc}. Tasks are sent to "
                "the worker processes pickled: pass plain data (numbers, arrays, strings, and dicts, lists or "
                "tuples of them) as tasks, and build anything else (locks, files, handles) in the env's reset_task"
            ) from exc


def _unpicklable_part(task: Any) -> str:
    """Which entry of a dict, list or tuple task fails to pickle, for the message."""
    items = task.items() if isinstance(task, Mapping) else enumerate(task) if isinstance(task, (list, tuple)) else ()
    for key, value in items:
        try:
            cloudpickle.dumps(value)
        except Exception:
            return f" (its entry [{key!r}] = {value!r})"
    return ""


class ActionMode(str, enum.Enum):
    """How the policy's distribution becomes actions."""

    SAMPLE = "sample"  # draw from it (with the rollout's noise)
    MEAN = "mean"  # its most likely action, for evaluation

    @classmethod
    def parse(cls, value: Any, argument: str = "actions") -> "ActionMode":
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"{argument}={value!r}: use 'sample' (draw from the policy) or 'mean' "
                             "(its most likely action, for evaluation)") from None


@dataclass(frozen=True)
class RolloutRequest:
    """One rollout: ``batch_size`` episodes of every task, with the seeds and
    noise of rollout ``call`` of ``seed``.

    A request may cover a contiguous group of the tasks of a larger call (a
    Ray actor's share): ``tasks`` are then tasks ``first_task ..`` of a call
    of ``total_tasks``, and get the seeds and noise of those slots of it.

    :param params: each task's parameters (:class:`~maml_rl.policies.task_params.TaskParams`).
    :param conditioning: ``[K, B, d]`` float32, what each slot's policy input carries after the
        observation (e.g. PEARL's latent z; ``docs/sampler.md``, "Conditioning"), or ``None``.
    """

    tasks: Tuple[Any, ...]
    params: TaskParams
    seed: int
    call: int
    batch_size: int
    actions: ActionMode = ActionMode.SAMPLE
    first_task: int = 0
    total_tasks: Optional[int] = None
    trial: Trial = Trial()
    conditioning: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        if len(self.tasks) != self.params.num_tasks:
            raise ValueError(f"got {self.params.num_tasks} parameter sets for {len(self.tasks)} tasks")
        if self.total_tasks is None:
            object.__setattr__(self, "total_tasks", self.first_task + len(self.tasks))

    @property
    def episodes(self) -> int:
        """Episodes per slot (1 unless this is a trial rollout)."""
        return self.trial.episodes

    @property
    def num_slots(self) -> int:
        """The slots of this request's tasks."""
        return len(self.tasks) * self.batch_size

    @property
    def total_slots(self) -> int:
        """The slots of the whole call."""
        return self.total_tasks * self.batch_size

    @property
    def slots(self) -> range:
        """This request's slots, numbered within the whole call."""
        first = self.first_task * self.batch_size
        return range(first, first + self.num_slots)

    def group(self, lo: int, hi: int) -> "RolloutRequest":
        """Tasks ``lo .. hi`` of this (whole-call) request, with their parameters and conditioning."""
        conditioning = None if self.conditioning is None else self.conditioning[lo:hi]
        return replace(self, tasks=tuple(self.tasks[lo:hi]), params=self.params.group(lo, hi),
                       first_task=self.first_task + lo, total_tasks=self.total_tasks, conditioning=conditioning)
