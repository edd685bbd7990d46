"""What one rollout is asked to do: tasks, parameters, seed, call, action mode, slots covered."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import cloudpickle
import numpy as np
import torch

from maml_rl.policies.policy import Params, meta_parameters, require_params_argument

# What rollout() takes: None (the policy's own), one dict for every task, or one per task.
ParamsArg = Union[None, Params, Sequence[Optional[Params]]]


def per_task_params(params: ParamsArg, num_tasks: int) -> List[Optional[Params]]:
    """One entry per task from ``rollout()``'s ``params`` argument."""
    if params is None or isinstance(params, Mapping):
        return [params] * num_tasks
    params = list(params)
    if len(params) != num_tasks:
        raise ValueError(f"got {len(params)} parameter sets for {num_tasks} tasks")
    return params


def checked_task_params(policy: torch.nn.Module, tasks: Sequence[Any], params: ParamsArg) -> List[Optional[Params]]:
    """``per_task_params``, after refusing unpicklable tasks and parameters for a policy without ``params=``."""
    check_tasks_picklable(tasks)
    given = per_task_params(params, len(tasks))
    if any(p is not None for p in given):
        require_params_argument(policy, "parameters were given to the rollout, which calls "
                                        "policy(observations, params=...)")
    return given


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


def complete_params(policy: torch.nn.Module, per_task: List[Optional[Params]]) -> List[Optional[Params]]:
    """Each task's dict with the policy's own value of every meta-parameter it
    leaves out, so that stacking, the recorded behaviour parameters and the
    policy all see the same values (the same dict object stays one object).
    A name that is not a parameter of the policy is refused."""
    own = OrderedDict(meta_parameters(policy))
    known = dict(policy.named_parameters())
    completed: Dict[int, Params] = {}
    out: List[Optional[Params]] = []
    for params in per_task:
        if params is None:
            out.append(None)
            continue
        if id(params) not in completed:
            unknown = [name for name in params if name not in known]
            if unknown:
                raise ValueError(f"params name {unknown}, which are not parameters of the policy "
                                 f"{type(policy).__name__} (its parameters: {list(known)})")
            if all(name in params for name in own):
                completed[id(params)] = params
            else:
                full = OrderedDict((name, params[name] if name in params else p.detach()) for name, p in own.items())
                full.update((name, value) for name, value in params.items() if name not in full)
                completed[id(params)] = full
        out.append(completed[id(params)])
    return out


class TrialInputs(str, enum.Enum):
    """What a recurrent policy sees at each step of a trial."""

    RL2 = "rl2"  # observation, previous action, previous reward (scaled), previous done flag
    OBSERVATIONS = "observations"  # the observation only

    @classmethod
    def parse(cls, value: Any) -> "TrialInputs":
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"inputs={value!r}: use 'rl2' (observation, previous action, reward and done flag) "
                             "or 'observations'") from None


@dataclass(frozen=True)
class TrialStart:
    """Where trials continue from, one row per slot of the whole call: the
    policy's state and the previous action, reward and done flag its first
    input sees (a finished trial's last ones, for Meta-World's evaluation
    protocol). numpy arrays, so that they travel to Ray actors as they are."""

    state: np.ndarray  # [S, *state_shape]
    actions: np.ndarray  # [S, *act]
    rewards: np.ndarray  # [S]
    dones: np.ndarray  # [S]


@dataclass(frozen=True)
class Trial:
    """How the slots of a trial rollout run: ``episodes`` episodes each, back to back.

    :param episodes: episodes per trial (each slot resets its env after each, and
        a recurrent policy keeps its state across those resets).
    :param recurrent: the policy is recurrent (``initial_state`` and ``step``).
    :param inputs: what a recurrent policy sees (:class:`TrialInputs`).
    :param reward_scale: factor of the previous reward in RL²'s inputs.
    :param chunk: record a recurrent policy's state every ``chunk`` steps (BPTT chunk starts).
    :param start: continue from these states instead of the policy's initial state.
    """

    episodes: int = 1
    recurrent: bool = False
    inputs: TrialInputs = TrialInputs.RL2
    reward_scale: float = 1.0
    chunk: Optional[int] = None
    start: Optional[TrialStart] = None


@dataclass(frozen=True)
class RolloutRequest:
    """One rollout: ``batch_size`` episodes of every task, with the seeds and
    noise of rollout ``call`` of ``seed``.

    A request may cover a contiguous group of the tasks of a larger call (a
    Ray actor's share): ``tasks`` are then tasks ``first_task ..`` of a call
    of ``total_tasks``, and get the seeds and noise of those slots of it.

    :param per_task: each task's parameters (``None``: the policy's own).
    :param conditioning: ``[K, B, d]`` float32, what each slot's policy input carries after the
        observation (e.g. PEARL's latent z; ``docs/sampler.md``, "Conditioning"), or ``None``.
    """

    tasks: Tuple[Any, ...]
    per_task: Tuple[Optional[Params], ...]
    seed: int
    call: int
    batch_size: int
    actions: ActionMode = ActionMode.SAMPLE
    first_task: int = 0
    total_tasks: Optional[int] = None
    trial: Trial = Trial()
    conditioning: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        if len(self.tasks) != len(self.per_task):
            raise ValueError(f"got {len(self.per_task)} parameter sets for {len(self.tasks)} tasks")
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

    def group(self, lo: int, hi: int, per_task: Sequence[Optional[Params]]) -> "RolloutRequest":
        """Tasks ``lo .. hi`` of this (whole-call) request, with ``per_task`` for them."""
        conditioning = None if self.conditioning is None else self.conditioning[lo:hi]
        return replace(self, tasks=tuple(self.tasks[lo:hi]), per_task=tuple(per_task),
                       first_task=self.first_task + lo, total_tasks=self.total_tasks, conditioning=conditioning)
