"""The sampler's stepper for Meta-World benchmark slots: each task class's slots stepped as one ``BatchedSawyer``.

A worker's slots hold ``MetaWorldEnv``s, each with its current task class's env. :class:`MetaWorldStepper`
groups the slots by class at every ``assign`` and steps each group of a batched class (``rewards.SPECS``)
with one :class:`BatchedSawyer`; the slots of other classes, and of a class with fewer than
:data:`MIN_GROUP` slots in the worker, step one env at a time, through their own ``step``. So do a group's
slots on a step where only some of them run (an episode that ended early in ``partial`` sampling): a
``BatchedSawyer`` advances all its simulations or none.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from maml_rl.envs.batch_stepping import BatchStepper, StepResult

from .info_types import INFO_KEYS
from .rewards import batched_spec
from .sawyer import BatchedSawyer

__all__ = ["MetaWorldStepper"]


#: The fewest envs of a class that are stepped as one batch. A batch's ~50 NumPy calls a step cost about
#: what two envs' own steps do: measured on 2 cores, a batch of 1 runs at 0.54-0.79x of the env's own step,
#: of 2 at 0.79-1.04x, of 3 at 0.96-1.22x, of 8 at 1.26-2.68x (reach, push, door-open, sweep).
MIN_GROUP = 3


class MetaWorldStepper(BatchStepper):
    """Steps a worker's ``MetaWorldEnv``s (see the module's docstring).

    :param min_group: the fewest slots of a class that step as one ``BatchedSawyer``; fewer step one by one.
    """

    all_info_keys = INFO_KEYS

    def __init__(self, envs: Sequence[Any], nthread: int = 1, min_group: int = MIN_GROUP):
        self.envs = list(envs)
        self.nthread = nthread
        self.min_group = min_group
        # (rows, the BatchedSawyer over those rows' class envs), one per batched class of the call.
        self.groups: List[Tuple[np.ndarray, BatchedSawyer]] = []
        # row -> (its group's BatchedSawyer, its index there)
        self.where: Dict[int, Tuple[BatchedSawyer, int]] = {}
        self.count = 0  # the rows of the call (assign)
        self.last: Tuple[int, list, dict] = (0, [], {})  # the last step's rows, groups and single rows' infos

    def release(self) -> None:
        for _, sawyer in self.groups:
            for j in range(len(sawyer.envs)):
                sawyer.sync(j)

    def assign(self, count: int) -> None:
        inner = [env._env for env in self.envs[:count]]
        by_class: Dict[type, List[int]] = {}
        for i, env in enumerate(inner):
            if batched_spec(env) is not None:
                by_class.setdefault(type(env), []).append(i)
        # A group whose envs are the same objects keeps its batch (ML1's slots, call after call).
        previous = {tuple(map(id, sawyer.envs)): sawyer for _, sawyer in self.groups}
        groups = []
        for rows in by_class.values():
            if len(rows) < self.min_group:
                continue
            members = [inner[i] for i in rows]
            sawyer = previous.get(tuple(map(id, members)))
            if sawyer is None:
                sawyer = BatchedSawyer(members, self.nthread)
            groups.append((np.asarray(rows, dtype=np.intp), sawyer))
        self.groups, self.count = groups, count
        self.where = {int(i): (sawyer, j) for rows, sawyer in groups for j, i in enumerate(rows)}

    def before_reset(self, i: int) -> None:
        place = self.where.get(i)
        if place is not None:
            place[0].sync(place[1])

    def after_reset(self, i: int) -> None:
        place = self.where.get(i)
        if place is not None:
            place[0].load(place[1])

    def step(self, rows: np.ndarray, actions: np.ndarray, info_keys: Sequence[str]) -> StepResult:
        rows = np.asarray(rows)
        n = len(rows)
        self._check(rows, actions)
        observations = np.empty((n, *self.envs[0].observation_space.shape))
        rewards = np.empty(n)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        infos = np.empty((n, len(info_keys)))
        stepped = []  # (rows, BatchedSawyer) of the groups stepped, for info_types
        self.last = (n, stepped, {})
        single = np.ones(n, dtype=np.bool_)
        every = n == self.count  # rows (sorted, distinct, below count) are then 0 .. count - 1
        for group_rows, sawyer in self.groups:
            if every:
                ks = group_rows
            else:
                ks = np.searchsorted(rows, group_rows)
                ks = ks[ks < n]
                if len(ks) != len(group_rows) or not np.array_equal(rows[ks], group_rows):
                    continue  # not every env of the group steps: each steps alone (below)
            observations[ks], rewards[ks], truncated[ks], group_infos = sawyer.step(actions[ks], info_keys)
            for c, key in enumerate(info_keys):
                infos[ks, c] = _info(group_infos, key)
            stepped.append((ks, sawyer))
            single[ks] = False
        for k in np.flatnonzero(single):
            i = int(rows[k])
            place = self.where.get(i)
            if place is not None:
                place[0].sync(place[1])
            observations[k], rewards[k], terminated[k], truncated[k], info = self.envs[i].step(actions[k])
            if place is not None:
                place[0].load(place[1])
            for c, key in enumerate(info_keys):
                infos[k, c] = _info(info, key)
            self.last[2][int(k)] = info
        return observations, rewards, terminated, truncated, infos

    def info_types(self) -> List[Any]:
        """The last step's rows' infos that the envs' own code returned (the rows stepped one at a time, and those
        a ``BatchedSawyer`` handed to the env's ``evaluate_state``), and the other rows' keys and types (their
        class's ``info_types``, with the step's exceptions: ``BatchedSawyer.typed``)."""
        n, stepped, singles = self.last
        types: List[Any] = [None] * n
        for ks, sawyer in stepped:
            for j, k in enumerate(ks):
                own = sawyer.own_infos.get(j)
                types[int(k)] = own if own is not None else sawyer.row_info_types(j)
        for k, info in singles.items():
            types[k] = info
        return types

    def _check(self, rows: np.ndarray, actions: np.ndarray) -> None:
        """The contract's rows (``BatchStepper.step``), and an action for each; ~3 us, against a step's ms."""
        n = len(rows)
        if n and (rows[0] < 0 or rows[-1] >= self.count or not (np.diff(rows) > 0).all()):
            raise ValueError(f"rows {rows.tolist()} are not sorted, distinct rows below {self.count} (the "
                             "slots of the last assign(count); call assign before stepping)")
        if len(actions) != n:
            raise ValueError(f"{len(actions)} actions for {n} rows: one action per stepping row")

    def close(self) -> None:
        self.groups, self.where = [], {}


def _info(info: Dict[str, Any], key: str) -> Any:
    try:
        return info[key]
    except KeyError:
        raise ValueError(f"Meta-World's step info has no {key!r} (its keys: {sorted(info)}); the sampler "
                         "carries info_keys=..., which need a value under each key at every step: pass keys it "
                         "returns") from None
