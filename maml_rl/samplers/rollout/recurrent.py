"""A recurrent policy on every slot of a trial rollout, its state carried across episode resets."""

from __future__ import annotations

import math
from typing import Dict, Optional, Union

import numpy as np
import torch
from torch.distributions import Categorical, Independent

from maml_rl.policies.trial_state import cat_states, records_state, select_state, state_bytes, state_rows

from ..errors import PolicyOutputError
from ..workers.buffers import BufferSpec, BufferViews
from .actions import ActionFunction, at_call_phase, task_seed
from .noise import actions_from_noise
from .request import RolloutRequest


class RecurrentActionFunction(ActionFunction):
    """The recurrent policy's step on every slot, with the state of each slot
    kept here, in this process, across the episodes of its trial.

    The policy's input at a slot's step ``t`` is the trial's input format
    (:class:`~maml_rl.policies.trial_inputs.InputFormat`, the policy's or the
    learner's) of what the buffers already hold: the observation
    ``observations[t]``, the previous step's ``actions[t - 1]``,
    ``rewards[t - 1]``, whether ``dones[t - 1]`` ended an episode (the trial's
    start values at ``t = 0``: zeros, or a :class:`~.request.TrialStart`'s) and
    the step's attempt. Only the slots that step advance their state (in
    partial mode the others are waiting). The state is the policy's own: it is
    handled only through :mod:`maml_rl.policies.trial_state`.

    Rows are grouped as for feed-forward policies: one call on ``[K, B]`` for a
    policy with ``supports_task_batches``, else one call per task on its
    ``B`` rows, so a task's numbers never depend on the others.

    Records, slot-major on axis 1: ``log_probs`` ``[T, S]`` (the behaviour
    policy's log-probability of each action) and, unless the policy's state is
    its inputs, ``chunk_states`` ``[C, S, *state]`` (the state before steps
    ``0, chunk, 2 chunk, ...``) and ``final_state`` ``[1, S, *state]`` (after
    each slot's last step).
    """

    def __init__(self, policy, request: RolloutRequest, device, noise: torch.Tensor, fallback: Optional[int],
                 spec: BufferSpec, env_name: str, views: BufferViews):
        super().__init__(policy, request, device, noise, fallback, spec, env_name)
        trial, slots = request.trial, request.slots
        S, T = request.num_slots, noise.shape[0]
        self.views = views
        self.format = trial.inputs
        self.reset_each_episode = trial.reset_each_episode
        self.task_batches = bool(getattr(policy, "supports_task_batches", False))
        self.records = records_state(policy)
        # A discrete previous action of -1 is none: its one-hot is zero (rl2_inputs).
        self._fresh = (np.full((S, *spec.action_shape), -1 if spec.discrete else 0, spec.action_dtype),
                       np.zeros(S, np.float32), np.zeros(S, np.uint8))
        if trial.start is not None:
            start = trial.start
            self.state = torch.tensor(start.state[slots.start:slots.stop], dtype=torch.float32, device=self.device)
            self.start = tuple(np.ascontiguousarray(a[slots.start:slots.stop])
                               for a in (start.actions, start.rewards, start.dones))
        else:
            self.state = self._initial_state(S)
            self.start = self._fresh
        if self.records:
            state_shape = tuple(policy.state_shape)
            if tuple(self.state.shape) != (S, *state_shape):
                raise PolicyOutputError(f"{self._policy_name()}'s state has shape {tuple(self.state.shape)} for "
                                        f"{S} rows; its state_shape {state_shape} says {(S, *state_shape)}")
        self.chunk = trial.chunk
        self.log_probs = np.zeros((T, S), np.float32)
        self.chunk_states = (np.zeros((math.ceil(T / self.chunk), S, *state_shape), np.float32)
                             if self.chunk and self.records else None)
        # Episodes each slot has finished before its current step (the attempt index), if the format reads it.
        self.attempts = np.zeros(S, np.int64) if self.format.attempt else None
        self._columns = np.arange(S)

    def _initial_state(self, n: int):
        with torch.no_grad():
            state = self.policy.initial_state(n, self.device)
        return state.to(torch.float32) if torch.is_tensor(state) else state

    @staticmethod
    def recorded_bytes(request: RolloutRequest, rows: int, policy) -> int:
        """Bytes of what this records and keeps for ``request`` (for the memory estimate): the log-probs and
        the state the policy declares (:func:`~maml_rl.policies.trial_state.state_bytes`), recorded at each
        chunk's start and the end, or, for a policy whose state is its inputs, held for a whole trial."""
        S, chunk = request.num_slots, request.trial.chunk
        if not records_state(policy):
            return 4 * S * rows + state_bytes(policy, S, rows)
        chunks = math.ceil(rows / chunk) if chunk else 0
        return 4 * S * rows + (chunks + 2) * state_bytes(policy, S, rows)

    def _previous(self, times: Union[int, np.ndarray], S: int):
        """The previous action, reward and done flag of each slot at its time."""
        v = self.views
        if isinstance(times, (int, np.integer)):
            if times == 0:
                return self.start
            return v.actions[times - 1, :S], v.rewards[times - 1, :S], v.dones[times - 1, :S]
        rows = np.maximum(times - 1, 0)
        first = times == 0
        out = []
        for array, start in zip((v.actions, v.rewards, v.dones), self.start):
            previous = array[rows, self._columns]
            if first.any():
                previous[first] = start[first]
            out.append(previous)
        return tuple(out)

    @torch.no_grad()
    def __call__(self, observations: np.ndarray, noise: torch.Tensor, t: int, times=None,
                 stepping: Optional[np.ndarray] = None) -> np.ndarray:
        self._observations = observations
        S = len(observations)
        times = t if times is None else times
        stepping = np.ones(S, dtype=bool) if stepping is None else stepping
        obs = torch.tensor(observations, dtype=torch.float32, device=self.device)
        actions, rewards, dones = self._previous(times, S)
        state = self.state
        if self.reset_each_episode:
            # A slot whose previous step ended an episode starts afresh: the initial state, a trial's first input.
            # Only a stepping slot: a waiting one's flags (partial mode) may still be its worker's to write.
            ended = (dones != 0) & stepping
            if ended.any():
                state = self.state = select_state(self.policy, torch.from_numpy(ended).to(self.device),
                                                  self._initial_state(S), state)
                actions, rewards, dones = (np.where(ended.reshape(-1, *([1] * (a.ndim - 1))), fresh, a)
                                           for a, fresh in zip((actions, rewards, dones), self._fresh))
        attempts = None
        if self.attempts is not None:
            # A continuation's start done flag ends the previous trial, not an episode of this one.
            attempts = self.attempts + ((dones != 0) & (np.asarray(times) > 0))
            if self.reset_each_episode:
                attempts = np.zeros_like(attempts)
        inputs = self.format(obs, torch.tensor(actions, device=self.device), torch.tensor(rewards, device=self.device),
                             torch.tensor(dones, device=self.device),
                             None if attempts is None else torch.from_numpy(attempts).to(self.device),
                             self.spec.num_categories)
        seed = None if self.fallback_seed is None else self.fallback_seed + t
        K, B = self.num_tasks, self.batch_size
        if self.task_batches:
            # A recorded (tensor) state goes as [K, B, *state]; a policy's own state object stays as it is,
            # its rows task-major, for the policy to group.
            task_state = (at_call_phase(state.view(K, B, *state.shape[1:]), self.first_task) if self.records
                          else state)
            distribution, next_state = self.policy.step(at_call_phase(inputs.view(K, B, -1), self.first_task),
                                                        task_state)
            self._check_shape(distribution, S, t, None)
            acted = self._shaped(actions_from_noise(distribution, noise, seed, self.mode), S)
            log_probs = _log_prob(distribution, acted, (K, B), self.spec.discrete).reshape(S)
            if self.records:
                next_state = next_state.reshape(state.shape)
        else:
            parts, lps, states = [], [], []
            for k in range(K):
                rows = slice(k * B, (k + 1) * B)
                # Each task's rows aligned alike (see ActionFunction.__call__).
                distribution, task_state = self.policy.step(inputs[rows].clone() if k else inputs[rows],
                                                            state_rows(self.policy, state, rows, copy=bool(k)))
                self._check_shape(distribution, B, t, k)
                part = self._shaped(actions_from_noise(distribution, noise[rows], task_seed(seed, self.first_task + k),
                                                       self.mode), B)
                parts.append(part)
                lps.append(_log_prob(distribution, part, (B,), self.spec.discrete))
                states.append(task_state)
            acted, log_probs = torch.cat(parts), torch.cat(lps)
            next_state = cat_states(self.policy, states)
        if self.records and tuple(next_state.shape) != tuple(state.shape):
            raise PolicyOutputError(f"{self._policy_name()}.step() returned a state of shape "
                                    f"{tuple(next_state.shape)} for a state of shape {tuple(state.shape)}")
        if self.attempts is not None:
            self.attempts[stepping] = attempts[stepping]
        self._record(times, stepping, log_probs.cpu().numpy())
        self.state = select_state(self.policy, torch.from_numpy(stepping).to(self.device), next_state, state)
        return acted.numpy()

    def _record(self, times, stepping: np.ndarray, log_probs: np.ndarray) -> None:
        columns = self._columns[stepping]
        rows = np.full(len(columns), times) if isinstance(times, (int, np.integer)) else times[stepping]
        self.log_probs[rows, columns] = log_probs[stepping]
        if self.chunk_states is not None:
            starts = rows % self.chunk == 0
            if starts.any():
                state = self.state.cpu().numpy()
                self.chunk_states[rows[starts] // self.chunk, columns[starts]] = state[columns[starts]]

    def recorded(self) -> Dict[str, np.ndarray]:
        out = {"log_probs": self.log_probs}
        if self.records:
            out["final_state"] = self.state.cpu().numpy()[None]
        if self.chunk_states is not None:
            out["chunk_states"] = self.chunk_states
        return out


def _log_prob(distribution, actions: torch.Tensor, batch: tuple, discrete: bool) -> torch.Tensor:
    """The log-probability of ``actions`` (flat rows) under ``distribution`` (batch shape ``batch``)."""
    if discrete:
        base = distribution.base_dist if isinstance(distribution, Independent) else distribution
        if isinstance(base, Categorical):
            # -1 marks a row without a distribution, refused before any env sees it.
            return distribution.log_prob(actions.clamp(min=0).reshape(batch).to(base.probs.device)).float()
    event = tuple(distribution.event_shape)
    return distribution.log_prob(actions.reshape(*batch, *event).to(_device(distribution))).float()


def _device(distribution) -> torch.device:
    base = distribution.base_dist if isinstance(distribution, Independent) else distribution
    for name in ("loc", "probs", "logits"):
        if hasattr(base, name):
            return getattr(base, name).device
    return torch.device("cpu")
