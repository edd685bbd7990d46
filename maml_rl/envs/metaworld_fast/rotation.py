"""``Rotation.from_matrix(m).as_quat()`` for one 3x3 rotation matrix, as SciPy computes it, without SciPy's overhead.

Meta-World builds each object's quaternion in the observation this way at every
step (~60 us, mostly SciPy's argument handling, determinant and Gramian
check). For a matrix that is orthogonal to well within SciPy's tolerance, SciPy
converts it with Markley's method (its Cython ``_from_matrix_orthogonal``):
the same float operations are done here in Python floats. Any other matrix
(not orthogonal to 1e-13, or a determinant not near 1) goes to SciPy itself.

At import, the conversion is checked against the installed SciPy on matrices
that take each branch of the method; if one differs in a single bit, SciPy is
used for every matrix (and a log line says so).
"""

from __future__ import annotations

import logging
import math

import numpy as np
from scipy.spatial.transform import Rotation

__all__ = ["EXACT", "FastRotation", "quat_from_matrix", "quats_from_matrices"]

logger = logging.getLogger(__name__)

# Off-diagonal Gramian entries must be within this of 0 (SciPy's test is 1e-12
# on its own Gramian, rounded differently): far enough inside that both agree.
_ORTHO_TOL = 1e-13


def _scipy_quat(matrix) -> np.ndarray:
    return Rotation.from_matrix(matrix).as_quat()


def _markley(m) -> np.ndarray:
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = m
    trace = m00 + m11 + m22
    # argmax over (m00, m11, m22, trace), first maximum wins (SciPy's _argmax4).
    choice, best = 0, m00
    if m11 > best:
        choice, best = 1, m11
    if m22 > best:
        choice, best = 2, m22
    if trace > best:
        choice = 3
    if choice == 0:
        q = [1 - trace + 2 * m00, m10 + m01, m20 + m02, m21 - m12]
    elif choice == 1:
        q = [m01 + m10, 1 - trace + 2 * m11, m21 + m12, m02 - m20]
    elif choice == 2:
        q = [m02 + m20, m12 + m21, 1 - trace + 2 * m22, m10 - m01]
    else:
        q = [m21 - m12, m02 - m20, m10 - m01, 1 + trace]
    x, y, z, w = q
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    return np.array([x / norm, y / norm, z / norm, w / norm])


def _clearly_orthogonal(m) -> bool:
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = m
    rows = ((m00, m01, m02), (m10, m11, m12), (m20, m21, m22))
    for i in range(3):
        a = rows[i]
        for j in range(i, 3):
            b = rows[j]
            g = a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
            if abs(g - (1.0 if i == j else 0.0)) > _ORTHO_TOL:  # also False for NaN
                return False
    det = (m00 * (m11 * m22 - m12 * m21) - m01 * (m10 * m22 - m12 * m20) + m02 * (m10 * m21 - m11 * m20))
    return det > 0.5


def quat_from_matrix(matrix) -> np.ndarray:
    """``Rotation.from_matrix(matrix).as_quat()`` (scalar last), bit for bit."""
    if not EXACT:
        return _scipy_quat(matrix)
    m = matrix.ravel().tolist() if isinstance(matrix, np.ndarray) else None
    if m is None or len(m) != 9 or matrix.dtype != np.float64 or not _clearly_orthogonal(m):
        return _scipy_quat(matrix)
    return _markley(m)


# Up to this many matrices, quat_from_matrix row by row is faster (~7 us a row) than the arrays' ~60 NumPy
# calls (~150 us a call, measured on 2 cores).
_ROW_BY_ROW = 16


def quats_from_matrices(matrices: np.ndarray) -> np.ndarray:
    """:func:`quat_from_matrix` of each (3, 3) float64 matrix of ``matrices`` (n, 9) or (n, 3, 3): Markley's
    method as arrays, with the same float operations in the same order as the Python floats of
    :func:`_markley` (elementwise NumPy float64 arithmetic rounds as Python's); a matrix that is not clearly
    orthogonal goes to SciPy, one by one. A few matrices go through :func:`quat_from_matrix` one by one."""
    m = np.ascontiguousarray(matrices, dtype=np.float64).reshape(-1, 9)
    if not EXACT:
        return np.array([_scipy_quat(row.reshape(3, 3)) for row in m]).reshape(-1, 4)
    if len(m) <= _ROW_BY_ROW:
        return np.array([quat_from_matrix(row.reshape(3, 3)) for row in m]).reshape(-1, 4)
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = m.T
    trace = m00 + m11 + m22
    # The first largest of m00, m11, m22, trace (strict comparisons, as _markley's).
    choice = np.zeros(len(m), dtype=np.int64)
    best = m00.copy()
    for k, value in ((1, m11), (2, m22)):
        larger = value > best
        choice[larger], best[larger] = k, value[larger]
    choice[trace > best] = 3
    q = np.empty((len(m), 4))
    candidates = (
        (1 - trace + 2 * m00, m10 + m01, m20 + m02, m21 - m12),
        (m01 + m10, 1 - trace + 2 * m11, m21 + m12, m02 - m20),
        (m02 + m20, m12 + m21, 1 - trace + 2 * m22, m10 - m01),
        (m21 - m12, m02 - m20, m10 - m01, 1 + trace),
    )
    for k, columns in enumerate(candidates):
        rows = choice == k
        for j in range(4):
            q[rows, j] = columns[j][rows]
    x, y, z, w = q.T
    norm = np.sqrt(x * x + y * y + z * z + w * w)
    result = q / norm[:, None]
    # _clearly_orthogonal, row by row in the same order: the Gramian's entries and the determinant.
    rows3 = (m[:, 0:3], m[:, 3:6], m[:, 6:9])
    clear = np.ones(len(m), dtype=np.bool_)
    for i in range(3):
        for j in range(i, 3):
            a, b = rows3[i], rows3[j]
            g = a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2]
            clear &= np.abs(g - (1.0 if i == j else 0.0)) <= _ORTHO_TOL  # False for NaN, as there
    det = m00 * (m11 * m22 - m12 * m21) - m01 * (m10 * m22 - m12 * m20) + m02 * (m10 * m21 - m11 * m20)
    clear &= det > 0.5
    for i in np.flatnonzero(~clear):
        result[i] = _scipy_quat(m[i].reshape(3, 3))
    return result


class _FromMatrix:
    """What ``Rotation.from_matrix(m)`` returns here: only ``as_quat()`` is fast; the rest is SciPy's."""

    __slots__ = ("_matrix",)

    def __init__(self, matrix):
        self._matrix = matrix

    def as_quat(self, canonical: bool = False, *, scalar_first: bool = False) -> np.ndarray:
        if canonical or scalar_first:
            return Rotation.from_matrix(self._matrix).as_quat(canonical=canonical, scalar_first=scalar_first)
        return quat_from_matrix(self._matrix)

    def __getattr__(self, name):
        return getattr(Rotation.from_matrix(self._matrix), name)


class _FastRotationType(type):
    def __getattr__(cls, name):  # Rotation.from_euler, .random, ...: SciPy's own
        return getattr(Rotation, name)


class FastRotation(metaclass=_FastRotationType):
    """Stands for SciPy's ``Rotation`` in Meta-World's env code: ``from_matrix(m).as_quat()`` is fast."""

    @staticmethod
    def from_matrix(matrix, *args, **kwargs):
        if args or kwargs:
            return Rotation.from_matrix(matrix, *args, **kwargs)
        return _FromMatrix(np.asarray(matrix))


def _self_check() -> bool:
    rng = np.random.default_rng(0)
    mats = [np.eye(3), np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0])]
    mats += list(Rotation.from_quat(rng.normal(size=(400, 4))).as_matrix())
    # Near-180-degree rotations about each axis take the m00 / m11 / m22 branches.
    for axis in np.eye(3):
        mats += list(Rotation.from_rotvec(np.outer(np.pi - rng.uniform(0, 0.5, 20), axis)).as_matrix())
    for m in mats:
        m = np.ascontiguousarray(m, dtype=np.float64)
        if _clearly_orthogonal(m.ravel().tolist()) and _markley(m.ravel().tolist()).tobytes() != _scipy_quat(m).tobytes():
            return False
    return True


EXACT = True
EXACT = _self_check()
if not EXACT:  # pragma: no cover - depends on the installed SciPy
    logger.info("Meta-World fast path: SciPy's from_matrix differs from Markley's method in Python floats "
                "on this SciPy; using SciPy for object quaternions")
