"""Iterative solvers used by the trust-region meta-update."""

from __future__ import annotations

from typing import Callable

import torch


def conjugate_gradient(
    f_Ax: Callable[[torch.Tensor], torch.Tensor],
    b: torch.Tensor,
    cg_iters: int = 10,
    residual_tol: float = 1e-10,
    return_residual: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Approximately solve ``A x = b`` for a symmetric positive-definite ``A``.

    ``A`` is only accessed through matrix-vector products, which is what makes
    the method usable with Hessian-vector products of a KL divergence.

    :param f_Ax: function returning ``A @ v`` for a vector ``v`` shaped like ``b``.
    :param b: right-hand side (1-D tensor).
    :param cg_iters: maximum number of iterations (= number of calls to ``f_Ax``).
    :param residual_tol: stop early once the squared residual norm drops below it.
    :param return_residual: also return the residual ``r = b - A x`` tracked by the
        iterations, which gives ``x^T A x = x^T (b - r)`` without another product.
    :return: the (detached) approximate solution ``x`` (and ``r`` if asked).
    """
    b = b.detach()
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rdotr = torch.dot(r, r)
    # Checked before the first product too: b = 0 would otherwise divide 0 by 0.
    if rdotr.item() < residual_tol:
        return (x, r) if return_residual else x
    for _ in range(cg_iters):
        z = f_Ax(p).detach()
        alpha = rdotr / torch.dot(p, z)
        x.add_(alpha * p)
        r.sub_(alpha * z)
        new_rdotr = torch.dot(r, r)
        if new_rdotr.item() < residual_tol:
            break
        p = r + (new_rdotr / rdotr) * p
        rdotr = new_rdotr
    return (x, r) if return_residual else x
