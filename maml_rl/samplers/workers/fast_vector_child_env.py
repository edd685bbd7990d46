"""The step loop of the vector env's two fast paths: all of a worker's envs advanced by one call a step.

:class:`FastVectorChildEnv` is ``VectorChildEnv``'s step with gymnasium's three autoreset modes, where a
subclass advances the envs stepped (``_advance``: the MuJoCo fast path's one ``mujoco.batch`` call in
``batched_vector_child_env``, an env's own ``BatchStepper`` in ``stepper_vector_child_env``) and resets one env
(``_reset_env``). On a step where no env resets, the whole range is written at once and its infos go back as
one array (``InfoColumns``); otherwise env by env, in ``SyncVectorEnv``'s order. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
from gymnasium.vector import AutoresetMode

from .vector_child_env import InfoColumns, Infos, VectorChildEnv

# (key, type) of each value of one env's info, in its order (float: a Python or NumPy float64).
InfoTypes = Tuple[Tuple[str, type], ...]
# The types whose values InfoColumns carries (as the float64, bool and int64 arrays gymnasium makes of them).
_COLUMN_TYPES = (float, bool, int)


@dataclass(frozen=True)
class StepInfos:
    """The step infos of the envs stepped, row by row: ``values[k, j]`` is row ``k``'s value of ``keys[j]``.

    ``types``: for each row, its env's own info dict where the stepper has it, else ``((key, type), ...)`` in its
    env's order, with which the row's info is rebuilt; ``None`` where every row has ``keys``, in that order, all
    floats.
    """

    keys: Tuple[str, ...]
    values: np.ndarray  # (n, len(keys)) float64
    types: Optional[Sequence[Union[dict, InfoTypes]]] = None

    def row(self, k: int) -> dict:
        """Row ``k``'s info as its env's ``step`` returns it."""
        values = self.values[k]
        if self.types is None:
            return {key: float(value) for key, value in zip(self.keys, values)}
        types = self.types[k]
        if isinstance(types, dict):
            return types
        column = {key: j for j, key in enumerate(self.keys)}
        return {key: kind(values[column[key]]) for key, kind in types}

    def columns(self, start: int) -> Optional[InfoColumns]:
        """The rows as one :class:`InfoColumns` of envs ``start, start + 1, ...``; ``None`` where a row has its
        own dict, a value of a NumPy type (gymnasium's array of a NumPy bool holds objects) or its keys in
        another order than the first row's (the infos then go env by env)."""
        if self.types is None:
            return InfoColumns(start, self.keys, self.values)
        first = self.types[0]
        if isinstance(first, dict) or any(kind not in _COLUMN_TYPES for _, kind in first):
            return None
        order = tuple(key for key, _ in first)
        for types in self.types:
            if types is first:  # most rows share their class's tuple: one check per step, not per row
                continue
            if isinstance(types, dict) or any(kind not in _COLUMN_TYPES for _, kind in types) \
                    or tuple(key for key, _ in types) != order:
                return None
        # Rows whose types differ from the first's: its types make gymnasium's arrays, and the other rows' values
        # are cast into them, as _add_info does env by env.
        columns = [self.keys.index(key) for key in order]
        return InfoColumns(start, order, self.values[:, columns], tuple(kind for _, kind in first))


class FastVectorChildEnv(VectorChildEnv):
    """A :class:`VectorChildEnv` whose envs advance together; subclasses say how (see the module's docstring)."""

    def _fast(self) -> bool:
        """Whether this step goes through :meth:`_advance` (else env by env, ``VectorChildEnv``'s)."""
        raise NotImplementedError

    def _advance(self, ids: np.ndarray, actions: Sequence[Any]
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Optional[StepInfos]]:
        """Step envs ``ids`` (sorted worker rows) one env step with ``actions`` (the worker's, all rows): their
        observations, rewards, terminations, truncations and infos, rows in the order of ``ids``."""
        raise NotImplementedError

    def _reset_env(self, i: int) -> Tuple[Any, dict]:
        """Autoreset env ``i``: its ``reset()``, and the fast path continues from its new state."""
        raise NotImplementedError

    def _step(self, actions: Sequence[Any]) -> Union[Infos, InfoColumns, None]:
        if not self._fast():
            return super()._step(actions)
        b, lo, mode = self.buffers, self.range.start, self.mode
        n = len(self.envs)
        self.current_operation = "step"
        # NEXT_STEP: an env whose episode ended resets in this step instead of stepping.
        resetting = self.autoreset.copy() if mode is AutoresetMode.NEXT_STEP else np.zeros(n, dtype=np.bool_)
        ids = np.arange(n, dtype=np.int32) if not resetting.any() else np.flatnonzero(~resetting).astype(np.int32)
        observations = rewards = terminated = truncated = step_infos = None
        if len(ids):
            observations, rewards, terminated, truncated, step_infos = self._advance(ids, actions)
            if len(ids) == n and not (mode is AutoresetMode.SAME_STEP and (terminated.any() or truncated.any())):
                # No env resets in this step: the whole range at once, as the loop below would write it.
                rows = slice(lo, lo + n)
                b.rewards[rows], b.terminated[rows], b.truncated[rows] = rewards, terminated, truncated
                np.logical_or(terminated, truncated, out=self.autoreset)
                if self.flat_shape is not None:
                    b.observations[rows] = observations
                else:
                    for i in range(n):
                        self._write(lo + i, observations[i])
                if step_infos is None or not step_infos.keys:
                    return None
                columns = step_infos.columns(lo)
                if columns is not None:
                    return columns
                return [(lo + i, step_infos.row(i)) for i in range(n)]
        infos: Infos = []
        k = 0  # the row of env i among the stepped ones
        for i in range(n):
            g = self.current_env = lo + i
            if resetting[i]:
                self.current_operation = "reset (autoreset)"
                observation, info = self._reset_env(i)
                self.current_operation = "step"
                b.rewards[g], b.terminated[g], b.truncated[g] = 0.0, False, False
            else:
                observation = observations[k]
                b.rewards[g], b.terminated[g], b.truncated[g] = rewards[k], terminated[k], truncated[k]
                info = step_infos.row(k) if step_infos is not None and step_infos.keys else {}
                k += 1
                if mode is AutoresetMode.SAME_STEP and (b.terminated[g] or b.truncated[g]):
                    infos.append((g, {"final_obs": observation, "final_info": info}))
                    self.current_operation = "reset (autoreset)"
                    observation, info = self._reset_env(i)
                    self.current_operation = "step"
            self._write(g, observation)
            self.autoreset[i] = b.terminated[g] or b.truncated[g]
            if info:
                infos.append((g, info))
        self.current_env = None
        return infos or None

    def _before_call(self) -> None:
        """Before a ``call`` or ``set_attr``: give each env its own state, as its own steps would have left it."""
        raise NotImplementedError

    def _call(self, name: str, args: tuple, kwargs: dict) -> list:
        self._before_call()
        return super()._call(name, args, kwargs)

    def _set_attr(self, name: str, values: Sequence[Any]) -> None:
        self._before_call()
        super()._set_attr(name, values)
