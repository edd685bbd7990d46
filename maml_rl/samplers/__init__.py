"""The multi-task sampler: ``MultiTaskSampler`` and its errors.

Layers, top to bottom (``docs/architecture.md``): the facade (``sampler``
and ``trajectories``), ``backends/``, then ``settings/`` and ``rollout/``
side by side, and ``workers/`` (torch-free: it runs in the worker
processes); ``errors`` is shared by all. Names are imported lazily so that a worker, which imports
``maml_rl.samplers.workers``, never pulls in torch.
"""

from typing import Any

__all__ = ["MultiTaskSampler", "MultiTaskVectorEnv", "SamplerError", "WorkerError", "WorkerDiedError", "SamplerClosedError", "PolicyOutputError",
           "EnvOutputError", "InsufficientMemoryError", "PoolStateError", "StepTimeoutError", "ForkedSamplerError",
           "EnvPool", "usable_cpus"]


def __getattr__(name: str) -> Any:
    if name == "MultiTaskSampler":
        from .sampler import MultiTaskSampler

        return MultiTaskSampler
    if name == "MultiTaskVectorEnv":
        from .vector_env import MultiTaskVectorEnv

        return MultiTaskVectorEnv
    if name == "EnvPool":
        from .workers.protocol import EnvPool

        return EnvPool
    if name == "InsufficientMemoryError":
        from .workers.memory import InsufficientMemoryError

        return InsufficientMemoryError
    if name == "usable_cpus":
        from .workers.processes import usable_cpus

        return usable_cpus
    if name in __all__:
        from . import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'maml_rl.samplers' has no attribute {name!r}")
