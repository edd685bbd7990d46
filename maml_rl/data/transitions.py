"""Transitions of one task, flat over steps: what off-policy learners (PEARL's SAC) replay."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

import torch

__all__ = ["TransitionBatch", "Transitions"]


@dataclass
class Transitions:
    """Every step of a task's episodes, row ``i`` the transition ``(s, a, r, s', terminated, truncated)``.

    Rows run slot by slot, each slot's episodes in order, so each episode is a
    contiguous run of rows. ``next_observations`` of an episode's last step is
    the observation it ended on: the terminal one, or the one a time limit (or
    the sampler's horizon) cut at, from which a critic bootstraps; ``terminated``
    and ``truncated`` are never both set, and a step that ends no episode has
    neither.

    :ivar observations: ``[N, *obs]`` float32.
    :ivar actions: ``[N, *act]`` (float32, or int64 category indices).
    :ivar rewards: ``[N]`` float32.
    :ivar next_observations: ``[N, *obs]`` float32.
    :ivar terminated: ``[N]`` bool, the env's terminated flag at the episode's last step.
    :ivar truncated: ``[N]`` bool, an episode's last step that did not terminate.
    :ivar infos: per-step values of the carried info keys, each ``[N]`` float64.
    """

    observations: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_observations: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    task: Any = None
    infos: Dict[str, torch.Tensor] = field(default_factory=dict)
    actions_from: str = "sample"

    def __post_init__(self) -> None:
        n = len(self.rewards)
        for name in ("observations", "actions", "next_observations", "terminated", "truncated"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} rows, rewards {n}")
        if bool((self.terminated & self.truncated).any()):
            raise ValueError("a step cannot be both terminated and truncated")

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def episode_ends(self) -> torch.Tensor:
        """``[N]`` bool: the last step of each episode."""
        return self.terminated | self.truncated

    def episode_returns(self) -> torch.Tensor:
        """The undiscounted return of each episode, in row order (``[episodes]``)."""
        ends = torch.nonzero(self.episode_ends).flatten()
        sums = torch.cumsum(self.rewards.double(), 0)
        before = torch.cat([sums.new_zeros(1), sums[ends[:-1]]])
        return (sums[ends] - before).float()

    def episode_lengths(self) -> torch.Tensor:
        """The number of steps of each episode, in row order."""
        ends = torch.nonzero(self.episode_ends).flatten()
        return torch.diff(ends, prepend=ends.new_full((1,), -1))

    def split_episodes(self) -> List["Transitions"]:
        """One :class:`Transitions` per episode, in row order."""
        ends = torch.nonzero(self.episode_ends).flatten().tolist()
        out, start = [], 0
        for end in ends:
            out.append(self.rows(slice(start, end + 1)))
            start = end + 1
        return out

    def rows(self, index) -> "Transitions":
        """The transitions at ``index`` (a slice, an index tensor or a bool mask)."""
        return Transitions(self.observations[index], self.actions[index], self.rewards[index],
                           self.next_observations[index], self.terminated[index], self.truncated[index],
                           task=self.task, infos={key: value[index] for key, value in self.infos.items()},
                           actions_from=self.actions_from)


@dataclass
class TransitionBatch:
    """One iteration's collection of an off-policy learner: the transitions gathered with z from the
    prior (``prior``) and from the posterior (``posterior``), each a list over the collected tasks."""

    prior: List[Transitions]
    posterior: List[Transitions]

    @property
    def env_steps(self) -> int:
        return int(sum(len(t) for t in (*self.prior, *self.posterior)))
