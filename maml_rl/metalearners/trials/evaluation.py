"""A trial learner's evaluation: return and success by attempt (episode of the trial), then the evaluation
episodes after adaptation; with the context reset at each attempt, how much of the gain is memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from maml_rl.data.trials import stack_start
from maml_rl.policies.trial_state import records_state

__all__ = ["evaluate_trials"]


def evaluate_trials(sampler, tasks: list, episodes_per_trial: int, reward_scale: float, evaluation_episodes: int,
                    actions: str, gamma: float, device, inputs: Any = "rl2",
                    reset_context: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Meta-World's protocol for recurrent agents on ``tasks``: a trial of
    ``episodes_per_trial`` sampled adaptation episodes per slot, then
    ``evaluation_episodes`` episodes that each restart from the state the
    adaptation reached (with ``actions``: ``"mean"`` as Meta-World); ``inputs`` as
    ``rollout_trials``'.

    A policy whose state is its inputs (no state to restart from) runs its evaluation episodes in the
    trial itself, after the adaptation episodes (``actions`` must then be ``"sample"``). With
    ``reset_context`` every episode starts from the policy's initial state (same weights, no memory).

    :return: ``[N + 1, len(tasks)]`` mean returns (rows: each adaptation
        episode, then the evaluation episodes), and the success rates alike
        (``None`` without ``success``).
    """
    N = episodes_per_trial
    common = dict(reward_scale=reward_scale, inputs=inputs, gamma=gamma, device=device)
    if records_state(sampler.policy):
        adapted = sampler.rollout_trials(tasks, N, reset_each_episode=reset_context, **common)
        # Without memory the evaluation episodes start afresh too: from the initial state.
        start = None if reset_context else stack_start(adapted)
        evaluations = [sampler.rollout_trials(tasks, 1, start=start, actions=actions, **common)
                       for _ in range(evaluation_episodes)]
        values = [[(b.episode_returns(), b.episode_success() if "success" in b.infos else None) for b in adapted]]
        values += [[(b.episode_returns(), b.episode_success() if "success" in b.infos else None) for b in batches]
                   for batches in evaluations]
        rows = [values[0], *[[(r[:1], s if s is None else s[:1]) for r, s in v] for v in values[1:]]]
    else:
        if actions != "sample":
            raise ValueError(f"{type(sampler.policy).__name__}'s state is its inputs: its evaluation episodes run "
                             "inside the trial, whose actions are sampled; evaluate with --eval-actions sample")
        trial = sampler.rollout_trials(tasks, N + evaluation_episodes, reset_each_episode=reset_context, **common)
        whole = [(b.episode_returns(), b.episode_success() if "success" in b.infos else None) for b in trial]
        rows = [[(r[:N], None if s is None else s[:N]) for r, s in whole],
                *[[(r[N + e:N + e + 1], None if s is None else s[N + e:N + e + 1]) for r, s in whole]
                  for e in range(evaluation_episodes)]]

    def per_task(values: list) -> np.ndarray:  # [n, B] tensors per task -> [n, tasks]
        return np.stack([np.nanmean(v.cpu().numpy(), axis=1) for v in values], axis=1)

    returns = per_task([r for r, _ in rows[0]])
    returns_eval = np.mean([per_task([r for r, _ in row])[0] for row in rows[1:]], axis=0)
    returns = np.concatenate([returns, returns_eval[None]])
    if any(s is None for _, s in rows[0]):
        return returns, None
    success = per_task([s for _, s in rows[0]])
    success_eval = np.mean([per_task([s for _, s in row])[0] for row in rows[1:]], axis=0)
    return returns, np.concatenate([success, success_eval[None]])
