"""A fast env's ``reset`` replayed from its last real one when the task is the same, with the same bits.

Meta-World's reset costs as much as ~100 of its steps: ``reset`` runs the class's ``reset_model`` twice
(once itself, once through gymnasium's ``MujocoEnv.reset`` after ``mj_resetData``), and each moves the
hand for 50 x ``frame_skip`` physics steps. With a task set (``set_task`` freezes its random vector) the
outcome is a function of the task alone: the second ``reset_model`` starts from ``mj_resetData`` and
draws nothing. The sampler resets the same task's env again and again (MAML's inner and outer
episodes, RL²'s trials, every episode of a batch), so the fast classes keep what their last real reset
produced and, when the next reset has the same task, put it back instead of recomputing it:

* MuJoCo's integration state (``mjSTATE_INTEGRATION``: everything a later step starts from), then
  ``mj_forward``, as the reset's own last call (``set_state``) leaves it;
* the attributes the reset assigned (recorded by the fast class's ``__setattr__`` while it ran, plus
  arrays it changed in place and entries it added), with their values and, for arrays, their contents;
* its observation and info.

A reset replays only when the key (task vector, observability) equals the last real reset's and that
reset drew no random number (``np_random``'s and NumPy's global state unchanged); anything else runs the
real reset and becomes the new snapshot, so a different task in between, or a reset that draws, is never
replayed. ``tests/envs/test_metaworld_reset_cache.py`` checks every ML10 class, and reach, push and
pick-place, against Meta-World's own env over episodes, task switches and truncations, bit for bit.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import mujoco
import numpy as np
from metaworld.sawyer_xyz_env import SawyerXYZEnv

__all__ = ["REPLAYS", "ResetSnapshot", "cached_reset", "forget_reset", "getstate_without_snapshot", "recording_setattr"]

#: Whether the fast classes replay resets. On MuJoCo 3.3 (Meta-World's pin) two real resets of the same task
#: leave integration states that differ (checked on 3.3.0), so there every reset is real; on MuJoCo >= 4 they are
#: equal, which tests/envs/test_metaworld_reset_cache.py checks.
REPLAYS = int(mujoco.__version__.split(".")[0]) >= 4

_INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION
_SNAPSHOT = "_fast_reset_snapshot"
_WRITTEN = "_fast_reset_written"
_OWN = frozenset((_SNAPSHOT, _WRITTEN, "_fast_views"))
_MISSING = object()


class ResetSnapshot:
    """What one real reset produced (see the module's docstring)."""

    __slots__ = ("key", "state", "attributes", "arrays", "removed", "observation", "info")

    def __init__(self, key, state, attributes, arrays, removed, observation, info):
        self.key = key
        self.state: np.ndarray = state
        #: name -> value, for the assigned attributes that are not arrays
        self.attributes: Dict[str, Any] = attributes
        #: name -> (the array, a copy of its contents at the end of the reset): kept by identity (it may be a view
        #: of MjData, as basketball's goal is), its contents restored
        self.arrays: Dict[str, Tuple[np.ndarray, np.ndarray]] = arrays
        self.removed: Tuple[str, ...] = removed
        self.observation: np.ndarray = observation
        self.info: dict = info


def recording_setattr(self, name: str, value: Any) -> None:
    """The fast classes' ``__setattr__``: records the names a real reset assigns."""
    written = self.__dict__.get(_WRITTEN)
    if written is not None:
        written.add(name)
    object.__setattr__(self, name, value)


def _key(env) -> Optional[tuple]:
    if not env.__dict__.get("_freeze_rand_vec", False):
        return None
    rand_vec = env.__dict__.get("_last_rand_vec")
    if rand_vec is None:
        return None
    rand_vec = np.asarray(rand_vec)
    return rand_vec.dtype.str, rand_vec.tobytes(), bool(env._partially_observable)


def _random_states(env) -> tuple:
    generator = env.__dict__.get("_np_random")
    own = None if generator is None else generator.bit_generator.state
    kind, keys, position, has_gauss, cached = np.random.get_state()
    return own, (kind, keys.tobytes(), position, has_gauss, cached)


def _same_random_states(a: tuple, b: tuple) -> bool:
    return a[1] == b[1] and _same_tree(a[0], b[0])


def _same_tree(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_tree(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return type(a) is type(b) and a == b


def cached_reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
    """``SawyerXYZEnv.reset``, replayed from the last real reset when the task is the same."""
    key = _key(self)
    snapshot: Optional[ResetSnapshot] = self.__dict__.get(_SNAPSHOT)
    if key is not None and snapshot is not None and snapshot.key == key:
        return _replay(self, snapshot)
    return _real_reset(self, key, seed, options)


def _replay(env, snapshot: ResetSnapshot):
    model, data = env.model, env.data
    mujoco.mj_setState(model, data, snapshot.state, _INTEGRATION)
    mujoco.mj_forward(model, data)
    attributes = env.__dict__
    for name in snapshot.removed:
        attributes.pop(name, None)
    attributes.update(snapshot.attributes)
    for name, (array, contents) in snapshot.arrays.items():
        if array.flags.writeable:
            array[...] = contents
        attributes[name] = array
    return snapshot.observation.copy(), dict(snapshot.info)


def _real_reset(env, key, seed, options):
    attributes = env.__dict__
    attributes.pop(_SNAPSHOT, None)
    before = dict(attributes)
    contents = {name: value.copy() for name, value in before.items() if type(value) is np.ndarray}
    random_before = _random_states(env) if key is not None else None
    attributes[_WRITTEN] = written = set()
    try:
        observation, info = SawyerXYZEnv.reset(env, seed=seed, options=options)
    finally:
        attributes.pop(_WRITTEN, None)
    if key is None or not _same_random_states(random_before, _random_states(env)):
        return observation, info
    changed = set(written)
    for name, value in attributes.items():
        if name not in before:
            changed.add(name)
        elif type(value) is np.ndarray and name in contents and value is before[name] and not (
                value.dtype == contents[name].dtype and value.tobytes() == contents[name].tobytes()):
            changed.add(name)  # changed in place
    changed -= _OWN
    values, arrays = {}, {}
    for name in changed:
        value = attributes.get(name, _MISSING)
        if type(value) is np.ndarray:
            arrays[name] = (value, value.copy())
        elif value is not _MISSING:
            values[name] = value
    removed = tuple(name for name in before if name not in attributes and name not in _OWN)
    state = np.empty(mujoco.mj_stateSize(env.model, _INTEGRATION))
    mujoco.mj_getState(env.model, env.data, state, _INTEGRATION)
    attributes[_SNAPSHOT] = ResetSnapshot(key, state, values, arrays, removed, np.array(observation, copy=True),
                                          dict(info))
    return observation, info


def forget_reset(env) -> None:
    """Make the next reset of ``env`` (a fast class's env, a ``MetaWorldEnv`` or a wrapper of either) a real
    one: for code that changes what a reset reads (an attribute, the model) other than through ``set_task``."""
    target = env.unwrapped
    inner = target.__dict__.get("_envs")  # MetaWorldEnv: one env per task class
    for each in (inner.values() if isinstance(inner, dict) else (target,)):
        each.__dict__.pop(_SNAPSHOT, None)


def getstate_without_snapshot(parent_getstate: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A fast class's ``__getstate__``: its task class's, less the snapshot. A copy (pickle, ``copy``) builds a
    fresh model from the file, without the fields the last real reset set in this one, so its first reset must
    be real."""

    def __getstate__(self):
        state = parent_getstate(self)
        inner = state.get("state") if isinstance(state, dict) else None
        if isinstance(inner, dict) and _SNAPSHOT in inner:
            state = {**state, "state": {k: v for k, v in inner.items() if k != _SNAPSHOT}}
        return state

    return __getstate__
