"""Fast subclasses of Meta-World's task classes.

``fast_class(cls)`` returns a subclass of ``cls`` (same name, so Meta-World's
``task_name`` is unchanged) in which:

* the base-class methods that ``base.FAST_METHODS`` replaces are replaced,
  where ``cls`` inherits them from ``SawyerXYZEnv`` unchanged (a method the
  task class overrides keeps its own code);
* ``reset`` replays the last real reset when the task is the same (``reset_cache.py``; MuJoCo >= 4);
* the task class's own methods are the same code objects with other globals:
  ``reward_utils`` (and a directly imported ``tolerance``) is
  ``reward_utils.module``, SciPy's ``Rotation`` is ``FastRotation``, and
  ``np`` is ``numpy_norm.module`` (NumPy with a faster ``linalg.norm``). Nothing
  of Meta-World is modified: its module, classes and functions stay as
  installed, so a plain Meta-World env in the same process is untouched.

It returns ``None``, with the reason, for a Meta-World version this was not
checked against.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import sys
import types

import numpy as np
from metaworld.sawyer_xyz_env import SawyerXYZEnv
from metaworld.utils import reward_utils as _reward_utils
from scipy.spatial.transform import Rotation

from maml_rl.envs.metaworld_fast.base import FAST_METHODS, simulates_directly
from maml_rl.envs.metaworld_fast.numpy_norm import module as _fast_numpy
from maml_rl.envs.metaworld_fast.reset_cache import REPLAYS, cached_reset, getstate_without_snapshot, recording_setattr
from maml_rl.envs.metaworld_fast.reward_utils import module as _fast_reward_utils
from maml_rl.envs.metaworld_fast.reward_utils import tolerance as _fast_tolerance
from maml_rl.envs.metaworld_fast.rotation import FastRotation

__all__ = ["BY_NAME", "CHECKED_VERSIONS", "fast_class", "unavailable_reason"]

#: Meta-World versions whose 50 v3 classes tests/envs/test_metaworld_fast.py compares bit for bit.
CHECKED_VERSIONS = ("3.1.1",)


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """Why the fast path is off in this process, or ``None``."""
    try:
        version = importlib.metadata.version("metaworld")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    if version not in CHECKED_VERSIONS:
        return (f"metaworld {version} is not one of the versions its exactness was checked on "
                f"({', '.join(CHECKED_VERSIONS)})")
    return None


def _globals_for(module: types.ModuleType) -> dict:
    namespace = dict(vars(module))
    for name, value in vars(module).items():
        if value is _reward_utils:
            namespace[name] = _fast_reward_utils
        elif value is _reward_utils.tolerance:
            namespace[name] = _fast_tolerance
        elif value is Rotation:
            namespace[name] = FastRotation
        elif value is np:
            namespace[name] = _fast_numpy
    return namespace


def _rebind(function, namespace: dict):
    if not isinstance(function, types.FunctionType):
        return function
    copy = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__,
                              function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__dict__.update(function.__dict__)
    copy.__qualname__, copy.__doc__ = function.__qualname__, function.__doc__
    return copy


def _rebound(attr, namespace: dict):
    if isinstance(attr, types.FunctionType):
        return _rebind(attr, namespace)
    if isinstance(attr, property):
        return property(*(_rebind(f, namespace) if f else None for f in (attr.fget, attr.fset, attr.fdel)),
                        attr.__doc__)
    if isinstance(attr, staticmethod):
        return staticmethod(_rebind(attr.__func__, namespace))
    if isinstance(attr, classmethod):
        return classmethod(_rebind(attr.__func__, namespace))
    return None  # data, cached_property, ...: inherited from cls as they are


@functools.lru_cache(maxsize=None)
def fast_class(cls: type) -> type | None:
    """The fast subclass of the Meta-World task class ``cls``, or ``None`` (see ``unavailable_reason``)."""
    if unavailable_reason() is not None or not issubclass(cls, SawyerXYZEnv):
        return None
    # pickle finds the class as BY_NAME.<name> in this module (Meta-World's envs pickle their state).
    namespace: dict = {"__module__": __name__, "__qualname__": f"BY_NAME.{cls.__name__}", "__doc__": cls.__doc__}
    for name, method in FAST_METHODS.items():
        if inspect.getattr_static(cls, name) is inspect.getattr_static(SawyerXYZEnv, name):
            namespace[name] = method
    task_globals = _globals_for(sys.modules[cls.__module__])
    for name, attr in vars(cls).items():
        if name.startswith("__") and name != "__init__":
            continue
        copy = _rebound(attr, task_globals)
        if copy is not None:
            namespace[name] = copy
    namespace["_fast_simulates_directly"] = simulates_directly(cls)  # decided once, read every step
    if REPLAYS and inspect.getattr_static(cls, "reset") is inspect.getattr_static(SawyerXYZEnv, "reset") and (
            cls.__setattr__ is object.__setattr__):
        namespace["reset"], namespace["__setattr__"] = cached_reset, recording_setattr  # reset_cache.py
        namespace["__getstate__"] = getstate_without_snapshot(cls.__getstate__)
    return type(cls.__name__, (cls,), namespace)


class _ByName:
    """The fast classes as attributes named after their task classes, built on first use: where pickle
    looks a fast class up, in this process or another."""

    def __getattr__(self, name: str) -> type:
        import metaworld.env_dict

        for cls in metaworld.env_dict.ALL_V3_ENVIRONMENTS.values():
            if cls.__name__ == name:
                fast = fast_class(cls)
                if fast is not None:
                    return fast
                raise AttributeError(f"no fast class for {name}: {unavailable_reason()}")
        raise AttributeError(f"no Meta-World v3 task class is named {name!r}")


BY_NAME = _ByName()
