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


# Up to this many matrices, quat_from_matrix row by row is faster (~7 us a row) than the arrays' ~30 NumPy
# calls (~50-60 us a call for 10-20 matrices, measured on 2 cores).
_ROW_BY_ROW = 8
_EYE = np.eye(3)
# The operands of each row's sums and differences (_PAIR_A[k] +/- _PAIR_B[k], indices into the row-major
# m00 .. m22), and of the products of its first row's cofactors, each gathered in one call.
_PAIR_A = np.array([1, 2, 5, 7, 2, 3])  # m01 m02 m12 m21 m02 m10
_PAIR_B = np.array([3, 6, 7, 5, 6, 1])  # m10 m20 m21 m12 m20 m01
_COFACTOR_A = np.array([4, 3, 3, 5, 5, 4])  # m11 m10 m10 m12 m12 m11
_COFACTOR_B = np.array([8, 8, 7, 7, 6, 6])  # m22 m22 m21 m21 m20 m20
# _markley's four candidate quaternions as columns of the pool (0-2: 1 - trace + 2 m_kk; 3-5: m01 + m10,
# m02 + m20, m12 + m21; 6-8: m21 - m12, m02 - m20, m10 - m01; 9: 1 + trace). A sum's operands may be swapped
# (m10 + m01 is m01 + m10, bit for bit).
_CANDIDATES = np.array([[0, 3, 4, 6], [3, 1, 5, 7], [4, 5, 2, 8], [6, 7, 8, 9]])


def _clearly_orthogonal_rows(m: np.ndarray) -> np.ndarray:
    """:func:`_clearly_orthogonal` of each row of ``m`` (n, 9): the Gramian's entries (a0 b0 + a1 b1) + a2 b2 of
    rows a, b (symmetric, bit for bit, so all nine are tested where it tests six) and the determinant by the
    first row's cofactors, each in the scalar code's order."""
    n = len(m)
    rows = m.reshape(n, 3, 3)
    products = rows[:, :, None, :] * rows[:, None, :, :]
    gram = (products[..., 0] + products[..., 1]) + products[..., 2]
    gram -= _EYE
    clear = (np.abs(gram, out=gram) <= _ORTHO_TOL).all(axis=(1, 2))  # False for NaN, as there
    cofactor = m[:, _COFACTOR_A] * m[:, _COFACTOR_B]
    terms = m[:, 0:3] * (cofactor[:, 0:3] - cofactor[:, 3:6])
    clear &= ((terms[:, 0] - terms[:, 1]) + terms[:, 2]) > 0.5
    return clear


def quats_from_matrices(matrices: np.ndarray) -> np.ndarray:
    """:func:`quat_from_matrix` of each (3, 3) float64 matrix of ``matrices`` (n, 9) or (n, 3, 3): Markley's
    method as arrays, with the same float operations in the same order as the Python floats of
    :func:`_markley` and :func:`_clearly_orthogonal` (elementwise NumPy float64 arithmetic rounds as
    Python's; only the operands of a sum or a product are swapped, which is exact); a matrix that is not
    clearly orthogonal goes to SciPy, one by one. A few matrices go through :func:`quat_from_matrix` one by
    one."""
    m = np.ascontiguousarray(matrices, dtype=np.float64).reshape(-1, 9)
    n = len(m)
    if not EXACT:
        return np.array([_scipy_quat(row.reshape(3, 3)) for row in m]).reshape(-1, 4)
    if n <= _ROW_BY_ROW:
        return np.array([quat_from_matrix(row.reshape(3, 3)) for row in m]).reshape(-1, 4)
    diag = m[:, ::4]
    trace = (diag[:, 0] + diag[:, 1]) + diag[:, 2]
    # The first largest of m00, m11, m22, trace: argmax's first maximum is _markley's strict comparisons
    # (a NaN row differs, but it is not clearly orthogonal and goes to SciPy below).
    keys = np.empty((n, 4))
    keys[:, :3], keys[:, 3] = diag, trace
    choice = keys.argmax(axis=1)
    a, b = m[:, _PAIR_A], m[:, _PAIR_B]
    pool = np.empty((n, 10))
    np.add(1 - trace[:, None], 2 * diag, out=pool[:, 0:3])
    np.add(a[:, 0:3], b[:, 0:3], out=pool[:, 3:6])
    np.subtract(a[:, 3:6], b[:, 3:6], out=pool[:, 6:9])
    np.add(1, trace, out=pool[:, 9])
    q = pool.ravel()[np.arange(0, 10 * n, 10)[:, None] + _CANDIDATES[choice]]
    squares = q * q
    norm = np.sqrt(((squares[:, 0] + squares[:, 1]) + squares[:, 2]) + squares[:, 3])
    result = q / norm[:, None]
    for i in np.flatnonzero(~_clearly_orthogonal_rows(m)):
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
