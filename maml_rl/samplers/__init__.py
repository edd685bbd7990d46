"""Multi-task samplers.

Imported lazily so that a ChildEnv worker, which imports
``maml_rl.samplers.child_env``, never pulls in torch.
"""

from typing import Any

__all__ = ["MultiTaskSampler", "SamplerError", "WorkerError", "WorkerDiedError", "SamplerClosedError",
           "EnvOutputError", "InsufficientMemoryError", "PoolStateError", "EnvPool",
           "usable_cpus"]


def __getattr__(name: str) -> Any:
    if name == "MultiTaskSampler":
        from .multi_task_sampler import MultiTaskSampler

        return MultiTaskSampler
    if name == "usable_cpus":
        from .vector_env import usable_cpus

        return usable_cpus
    if name == "EnvPool":
        from .env_pool import EnvPool

        return EnvPool
    if name == "InsufficientMemoryError":
        from .memory import InsufficientMemoryError

        return InsufficientMemoryError
    if name in __all__:
        from . import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'maml_rl.samplers' has no attribute {name!r}")
