"""Meta-World envs of one task class stepped together, with Meta-World's bits (``sawyer.py``); the sampler's
stepper over a worker's slots (``stepper.py``, imported where used)."""

from .arrays import gaussian, hamacher, long_tail, norms, xz
from .rewards import SPECS, ClassSpec, batched_spec
from .sawyer import BatchedSawyer, mujoco_batch

__all__ = ["BatchedSawyer", "ClassSpec", "SPECS", "batched_spec", "gaussian", "hamacher", "long_tail", "mujoco_batch",
           "norms", "xz"]
