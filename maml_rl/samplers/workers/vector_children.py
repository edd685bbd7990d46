"""Which ``VectorChildEnv`` class a vector env's workers build on its fast path. Torch-free."""

from __future__ import annotations

from .vector_child_env import VectorSpec


def fast_child_env(spec: VectorSpec) -> type:
    """The fast path's ``VectorChildEnv`` class for ``spec``: the envs' own stepper's
    (``stepper_vector_child_env``) or the MuJoCo fast path's (``batched_vector_child_env``); imported only
    here, as they need ``mujoco.batch``."""
    if spec.own_stepper:
        from .stepper_vector_child_env import StepperVectorChildEnv

        return StepperVectorChildEnv
    from .batched_vector_child_env import BatchedVectorChildEnv

    return BatchedVectorChildEnv
