"""The rollout backend seam: where a rollout's envs run and its policy acts.

``MultiTaskSampler`` draws the tasks, adapts, checks and assembles episodes;
a backend turns (tasks, parameters, seed, call number) into trajectory
arrays. ``LocalBackend`` runs them on this machine (an ``EnvPool`` of
ChildEnv processes or this process); ``RayBackend`` runs contiguous groups
of whole tasks on sampling actors across a Ray cluster. A new backend is a
new file implementing :class:`RolloutBackend`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

Params = Dict[str, torch.Tensor]
# What run() returns: numpy arrays, slot-major on the second axis.
#   observations [T, S, *obs], actions [T, S, *act], rewards [T, S],
#   infos [T, S, len(info_keys)], lengths [S], end_reason [S]  (T >= the longest episode; rows past an
#   episode's end hold anything and are masked when episodes are assembled).
Trajectories = SimpleNamespace


@dataclass(frozen=True)
class RolloutSpec:
    """What every backend needs to know about the sampler's rollouts (picklable).

    :param env_fn_bytes: the env factory, pickled with cloudpickle.
    :param env_name: the env's name, for messages.
    :param buffer_spec: horizon, observation/action shapes and dtypes.
    :param batch_size: slots (episodes) per task.
    :param partial: step each worker as soon as it is ready.
    :param start_method: of the ChildEnv processes.
    :param num_workers: ChildEnv processes (``0``: in the process itself);
        per sampling actor on Ray, ``None`` there meaning the actor's CPUs.
    :param batch_threads: threads of each MuJoCo fast-path ``Batch``
        (``None``: one env at a time).
    :param mujoco_batch: whether the fast path is used.
    """

    env_fn_bytes: bytes
    env_name: str
    buffer_spec: dict
    batch_size: int
    partial: bool
    start_method: str
    num_workers: Optional[int]
    batch_threads: Optional[int]
    mujoco_batch: bool

    @property
    def horizon(self) -> int:
        return int(self.buffer_spec["horizon"])


class RolloutBackend(ABC):
    """Runs rollouts; one call at a time (the sampler serialises them)."""

    @abstractmethod
    def run(self, tasks: Sequence[Any], per_task: List[Optional[Params]], seed: int, call: int, device,
            *, actions: str = "sample") -> Trajectories:
        """Roll out ``batch_size`` episodes of every task, task ``k``'s under
        ``per_task[k]`` (``None``: the policy's own parameters), with the
        seeds and noise of rollout ``call`` of ``seed``; ``actions="mean"``
        takes the policy's most likely actions instead of sampling."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers; idempotent. A failed ``run`` leaves the backend
        usable: the next call starts what it needs afresh."""


def trajectory_bytes(trajectories: Trajectories) -> int:
    """The size of the arrays of ``trajectories``."""
    return int(sum(np.asarray(getattr(trajectories, name)).nbytes
                   for name in ("observations", "actions", "rewards", "infos", "lengths", "end_reason")))
