"""From a backend's trajectory arrays to checked, per-task episodes, trials or transitions."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np
import torch

from maml_rl.data.episodes import BatchEpisodes
from maml_rl.data.transitions import Transitions
from maml_rl.data.trials import TrialBatch

from .errors import EnvOutputError
from .rollout.trial import Trial
from .settings.workload import Workload
from .workers.buffers import HORIZON, TERMINATED, Trajectories


def check_outputs(trajectories: Trajectories, tasks: Sequence[Any], workload: Workload) -> None:
    """Refuse what the env returned that would silently poison the losses: non-finite
    observations or rewards, and, for an env without a time limit, episodes it never ended."""
    views, batch_size = trajectories, workload.batch_size
    num_slots = len(tasks) * batch_size
    lengths = views.lengths[:num_slots]
    horizon = int(lengths.max())
    valid = np.arange(horizon)[:, None] < lengths[None, :]
    observations = views.observations[:horizon, :num_slots]
    for name, values in (("observation", observations), ("reward", views.rewards[:horizon, :num_slots])):
        if not np.issubdtype(values.dtype, np.floating):
            continue
        # Checked as stored: episodes hold float32, where a float64 value beyond its range is inf.
        finite = np.isfinite(values.astype(np.float32, copy=False)).reshape(horizon, num_slots, -1).all(axis=2)
        bad = np.argwhere(valid & ~finite)
        if len(bad):
            t, slot = (int(i) for i in bad[0])
            # Observation row t comes from step t - 1 (row 0 from reset); reward row t from step t.
            step = t if name == "reward" else t - 1
            where = "from reset()" if step < 0 else f"from step() {step}"
            raise EnvOutputError(
                f"{workload.env_name} returned a non-finite {name} {values[t, slot].tolist()!r} {where} "
                f"of env slot {slot} (task {tasks[slot // batch_size]!r}), in {len(bad)} place(s) in all. "
                f"Check the env; a value beyond the range of float32 (the dtype of episodes) also becomes inf."
            )
    if workload.horizon_is_cap:
        unended = np.flatnonzero(views.end_reason[:num_slots] == HORIZON)
        if len(unended):
            slot = int(unended[0])
            raise EnvOutputError(
                f"{workload.env_name} has no time limit and did not end the episode of env slot {slot} "
                f"(task {tasks[slot // batch_size]!r}) within {workload.spec.horizon} steps, the sampler's safety "
                "cap: pass max_episode_steps= to the sampler (or wrap the env in gymnasium's TimeLimit)."
            )


def _task_major(trajectories: Trajectories, K: int, B: int):
    """``(lengths [K, B], per_task)``: ``per_task(array)`` is one masked copy of the used
    part of a ``[T, S, ...]`` array, laid out ``[K, T, B, ...]`` so that each task's
    tensors are contiguous."""
    lengths = torch.from_numpy(trajectories.lengths[:K * B].copy())
    horizon = int(lengths.max())
    invalid = (torch.arange(horizon).unsqueeze(1) >= lengths.unsqueeze(0)).view(horizon, K, B).transpose(0, 1)

    def per_task(array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(array[:horizon, :K * B])
        rest = tensor.shape[2:]
        # Always a copy: `.contiguous()` would return a view of the shared
        # buffer when K == 1 or horizon == 1, and the next rollout would
        # overwrite the episodes handed out by this one.
        tensor = tensor.reshape(horizon, K, B, *rest).transpose(0, 1).clone(memory_format=torch.contiguous_format)
        # Rows past an episode's end hold stale values from earlier calls.
        return tensor.masked_fill_(invalid.reshape(K, horizon, B, *([1] * len(rest))), 0)

    return lengths.view(K, B), per_task


def to_episodes(trajectories: Trajectories, tasks: Sequence[Any], workload: Workload, gamma: float,
                device) -> List[BatchEpisodes]:
    """One masked copy of the used part of the buffers, laid out task-major
    so that each task's ``[T, B, ...]`` tensors are contiguous."""
    views, info_keys = trajectories, workload.spec.info_keys
    K, B = len(tasks), workload.batch_size
    lengths, per_task = _task_major(views, K, B)
    observations, actions, rewards = (per_task(a) for a in (views.observations, views.actions, views.rewards))
    infos = per_task(views.infos) if info_keys else None
    return [
        BatchEpisodes(observations[k], actions[k], rewards[k], lengths[k], task=task, gamma=gamma, device=device,
                      infos=None if infos is None else
                      {key: infos[k, ..., i] for i, key in enumerate(info_keys)})
        for k, task in enumerate(tasks)
    ]


def to_trials(trajectories: Trajectories, tasks: Sequence[Any], workload: Workload, gamma: float, device,
              trial: Trial) -> List[TrialBatch]:
    """Per-task :class:`TrialBatch` es, with what a recurrent policy recorded
    (log-probs, the states at chunk starts and after the last step), and the
    inputs it saw, so that ``policy_inputs()`` and a learner rebuild them exactly."""
    episodes, chunk = trial.episodes, trial.chunk
    start = None if trial.start is None else (trial.start.actions, trial.start.rewards, trial.start.dones)
    views, info_keys = trajectories, workload.spec.info_keys
    K, B = len(tasks), workload.batch_size
    lengths, per_task = _task_major(views, K, B)
    observations, actions, rewards, dones = (per_task(a) for a in (views.observations, views.actions, views.rewards,
                                                                     views.dones))
    infos = per_task(views.infos) if info_keys else None
    recorded = trajectories.recorded
    log_probs = per_task(recorded["log_probs"]) if "log_probs" in recorded else None

    def slot_major(name: str) -> Optional[torch.Tensor]:
        if name not in recorded:
            return None
        array = torch.from_numpy(np.ascontiguousarray(recorded[name][:, :K * B]))
        return array.reshape(array.shape[0], K, B, *array.shape[2:]).transpose(0, 1)

    chunk_states, final_state = slot_major("chunk_states"), slot_major("final_state")
    if chunk_states is not None:
        # The chunks that start within the longest trial.
        chunk_states = chunk_states[:, :-(-observations.shape[1] // chunk)]
    starts = None if start is None else [tuple(torch.from_numpy(np.asarray(a[k * B:(k + 1) * B])) for a in start)
                                         for k in range(K)]
    batches = [
        TrialBatch(observations[k], actions[k], rewards[k], lengths[k], task=task, gamma=gamma, device=device,
                   infos=None if infos is None else {key: infos[k, ..., i] for i, key in enumerate(info_keys)},
                   dones=dones[k], episodes_per_trial=episodes,
                   log_probs=None if log_probs is None else log_probs[k],
                   chunk_states=None if chunk_states is None else chunk_states[k].clone(), chunk=chunk,
                   final_state=None if final_state is None else final_state[k, 0].clone(),
                   start=None if starts is None else starts[k], num_categories=workload.spec.num_categories)
        for k, task in enumerate(tasks)
    ]
    for batch in batches:
        batch.input_format, batch.context_reset = trial.inputs, trial.reset_each_episode
    return batches


def to_transitions(trajectories: Trajectories, tasks: Sequence[Any], workload: Workload, device) -> List[Transitions]:
    """Per-task :class:`Transitions`: every valid step, slot by slot, with the next observation (the
    ``final_observations`` row at an episode's end) and the end split into terminated and truncated."""
    views, info_keys = trajectories, workload.spec.info_keys
    K, B = len(tasks), workload.batch_size
    S = K * B
    lengths = views.lengths[:S]
    T = int(lengths.max())
    valid = np.arange(T)[:, None] < lengths[None, :]
    codes = views.dones[:T, :S]
    ends = codes > 0
    # The episode each step belongs to: how many of the slot's episodes ended before it.
    episode = np.cumsum(ends, axis=0) - ends
    slot_of, t_of = np.nonzero(valid.T)  # slot-major: each slot's steps in order
    observations = views.observations[t_of, slot_of]
    # Row t + 1 where the episode goes on; an episode's last step (a Ray group's copy may stop at its
    # last row) takes its final observation below.
    next_observations = views.observations[np.minimum(t_of + 1, len(views.observations) - 1), slot_of]
    at_end = ends[t_of, slot_of]
    next_observations[at_end] = views.final_observations[episode[t_of, slot_of][at_end], slot_of[at_end]]
    terminated = codes[t_of, slot_of] == 1 + TERMINATED
    per_slot = np.bincount(slot_of, minlength=S)
    bounds = np.concatenate([[0], np.cumsum(per_slot.reshape(K, B).sum(1))])

    def tensor(array, dtype=None):
        return torch.as_tensor(np.ascontiguousarray(array), dtype=dtype, device=device)

    actions = views.actions[t_of, slot_of]
    action_dtype = torch.int64 if np.issubdtype(actions.dtype, np.integer) else torch.float32
    columns = dict(observations=tensor(observations, torch.float32), actions=tensor(actions, action_dtype),
                   rewards=tensor(views.rewards[t_of, slot_of], torch.float32),
                   next_observations=tensor(next_observations, torch.float32),
                   terminated=tensor(terminated), truncated=tensor(at_end & ~terminated))
    infos = {key: tensor(views.infos[t_of, slot_of, i], torch.float64) for i, key in enumerate(info_keys)}
    return [Transitions(**{name: column[lo:hi] for name, column in columns.items()}, task=task,
                        infos={key: value[lo:hi] for key, value in infos.items()})
            for task, lo, hi in zip(tasks, bounds[:-1], bounds[1:])]
