"""Meta-World's ``reward_utils`` with a fast ``tolerance`` for a scalar ``x``.

``tolerance`` is called 2-8 times per step, each time building 0-d arrays with
``np.logical_and`` and ``np.where``. For a scalar ``x`` (a Python float or a
NumPy float64) and the ``long_tail`` and ``gaussian`` sigmoids (the only
ones Meta-World's v3 envs use) it is computed here with the same float
operations on the same types, so it returns the same bits; anything else
(arrays, other sigmoids) goes to Meta-World's own function.

``module`` is a stand-in for the ``reward_utils`` module in the namespace of
Meta-World's env code: ``tolerance`` from here, every other name Meta-World's.
"""

from __future__ import annotations

import types

import numpy as np
from metaworld.utils import reward_utils as _original

__all__ = ["module", "tolerance"]

_SCALES: dict[tuple[str, float], np.float64] = {}


def _scale(sigmoid: str, value_at_1: float) -> np.float64:
    key = (sigmoid, value_at_1)
    scale = _SCALES.get(key)
    if scale is None:
        # The expressions of reward_utils._sigmoids.
        if sigmoid == "long_tail":
            scale = np.sqrt(1 / value_at_1 - 1)
        else:
            scale = np.sqrt(-2 * np.log(value_at_1))
        _SCALES[key] = scale
    return scale


def tolerance(x, bounds=(0.0, 0.0), margin=0.0, sigmoid="gaussian", value_at_margin=_original._DEFAULT_VALUE_AT_MARGIN):
    if (type(x) not in (float, np.float64) or sigmoid not in ("long_tail", "gaussian")
            or not 0 < value_at_margin < 1):
        return _original.tolerance(x, bounds=bounds, margin=margin, sigmoid=sigmoid, value_at_margin=value_at_margin)
    lower, upper = bounds
    if lower > upper:
        raise ValueError("Lower bound must be <= upper bound.")
    if margin < 0:
        raise ValueError(f"`margin` must be non-negative. Current value: {margin}")
    if lower <= x and x <= upper:
        return 1.0
    if margin == 0:
        return 0.0
    # np.where(x < lower, lower - x, x - upper) / margin, in float64.
    d = np.float64(lower - x if x < lower else x - upper) / margin
    scale = _scale(sigmoid, value_at_margin)
    if sigmoid == "long_tail":
        return float(1 / ((d * scale) ** 2 + 1))
    return float(np.exp(-0.5 * (d * scale) ** 2))


module = types.ModuleType(_original.__name__, _original.__doc__)
module.__dict__.update({k: v for k, v in vars(_original).items() if not k.startswith("__")})
module.tolerance = tolerance
