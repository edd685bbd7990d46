"""Each task's policy parameters, in one form from the learner to the policy and back.

A rollout of ``K`` tasks evaluates the policy under a parameter set per task.
Tasks often share one (MAML's first rollout: all the policy's own; a user's
one dict for every task), so the form is the distinct sets plus an index:

* ``rows``: the distinct parameter dicts, each complete (every meta-parameter
  of the policy, those the caller left out filled with the policy's own values);
* ``index[k]``: task ``k``'s row, or ``-1`` for the policy's own parameters
  (read from the policy when used, so that a Ray actor reads the state it was sent).

Sharing is told once, here, when the caller's argument becomes a
:class:`TaskParams` (the same dict object for two tasks is one row). The
action function, the Ray transfer (the rows travel once per call, each group
its slice of the index) and the recorded behaviour parameters all read this
form; none of them compares objects again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from .policy import Params, expand_params, meta_parameters, require_params_argument, stack_params

__all__ = ["OWN", "ParamsArg", "TaskParams"]

#: ``index`` value of a task that runs on the policy's own parameters.
OWN = -1

# What rollout() takes: None (the policy's own), one dict for every task, one per task, or a TaskParams.
ParamsArg = Union[None, Params, Sequence[Optional[Params]], "TaskParams"]


@dataclass(frozen=True)
class TaskParams:
    """The distinct parameter dicts of a rollout's tasks and each task's row (:data:`OWN`: the policy's own).

    :param index: one entry per task: a row of ``rows`` or :data:`OWN`.
    :param rows: the distinct, complete parameter dicts (``None``: sent beside the index, :meth:`index_only`).
    :param stacked: ``rows`` stacked ``[R, ...]`` when they came that way from the
        learner (:meth:`from_stacked`); the policy then evaluates them as they are.
    """

    index: Tuple[int, ...]
    rows: Optional[Tuple[Params, ...]] = ()
    stacked: Optional[Params] = None

    def __post_init__(self) -> None:
        if self.rows is None:
            return
        bad = [i for i in self.index if not (i == OWN or 0 <= i < len(self.rows))]
        if bad:
            raise ValueError(f"TaskParams index {list(self.index)} names rows {bad} of {len(self.rows)}")

    # -- building -----------------------------------------------------------

    @classmethod
    def own(cls, num_tasks: int) -> "TaskParams":
        """Every task on the policy's own parameters."""
        return cls((OWN,) * num_tasks)

    @classmethod
    def from_stacked(cls, stacked: Params) -> "TaskParams":
        """One row per task from stacked ``[K, ...]`` parameters (the rows are views, no copies)."""
        names = list(stacked)
        num_tasks = stacked[names[0]].shape[0]
        rows = tuple(OrderedDict((name, stacked[name][k]) for name in names) for k in range(num_tasks))
        return cls(tuple(range(num_tasks)), rows, OrderedDict(stacked))

    @classmethod
    def from_argument(cls, policy: torch.nn.Module, params: ParamsArg, num_tasks: int) -> "TaskParams":
        """``rollout()``'s ``params`` argument: ``None`` (the policy's own), one dict for every
        task, one dict or ``None`` per task, or a :class:`TaskParams` of ``num_tasks`` tasks.

        Each distinct dict (by object: the caller's own sharing) becomes one row,
        completed with the policy's own value of every meta-parameter it leaves
        out. A name that is not a parameter of the policy, a count that is not
        one per task, and parameters for a policy without ``params=`` are refused.
        """
        if isinstance(params, TaskParams):
            given = params
            if len(given.index) != num_tasks:
                raise ValueError(f"got TaskParams of {len(given.index)} tasks for {num_tasks} tasks")
            rows: Sequence[Params] = given.rows
        elif params is None:
            return cls.own(num_tasks)
        else:
            per_task = [params] * num_tasks if isinstance(params, Mapping) else list(params)
            if len(per_task) != num_tasks:
                raise ValueError(f"got {len(per_task)} parameter sets for {num_tasks} tasks")
            seen: Dict[int, int] = {}
            distinct: List[Params] = []
            index = []
            for k, p in enumerate(per_task):
                if p is None:
                    index.append(OWN)
                    continue
                if not isinstance(p, Mapping):
                    raise TypeError(f"params of task {k} is a {type(p).__name__}: give a dict of the policy's "
                                    "parameters (name -> tensor), or None for its own")
                if id(p) not in seen:
                    seen[id(p)] = len(distinct)
                    distinct.append(p)
                index.append(seen[id(p)])
            given, rows = cls(tuple(index), tuple(distinct)), distinct
        if not rows:
            return given
        require_params_argument(policy, "parameters were given to the rollout, which calls "
                                        "policy(observations, params=...)")
        completed = tuple(_complete(policy, row) for row in rows)
        unchanged = all(a is b for a, b in zip(completed, rows))
        return cls(given.index, completed, given.stacked if unchanged else None)

    # -- reading ------------------------------------------------------------

    @property
    def num_tasks(self) -> int:
        return len(self.index)

    def row_of(self, task: int) -> Optional[Params]:
        """Task ``task``'s parameters (``None``: the policy's own)."""
        i = self.index[task]
        return None if i == OWN else self.rows[i]

    def group(self, lo: int, hi: int) -> "TaskParams":
        """Tasks ``lo .. hi``: their slice of the index over the same rows."""
        return TaskParams(self.index[lo:hi], self.rows)

    def batched(self, policy: torch.nn.Module) -> "OrderedDict[str, torch.Tensor]":
        """``[K, ...]`` parameters for one batched policy call: stride-0 copies of one
        row when every task shares it, the learner's stacked rows as they are, else
        each task's row stacked."""
        own = None
        if OWN in self.index:
            own = OrderedDict((name, p.detach()) for name, p in policy.named_parameters())
        if all(i == self.index[0] for i in self.index):
            return expand_params(own if self.index[0] == OWN else self.rows[self.index[0]], self.num_tasks)
        if self.stacked is not None and self.index == tuple(range(len(self.rows))):
            return OrderedDict(self.stacked)
        return stack_params([own if i == OWN else self.rows[i] for i in self.index])

    def behaviour(self, policy: torch.nn.Module) -> List["OrderedDict[str, torch.Tensor]"]:
        """A detached copy of the parameters each task was sampled with, one copy per row
        (the policy's own meta-parameters for :data:`OWN`)."""
        copies: Dict[int, OrderedDict] = {}
        for i in dict.fromkeys(self.index):
            source = meta_parameters(policy) if i == OWN else self.rows[i].items()
            copies[i] = OrderedDict((name, p.detach().clone()) for name, p in source)
        return [copies[i] for i in self.index]

    # -- the wire (Ray) -----------------------------------------------------

    def rows_to_numpy(self) -> List[Dict[str, np.ndarray]]:
        """The rows as numpy arrays, to travel once per call."""
        return [{name: p.detach().cpu().numpy() for name, p in row.items()} for row in self.rows]

    def index_only(self) -> "TaskParams":
        """The index without the rows (a Ray group's request; the rows travel beside it once per call)."""
        return TaskParams(self.index, None)

    def with_numpy_rows(self, rows: Sequence[Mapping[str, np.ndarray]]) -> "TaskParams":
        """This index over ``rows`` from :meth:`rows_to_numpy` (fresh tensors; only the rows the index uses)."""
        used = set(self.index) - {OWN}
        tensors = tuple(OrderedDict((name, torch.from_numpy(np.array(a))) for name, a in row.items())
                        if i in used else OrderedDict() for i, row in enumerate(rows))
        return TaskParams(self.index, tensors)


def _complete(policy: torch.nn.Module, params: Params) -> Params:
    """``params`` with the policy's own value of every meta-parameter it leaves out
    (``params`` itself when it has them all), so that stacking, the recorded
    behaviour parameters and the policy all see the same values."""
    own = OrderedDict(meta_parameters(policy))
    known = dict(policy.named_parameters())
    unknown = [name for name in params if name not in known]
    if unknown:
        raise ValueError(f"params name {unknown}, which are not parameters of the policy "
                         f"{type(policy).__name__} (its parameters: {list(known)})")
    _check_fit(policy, known, params)
    if all(name in params for name in own):
        return params
    full = OrderedDict((name, params[name] if name in params else p.detach()) for name, p in own.items())
    full.update((name, value) for name, value in params.items() if name not in full)
    return full


def _describe(tensor: torch.Tensor) -> str:
    return f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"


def _check_fit(policy: torch.nn.Module, known: Mapping[str, torch.Tensor], params: Params) -> None:
    """Refuse a value that is not a tensor of its parameter's shape and dtype: the policy would fail
    deep in a batched matmul (or broadcast it), after the rollout's seeds were spent."""
    for name, value in params.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"params[{name!r}] is a {type(value).__name__}, not a torch.Tensor: give it as the "
                            f"policy's own is, a tensor of shape {_describe(known[name])}")
    wrong = [name for name, value in params.items()
             if value.shape != known[name].shape or value.dtype != known[name].dtype]
    if wrong:
        raise ValueError(
            f"params do not fit the policy {type(policy).__name__}: "
            + "; ".join(f"{name} is {_describe(params[name])}, expected {_describe(known[name])}" for name in wrong)
            + f" (its parameters: {', '.join(f'{n} {_describe(p)}' for n, p in known.items())})")
