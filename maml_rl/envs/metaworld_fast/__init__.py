"""Meta-World's step computed faster, with the same bits (``MetaWorldEnv(fast=True)``, the default).

Meta-World spends most of a step in Python around MuJoCo: name lookups, a loop
over contacts, SciPy's quaternion conversion, 0-d NumPy arrays in the reward.
``fast_class(cls)`` gives a subclass of a task class that does the same float
operations without that overhead (see ``classes.py`` and ``base.py``).
"""

from maml_rl.envs.metaworld_fast.classes import CHECKED_VERSIONS, fast_class, unavailable_reason

__all__ = ["CHECKED_VERSIONS", "fast_class", "unavailable_reason"]
