"""The backend seam: where a rollout's envs run and its policy acts.

``MultiTaskSampler`` draws the tasks, adapts, checks and assembles episodes;
a backend turns a :class:`~maml_rl.samplers.rollout.request.RolloutRequest`
into :class:`~maml_rl.samplers.workers.buffers.Trajectories`.
``LocalBackend`` runs it on this machine (an env pool of ChildEnv processes,
or this process); ``RayBackend`` runs contiguous groups of whole tasks on
sampling actors across a Ray cluster. A new backend is a new file
implementing :class:`RolloutBackend`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Dict, List

from ..rollout.request import RolloutRequest
from ..workers.buffers import Trajectories


class RolloutBackend(ABC):
    """Runs rollouts; one call at a time (the sampler serialises them)."""

    @abstractmethod
    def run(self, request: RolloutRequest, device) -> Trajectories:
        """Roll out ``request``, the policy evaluated on ``device``. Local
        backends return views of their buffers, valid until the next call."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers; idempotent. A failed ``run`` leaves the backend
        usable: the next call starts what it needs afresh."""

    @abstractmethod
    def describe(self) -> str:
        """Where the rollouts run, in words."""

    @property
    @abstractmethod
    def worker_pids(self) -> List[int]:
        """Process ids of the live processes that step envs (ChildEnv workers,
        or Ray sampling actors); empty when this process steps them."""

    @property
    def stats(self) -> Dict[str, Any]:
        """What the last rollout moved (the Ray backend's transfers); empty here."""
        return {}
