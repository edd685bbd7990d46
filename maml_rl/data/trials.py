"""Batches of trials: several episodes of one task run back to back by one slot.

RL² treats a trial as one long episode: returns and advantages run across
the episode boundaries inside it, and the policy's state is carried across
them. A :class:`TrialBatch` is therefore a :class:`~maml_rl.data.episodes.BatchEpisodes`
whose "episodes" are trials (its ``returns``, ``compute_advantages`` and a
fitted ``LinearFeatureBaseline`` apply to whole trials, the time feature
counting steps of the trial), plus where each episode of the trial ends.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Optional

import numpy as np
import torch

from maml_rl.data.episodes import ArrayLike, BatchEpisodes
from maml_rl.policies.trial_inputs import InputFormat

__all__ = ["TrialBatch"]


class TrialBatch(BatchEpisodes):
    """``B`` trials of one task, time-major ``[T, B, ...]``, zero past each trial's end.

    :param dones: ``[T, B]``: ``1 + EndReason`` at the last step of each episode
        of the trial (terminated, truncated or cut at the horizon), 0 elsewhere.
    :param episodes_per_trial: ``N``, the episodes each trial was to run.
    :param log_probs: ``[T, B]`` the behaviour policy's log-probability of each action.
    :param chunk_states: ``[C, B, *state]``: a recurrent policy's state before steps
        ``0, chunk, 2 chunk, ...`` of the trial (``chunk``: the BPTT chunk length).
    :param final_state: ``[B, *state]``: its state after each trial's last step.
    :param start: ``(actions, rewards, dones)`` ``[B, ...]`` the previous values the
        trial's first input saw (zeros for a fresh trial; a discrete action -1, none).
    :ivar input_format: how the policy's inputs were built (set by the sampler; the policy's or learner's).
    :ivar context_reset: the policy's state was reset at each episode's start (an evaluation's ablation).
    """

    input_format: InputFormat = InputFormat()
    context_reset: bool = False

    @property
    def inputs(self) -> str:
        """The input format's name (``"rl2"``, ``"rl2-autoreset"``, ``"observations"``...)."""
        return self.input_format.name

    @property
    def reward_scale(self) -> float:
        """The factor of the previous reward in the policy's input."""
        return self.input_format.reward_scale

    def __init__(self, observations: ArrayLike, actions: ArrayLike, rewards: ArrayLike, lengths: ArrayLike, *,
                 dones: ArrayLike, episodes_per_trial: int, log_probs: Optional[ArrayLike] = None,
                 chunk_states: Optional[ArrayLike] = None, chunk: Optional[int] = None,
                 final_state: Optional[ArrayLike] = None, start: Optional[tuple] = None,
                 num_categories: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(observations, actions, rewards, lengths, **kwargs)
        device = self.device
        self.dones = torch.as_tensor(dones, dtype=torch.uint8, device=device)
        if tuple(self.dones.shape) != tuple(self.rewards.shape):
            raise ValueError(f"dones must be [T, B] = {tuple(self.rewards.shape)}, got {tuple(self.dones.shape)}")
        self.episodes_per_trial = int(episodes_per_trial)
        self.log_probs = None if log_probs is None else torch.as_tensor(log_probs, dtype=torch.float32, device=device)
        self.chunk_states = None if chunk_states is None else torch.as_tensor(chunk_states, device=device)
        self.chunk = chunk
        self.final_state = None if final_state is None else torch.as_tensor(final_state, device=device)
        self.num_categories = num_categories
        if start is None:
            B = self.batch_size
            none = -1 if num_categories is not None else 0  # no previous action (see rl2_inputs)
            start = (torch.full((B, *self.action_shape), none, dtype=self.actions.dtype), torch.zeros(B),
                     torch.zeros(B))
        self.start = tuple(torch.as_tensor(np.asarray(a) if not torch.is_tensor(a) else a, device=device)
                           for a in start)

    # ------------------------------------------------------------ structure
    @property
    def episode_index(self) -> torch.Tensor:
        """``[T, B]`` int64: which episode of its trial each step belongs to."""
        ended = (self.dones != 0).to(torch.int64)
        return torch.cumsum(ended, 0) - ended

    @property
    def episodes_done(self) -> torch.Tensor:
        """``[B]`` the episodes each trial completed (fewer than ``N`` only if cut short)."""
        return ((self.dones != 0).to(torch.int64) * self.mask.to(torch.int64)).sum(0)

    def per_episode(self, values: torch.Tensor, reduce: str = "sum") -> torch.Tensor:
        """``[N, B]`` per-step ``values`` ``[T, B]`` reduced over each episode of the
        trial (``"sum"`` or ``"any"``); NaN for an episode a trial never reached."""
        N, B = self.episodes_per_trial, self.batch_size
        index = self.episode_index.clamp(max=N - 1)
        valid = self.mask > 0
        out = torch.zeros((N, B), dtype=torch.float64, device=self.device)
        src = torch.where(valid, values.to(torch.float64), torch.zeros((), dtype=torch.float64, device=self.device))
        if reduce == "any":
            src = (src != 0).to(torch.float64)
            out.scatter_reduce_(0, index, src, reduce="amax")
        else:
            out.scatter_add_(0, index, src)
        reached = torch.arange(N, device=self.device).unsqueeze(1) < self.episodes_done.unsqueeze(0)
        return torch.where(reached, out, torch.full_like(out, float("nan")))

    def episode_returns(self) -> torch.Tensor:
        """``[N, B]`` the undiscounted return of each episode of each trial."""
        return self.per_episode(self.rewards)

    def episode_success(self, key: str = "success") -> torch.Tensor:
        """``[N, B]`` 1.0 where ``infos[key]`` was non-zero at some step of that episode."""
        if key not in self.infos:
            carried = sorted(self.infos) or "none"
            raise KeyError(f"these trials carry no info {key!r} (carried: {carried}); "
                           f"sample them with MultiTaskSampler(..., info_keys=({key!r},))")
        return self.per_episode(self.infos[key], reduce="any")

    # ------------------------------------------------------- policy inputs
    def policy_inputs(self, reward_scale: Optional[float] = None) -> torch.Tensor:
        """``[T, B, in]`` the policy's input at every step, as the sampler built it with
        :attr:`input_format` (the observation, the previous step's action, scaled reward and
        done flag, ``start``'s at step 0, and the attempt if the format has it);
        ``reward_scale`` defaults to the one sampled with."""
        fmt = self.input_format
        if reward_scale is not None and float(reward_scale) != fmt.reward_scale:
            fmt = replace(fmt, reward_scale=float(reward_scale))
        if self.context_reset:
            raise ValueError("these trials reset the policy's context at each episode (an evaluation's "
                             "ablation): their inputs are not one trial's; sample them without it")
        actions, rewards, dones = self.start
        prev_actions = torch.cat([actions.to(self.actions.dtype).unsqueeze(0), self.actions[:-1]])
        prev_rewards = torch.cat([rewards.to(torch.float32).unsqueeze(0), self.rewards[:-1]])
        prev_dones = torch.cat([dones.to(torch.uint8).unsqueeze(0), self.dones[:-1]])
        return fmt(self.observations, prev_actions, prev_rewards, prev_dones,
                   self.episode_index if fmt.attempt else None, self.num_categories)

    def end_points(self) -> "tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]":
        """``(state, action, reward, done)`` after each trial's last step: where
        a continuation starts (``MultiTaskSampler.rollout_trials(start=...)``)."""
        if self.final_state is None:
            raise ValueError("these trials were not sampled by a recurrent policy: they have no final state")
        last = (self.lengths - 1).clamp(min=0)
        columns = torch.arange(self.batch_size, device=self.device)
        return (self.final_state, self.actions[last, columns], self.rewards[last, columns],
                self.dones[last, columns])

    def to(self, device: str | torch.device) -> "TrialBatch":
        super().to(device)
        for name in ("dones", "log_probs", "chunk_states", "final_state"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value.to(device))
        self.start = tuple(a.to(device) for a in self.start)
        return self

    def __repr__(self) -> str:
        return (f"TrialBatch(T={len(self)}, B={self.batch_size}, episodes_per_trial={self.episodes_per_trial}, "
                f"obs_shape={tuple(self.observation_shape)}, task={self.task!r})")


def stack_start(batches: "list[TrialBatch]") -> Mapping[str, np.ndarray]:
    """The end points of every batch, slot-major: what ``rollout_trials(start=...)`` takes."""
    parts = [batch.end_points() for batch in batches]
    names = ("state", "actions", "rewards", "dones")
    return {name: torch.cat([p[i] for p in parts]).detach().cpu().numpy() for i, name in enumerate(names)}
