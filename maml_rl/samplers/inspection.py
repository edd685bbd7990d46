"""What a MultiTaskSampler shows of how it runs: its settings under the constructor's names, its backend."""

from __future__ import annotations

from typing import Any, Dict, List, Union

import torch

from .backends.base import RolloutBackend
from .settings.execution import local_layout


class SamplerInspection:
    """Read-only views for :class:`~maml_rl.samplers.MultiTaskSampler` (``settings`` and ``_backend``)."""

    # Read-only views of the settings, under the constructor's names.
    backend = property(lambda self: self.settings.backend, doc="``\"local\"`` or ``\"ray\"``.")
    start_method = property(lambda self: self.settings.start_method)
    partial = property(lambda self: self.settings.partial)
    step_timeout = property(lambda self: self.settings.step_timeout,
                            doc="Seconds a worker process may take over one step (``None``: forever).")
    mujoco_batch = property(lambda self: self.settings.fast_path, doc="Whether the MuJoCo fast path is used.")
    batch_threads = property(lambda self: local_layout(self.settings).batch_threads,
                             doc="Threads of each fast-path ``Batch`` on this machine (``None``: per-env path).")

    @property
    def rollout_backend(self) -> RolloutBackend:
        """The backend, for inspection: ``worker_pids``, ``stats``, ``describe()``; a local one's ``pool``
        (its ``views`` and ``buffers``), a Ray one's ``where``, ``live`` and ``lost``."""
        return self._backend

    @property
    def worker_pids(self) -> List[int]:
        """Process ids of the live ChildEnv workers (or Ray actors); empty in process or before a rollout."""
        return self._backend.worker_pids

    @property
    def backend_stats(self) -> Dict[str, Any]:
        """What the last rollout moved on ``backend="ray"`` (actors, ``puts``, ``put_bytes``,
        ``result_bytes``, ``reruns``: docs/ray.md); empty for the local backend."""
        return self._backend.stats

    def batch_device(self, device: Union[str, torch.device, None] = None) -> Union[str, torch.device]:
        """Where a rollout given ``device`` places its batches: ``device``, or (``None``) the device of the
        policy's parameters, so a policy moved to a GPU samples there without being told (the CPU for a policy
        without parameters)."""
        if device is not None:
            return device
        parameters = self.policy.parameters() if isinstance(self.policy, torch.nn.Module) else ()
        return next((p.device for p in parameters), torch.device("cpu"))

    def describe_backend(self) -> str:
        """Where the rollouts run, in words (for the Ray backend: its actors and their nodes)."""
        return self._backend.describe()
