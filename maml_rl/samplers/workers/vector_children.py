"""Whether a vector env takes a fast path, and which ``VectorChildEnv`` class its workers then build. Torch-free."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from maml_rl.envs.batch_stepping import BatchSteppedEnv

from .vector_child_env import VectorSpec


def fast_path_choice(env: Any, mujoco_batch: Optional[bool]) -> Tuple[Optional[bool], bool, bool]:
    """For the vector env's ``mujoco_batch`` and its first ``env``: the ``mujoco_batch`` its spec takes (``False``
    where the fast path cannot step ``env``; a ``ValueError`` naming why if it was required), whether the envs
    step through their own stepper (``BatchSteppedEnv``), and whether the fast path runs best in the caller's
    process (the sampler's default layout: ``BatchSteppedEnv.batch_in_process``)."""
    own_stepper = isinstance(env.unwrapped, BatchSteppedEnv)
    if mujoco_batch is not False:
        from .batched_child_env import fast_path_support  # needs mujoco: only when asked for

        reason = fast_path_support(env)
        if reason is not None and mujoco_batch:
            path = "the fast path" if own_stepper else "the MuJoCo fast path"
            raise ValueError(f"mujoco_batch=True, but {path} cannot step these envs: {reason}; "
                             "leave mujoco_batch at None to step them one at a time")
        mujoco_batch = mujoco_batch if reason is None else False
    fast = mujoco_batch is not False
    return mujoco_batch, own_stepper and fast, fast and (not own_stepper or env.unwrapped.batch_in_process())


def fast_child_env(spec: VectorSpec) -> type:
    """The fast path's ``VectorChildEnv`` class for ``spec``: the envs' own stepper's
    (``stepper_vector_child_env``) or the MuJoCo fast path's (``batched_vector_child_env``); imported only
    here, as they need ``mujoco.batch``."""
    if spec.own_stepper:
        from .stepper_vector_child_env import StepperVectorChildEnv

        return StepperVectorChildEnv
    from .batched_vector_child_env import BatchedVectorChildEnv

    return BatchedVectorChildEnv
