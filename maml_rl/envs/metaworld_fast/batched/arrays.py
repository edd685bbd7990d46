"""Meta-World's reward arithmetic as arrays over envs, with the bits of its scalar code.

Each function gives, element for element, what Meta-World's scalar expression gives (checked in
``tests/envs/test_metaworld_batched.py`` against the scalar functions). Two needed care:
``np.linalg.norm`` of a small vector is BLAS's ``ddot`` (a chain of fused multiply-adds, not
``(x * x).sum()``), which ``np.vecdot`` computes row by row with the same kernel (an import-time check
falls back to one ``dot`` per row if the installed NumPy differs); and the scalar ``(d * scale) ** 2``
is C's ``pow``, which ``np.float_power`` computes, where an array's ``** 2`` is ``x * x``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gaussian", "hamacher", "long_tail", "norms", "xz"]


def _vecdot_is_ddot() -> bool:
    rng = np.random.default_rng(0)
    for width in (2, 3, 4):  # positions, planes and box-close's quaternions
        x = rng.normal(size=(4096, width)) * rng.uniform(1e-6, 1e3, size=(4096, 1))
        if np.vecdot(x, x).tobytes() != np.array([row.dot(row) for row in x]).tobytes():
            return False
    return True


_VECDOT_EXACT = hasattr(np, "vecdot") and _vecdot_is_ddot()


def norms(x: np.ndarray) -> np.ndarray:
    """``np.linalg.norm(row)`` of each float64 row of ``x`` (n, k), bit for bit: ``sqrt(row.dot(row))``."""
    squares = np.vecdot(x, x) if _VECDOT_EXACT else np.array([row.dot(row) for row in x])
    return np.sqrt(squares)


def long_tail(x: np.ndarray, lower: float, upper: float, margin: np.ndarray) -> np.ndarray:
    """``reward_utils.tolerance(x_i, bounds=(lower, upper), margin=margin_i, sigmoid="long_tail")`` of each
    float64 ``x_i``, as the scalar ``reward_utils.tolerance`` computes it (value_at_margin 0.1)."""
    # float_power: C's pow, as the scalar's np.float64 ** 2 (an array's ** 2 is x * x, which differs
    # from pow in the last bit about once in a thousand). A zero margin's inf distance gives the scalar's 0.
    value = 1 / (np.float_power(_distance(x, lower, upper, margin) * _LONG_TAIL_SCALE, 2) + 1)
    return np.where((lower <= x) & (x <= upper), 1.0, value)


def _distance(x: np.ndarray, lower: float, upper: float, margin: np.ndarray) -> np.ndarray:
    """The distance outside the bounds (the positive one of lower - x and x - upper; maximum propagates NaN as
    the scalar's branches do) over the margin, inf where the margin is 0 (the scalar's value 0 there)."""
    distance = np.maximum(lower - x, x - upper)
    return np.divide(distance, margin, out=np.full_like(distance, np.inf), where=np.not_equal(margin, 0))


_LONG_TAIL_SCALE = np.sqrt(1 / 0.1 - 1)  # reward_utils._sigmoids' scale for long_tail at value_at_1 = 0.1
_GAUSSIAN_SCALE = np.sqrt(-2 * np.log(0.1))  # and for gaussian


def gaussian(x: np.ndarray, lower: float, upper: float, margin: np.ndarray) -> np.ndarray:
    """``reward_utils.tolerance(x_i, bounds=(lower, upper), margin=margin_i, sigmoid="gaussian")`` of each
    float64 ``x_i``, as the scalar ``reward_utils.tolerance`` computes it (value_at_margin 0.1)."""
    value = np.exp(-0.5 * np.float_power(_distance(x, lower, upper, margin) * _GAUSSIAN_SCALE, 2))
    return np.where((lower <= x) & (x <= upper), 1.0, value)


def hamacher(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``reward_utils.hamacher_product(a_i, b_i)`` of float64 values in [0, 1] (its 0 where the denominator is 0)."""
    product = a * b
    denominator = a + b - product
    return np.divide(product, denominator, out=np.zeros_like(product), where=denominator > 0)


def xz(v: np.ndarray) -> np.ndarray:
    """``v + np.array([0.0, -v[1], 0.0])`` of each row: its y set to ``v[1] + -v[1]``."""
    out = v.copy()
    out[:, 1] = v[:, 1] + -v[:, 1]
    return out
