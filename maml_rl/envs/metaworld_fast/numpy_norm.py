"""``np.linalg.norm`` of a 1-D float64 vector without its argument handling, and a NumPy stand-in that uses it.

NumPy computes that norm as ``sqrt(x.dot(x))`` (``numpy/linalg/_linalg.py``,
the ``axis is None`` fast case); so does ``norm`` here, and anything else goes
to NumPy's own function. Meta-World's task classes call it 2-6 times a step.
``module`` stands for ``numpy`` in their namespace: NumPy's own module
attributes, with ``linalg.norm`` replaced.
"""

from __future__ import annotations

import types

import numpy as np

__all__ = ["module", "norm"]

_norm = np.linalg.norm


def norm(x, ord=None, axis=None, keepdims=False):
    if (type(x) is np.ndarray and x.ndim == 1 and x.dtype == np.float64 and axis is None and not keepdims
            and (ord is None or (type(ord) is int and ord == 2))):
        return np.sqrt(x.dot(x))
    return _norm(x, ord=ord, axis=axis, keepdims=keepdims)


class _Numpy(types.ModuleType):
    def __getattr__(self, name):  # names NumPy resolves lazily
        return getattr(np, name)


linalg = _Numpy(np.linalg.__name__, np.linalg.__doc__)
linalg.__dict__.update({k: v for k, v in vars(np.linalg).items() if not k.startswith("__")})
linalg.norm = norm

module = _Numpy(np.__name__, np.__doc__)
module.__dict__.update({k: v for k, v in vars(np).items() if not k.startswith("__")})
module.linalg = linalg
