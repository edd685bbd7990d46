"""ChildEnv, the per-env stepper: one worker's env slots, stepped one env at a time.

A worker process (``entry.worker_main``) and the in-process pool run the
same ChildEnv, so both modes execute exactly the same code. Torch-free.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from .buffers import HORIZON, TERMINATED, TRUNCATED, BufferSpec, BufferViews


class ChildEnv:
    """The envs of one worker and the stepping of the slots assigned to them.

    Used inside a worker process, and directly by the in-process mode
    (``num_workers=0``), so both run exactly the same code.

    :param env_fn: callable returning a meta-learning gymnasium env.
    :param num_envs: how many envs to build (the most slots this worker is
        ever given in one call).
    :param buffers: numpy views of the trajectory buffers.
    :param index: the worker's index into the per-worker arrays.
    :param spec: the buffers' spec: the info keys written into ``buffers.infos``,
        and how a ``Discrete`` space's ``start`` maps recorded actions to the env's.
    """

    def __init__(self, env_fn: Callable[[], Any], num_envs: int, buffers: BufferViews, index: int,
                 spec: BufferSpec):
        self.buffers = buffers
        self.index = index
        self.info_keys = tuple(spec.info_keys)
        self.action_start = spec.action_start
        self.horizon = spec.horizon
        # Observation dtypes that may be stored in the buffer's (its own, and those that cast within their kind).
        self.fitting_dtypes = {buffers.observations.dtype}
        self.envs: List[Any] = [env_fn() for _ in range(num_envs)]
        self.first_slot = 0
        self.tasks: List[Any] = []
        self.active: List[int] = []
        # Where the worker is, so an error can name the slot and task.
        self.current_slot: Optional[int] = None
        self.current_operation = "start-up"
        # Added to slot numbers in messages (a Ray actor's slots are part of a larger call).
        self.slot_offset = 0

    def reset_task(self, first_slot: int, tasks: Sequence[Any], slot_offset: int = 0) -> None:
        """Give this worker slots ``first_slot .. first_slot + len(tasks)``
        and set each slot's env to its task; messages name slot ``s`` as
        ``s + slot_offset``."""
        if len(tasks) > len(self.envs):
            raise ValueError(f"{len(tasks)} slots assigned to a worker with {len(self.envs)} envs")
        self.first_slot = first_slot
        self.slot_offset = slot_offset
        self.tasks = list(tasks)
        self.current_operation = "reset_task"
        for i, task in enumerate(self.tasks):
            self.current_slot = first_slot + i
            self.envs[i].unwrapped.reset_task(task)
        self.current_slot = None
        self.active = []
        self.buffers.active[self.index] = 0

    def reset(self, seeds: Sequence[int]) -> None:
        """Reset every assigned slot with its seed and write the first observations.

        ``seeds`` is one seed per slot (one episode each), or ``[slots, E]``:
        a trial of ``E`` episodes per slot, the env reset with the next
        seed whenever an episode ends, until the ``E``-th ends.
        """
        seeds = np.asarray(seeds, dtype=np.uint64)
        self.trial_seeds = seeds.reshape(len(seeds), -1) if seeds.size else seeds.reshape(0, 1)
        n, episodes = self.trial_seeds.shape
        b = self.buffers
        self.current_operation = "reset"
        for i in range(n):
            slot = self.first_slot + i
            self.current_slot = slot
            self._reset_slot(i, slot, int(self.trial_seeds[i, 0]), 0)
            # 0 until the episode ends: the driver checks the actions of these slots only.
            b.lengths[slot] = 0
        first = self.first_slot
        b.dones[:, first:first + n] = 0
        # Per slot: the episode it runs and the step at which that episode ends at the latest.
        self.episode = [0] * n
        self.episode_end = [min(self.horizon, b.actions.shape[0])] * n
        self.current_slot = None
        self.active = list(range(first, first + n))
        self.buffers.active[self.index] = len(self.active)

    def _reset_slot(self, i: int, slot: int, seed: int, row: int) -> None:
        """Reset env ``i`` with ``seed``; its observation into ``observations[row, slot]``."""
        observations = self.buffers.observations[row]
        shape = observations.shape[1:]
        observation, _ = self.envs[i].reset(seed=seed)
        if getattr(observation, "shape", None) != shape:
            raise ValueError(_bad_observation(self.envs[i], observation, shape, "reset"))
        if observation.dtype not in self.fitting_dtypes:
            self._check_dtype(self.envs[i], observation, "reset")
        _store_cast(observations, slot, observation)

    def _episode_ended(self, slot: int, t: int, reason: int, final_observation: np.ndarray) -> bool:
        """Record the end of the slot's episode at step ``t`` and the observation it ended on; reset its
        env when its trial has episodes left. Whether the slot keeps running."""
        b, i = self.buffers, slot - self.first_slot
        b.dones[t, slot] = 1 + reason
        finals = b.final_observations[self.episode[i]]
        if final_observation.dtype is finals.dtype:
            finals[slot] = final_observation
        else:
            _store_cast(finals, slot, final_observation)
        episode = self.episode[i] + 1
        if episode < self.trial_seeds.shape[1] and t + 1 < b.actions.shape[0]:
            self.current_operation = f"reset (episode {episode} of the trial) after step {t}"
            self._reset_slot(i, slot, int(self.trial_seeds[i, episode]), t + 1)
            self.current_operation = f"step {t}"
            self.episode[i] = episode
            self.episode_end[i] = min(t + 1 + self.horizon, b.actions.shape[0])
            return True
        b.lengths[slot] = t + 1
        b.end_reason[slot] = reason
        return False

    def step(self, t: int) -> None:
        """Step every slot whose episode is still running, with ``actions[t]``."""
        b = self.buffers
        actions, rewards, next_observations = b.actions[t], b.rewards[t], b.observations[t + 1]
        infos, info_keys = b.infos[t], self.info_keys
        shape = next_observations.shape[1:]
        envs, first_slot, episode_end = self.envs, self.first_slot, self.episode_end
        # The env gets its own copy of a Box action (an env that clips in place
        # must not rewrite the record), a Discrete index shifted by the space's start.
        box, start, fitting = actions.ndim > 1, self.action_start, self.fitting_dtypes
        stored = next_observations.dtype
        self.current_operation = f"step {t}"
        running = []
        for slot in self.active:
            self.current_slot = slot
            env = envs[slot - first_slot]
            action = actions[slot].copy() if box else actions[slot] + start
            observation, reward, terminated, truncated, info = env.step(action)
            # numpy would silently broadcast a scalar or a wrong shape into the row.
            # (Attribute and isinstance checks: np.shape/np.ndim cost ~4 us a step.)
            if getattr(observation, "shape", None) != shape:
                raise ValueError(_bad_observation(env, observation, shape, "step"))
            if observation.dtype not in fitting:
                self._check_dtype(env, observation, "step")
            if not isinstance(reward, _SCALARS):
                _check_reward(env, reward)
            rewards[slot] = reward
            # A truthy string ("False") or None would end or continue the episode silently.
            if terminated.__class__ not in _FLAGS:
                _check_flag(env, "terminated", terminated)
            if truncated.__class__ not in _FLAGS:
                _check_flag(env, "truncated", truncated)
            if info_keys:
                _write_info(env, info, info_keys, infos[slot])
            if terminated or truncated or t + 1 == episode_end[slot - first_slot]:
                reason = TERMINATED if terminated else TRUNCATED if truncated else HORIZON
                if self._episode_ended(slot, t, reason, observation):
                    running.append(slot)
            else:
                if observation.dtype is stored:
                    next_observations[slot] = observation
                else:
                    _store_cast(next_observations, slot, observation)
                running.append(slot)
        self.current_slot = None
        self.active = running
        b.active[self.index] = len(running)

    def _check_dtype(self, env: Any, observation: np.ndarray, call: str) -> None:
        """Accept an observation dtype that casts to the buffer's within its kind
        (float64 to float32, say); refuse one that would be truncated (floats
        into an integer space)."""
        stored = self.buffers.observations.dtype
        if not np.can_cast(observation.dtype, stored, casting="same_kind"):
            raise ValueError(
                f"{_env_name(env)}.{call}() returned {observation.dtype} observations, but its observation_space "
                f"has dtype {stored}, into which they would be truncated (e.g. 2.9 -> 2): declare the space with "
                f"dtype={observation.dtype} or return {stored} observations"
            )
        self.fitting_dtypes.add(observation.dtype)

    def position(self) -> Tuple[str, Optional[int], Any]:
        """Where the worker is: the operation, and the slot (as messages number it) and its task,
        or ``None`` for both between slots."""
        if self.current_slot is None:
            return self.current_operation, None, None
        i = self.current_slot - self.first_slot
        task = self.tasks[i] if 0 <= i < len(self.tasks) else None
        return self.current_operation, self.current_slot + self.slot_offset, task

    def describe_failure(self) -> str:
        """Where the last exception happened: operation, slot and task."""
        operation, slot, task = self.position()
        where = f"during {operation}"
        if slot is not None:
            where += f" in env slot {slot} (task {task!r})"
        return where

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


def _store_cast(row: np.ndarray, slot: int, observation: np.ndarray) -> None:
    """``row[slot] = observation`` for an observation of another dtype than the buffer's.

    A float64 value beyond float32's range becomes inf in a float32 buffer; the driver then names
    it as a non-finite observation with its env, slot and step (``check_outputs``), so numpy's
    "overflow encountered in cast" is expected here and silenced, and only here (not around the
    env's own code, whose warnings stay). Observations of the buffer's own dtype skip this (the
    errstate costs ~1 us).
    """
    with np.errstate(over="ignore"):
        row[slot] = observation


# Rewards that need no further check (numpy would turn the string "1.5" into 1.5 and None into nan).
_SCALARS = (float, int, np.number)
# terminated/truncated types that need no further check.
_FLAGS = frozenset((bool, np.bool_))


def _check_reward(env: Any, reward: Any) -> None:
    """Refuse a reward that is not a real number: an array of another shape, a string, None."""
    if np.ndim(reward) != 0:
        raise ValueError(f"{_env_name(env)}.step() returned a reward of shape {np.shape(reward)}; "
                         "a reward must be a scalar")
    if not (isinstance(reward, np.ndarray) and reward.dtype.kind in "biuf"):
        raise TypeError(f"{_env_name(env)}.step() returned the reward {reward!r} of type {type(reward).__name__}; "
                        "a reward must be a real number (float, int or a numpy number)")


def _check_flag(env: Any, name: str, value: Any) -> None:
    """Accept a bool, a numpy bool or an integer 0/1 (unambiguous; some older envs return them) as
    ``terminated``/``truncated``; refuse anything else, whose truth would decide the episode's end."""
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype == np.bool_:
        return
    raise TypeError(f"{_env_name(env)}.step() returned {name}={value!r} of type {type(value).__name__}; "
                    f"{name} must be a bool (or numpy bool): return bool(...)")


def _write_info(env: Any, info: Any, keys: Sequence[str], row: np.ndarray) -> None:
    """``info[key]`` of each carried key into ``row``, as float64; a clear error for a missing or non-scalar value."""
    for i, key in enumerate(keys):
        try:
            row[i] = info[key]
        except (KeyError, TypeError, ValueError) as exc:
            present = sorted(info) if isinstance(info, dict) else type(info).__name__
            value = info.get(key, "<missing>") if isinstance(info, dict) else "<missing>"
            raise ValueError(
                f"{_env_name(env)}.step() returned info[{key!r}] = {value!r}, but the sampler carries "
                f"info_keys={tuple(keys)!r}, which need a number (or bool) under each key at every step "
                f"(the info has keys {present}); pass info_keys= with keys the env provides"
            ) from exc


def _env_name(env: Any) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None and getattr(spec, "id", None) else type(getattr(env, "unwrapped", env)).__name__


def _bad_observation(env: Any, observation: Any, shape: tuple, call: str) -> str:
    return (
        f"{_env_name(env)}.{call}() returned an observation of shape {np.shape(observation)} "
        f"({type(observation).__name__}), but its observation_space needs a numpy array of shape {shape}"
    )


def time_limit_wrapper(env: Any) -> Optional[gym.wrappers.TimeLimit]:
    """The outermost gymnasium ``TimeLimit`` around ``env``, if any."""
    wrapper = env
    while isinstance(wrapper, gym.Wrapper):
        if isinstance(wrapper, gym.wrappers.TimeLimit):
            return wrapper
        wrapper = wrapper.env
    return None


def time_limit(env: Any) -> Optional[int]:
    """The ``max_episode_steps`` of the outermost gymnasium ``TimeLimit`` around ``env``, if any."""
    wrapper = time_limit_wrapper(env)
    return None if wrapper is None else int(wrapper._max_episode_steps)


def assign_slots(num_slots: int, num_workers: int) -> List[range]:
    """Split ``num_slots`` into ``num_workers`` contiguous ranges of near-equal size."""
    bounds = np.linspace(0, num_slots, max(1, num_workers) + 1).round().astype(int)
    return [range(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]
