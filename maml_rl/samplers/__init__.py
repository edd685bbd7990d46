"""The multi-task sampler: ``MultiTaskSampler`` and its errors.

Layers, top to bottom (``docs/architecture.md``): the facade (``sampler``,
with ``settings``, ``env_setup`` and ``trajectories``), ``backends/``,
``rollout/``, and ``workers/`` (torch-free: it runs in the worker
processes). Names are imported lazily so that a worker, which imports
``maml_rl.samplers.workers``, never pulls in torch.
"""

from typing import Any

__all__ = ["MultiTaskSampler", "SamplerError", "WorkerError", "WorkerDiedError", "SamplerClosedError",
           "EnvOutputError", "InsufficientMemoryError", "PoolStateError", "EnvPool", "usable_cpus"]

_LAZY = {
    "MultiTaskSampler": ".sampler",
    "EnvPool": ".workers.protocol",
    "InsufficientMemoryError": ".workers.memory",
    "usable_cpus": ".workers.processes",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    if name in __all__:
        from . import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'maml_rl.samplers' has no attribute {name!r}")
