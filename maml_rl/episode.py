"""pytorch-maml-rl's ``maml_rl.episode``, kept for old scripts (deprecated: see :mod:`maml_rl.legacy`)."""

from maml_rl.legacy.names import GONE, MOVED
from maml_rl.legacy.warn import module_getattr

__getattr__ = module_getattr(__name__, MOVED[__name__], GONE.get(__name__))
