"""Conjugate gradient and the flat-vector helpers used by the trust-region step."""

from __future__ import annotations

import torch

from maml_rl.utils.optimization import conjugate_gradient
from maml_rl.utils.torch_utils import flatten_tensors, unflatten_like


def random_spd(n: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(n, n, generator=generator, dtype=torch.float64)
    return a @ a.T + n * torch.eye(n, dtype=torch.float64)


def test_conjugate_gradient_solves_an_spd_system():
    a = random_spd(20)
    b = torch.randn(20, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x = conjugate_gradient(lambda v: a @ v, b, cg_iters=50)
    # CG stops once |r|^2 < 1e-10; with eigenvalues >= 20 the error is then below 5e-7.
    torch.testing.assert_close(x, torch.linalg.solve(a, b), atol=5e-7, rtol=0)


def test_conjugate_gradient_is_exact_in_n_steps_for_small_systems():
    a = random_spd(5, seed=1)
    b = torch.randn(5, dtype=torch.float64)
    calls = []

    def f_ax(v):
        calls.append(1)
        return a @ v

    x = conjugate_gradient(f_ax, b, cg_iters=10, residual_tol=1e-20)
    torch.testing.assert_close(x, torch.linalg.solve(a, b))
    assert len(calls) <= 6


def test_residual_gives_the_curvature_without_another_product():
    a = random_spd(30, seed=2)
    b = torch.randn(30, dtype=torch.float64)
    x, r = conjugate_gradient(lambda v: a @ v, b, cg_iters=8, return_residual=True)
    torch.testing.assert_close(r, b - a @ x)
    torch.testing.assert_close(torch.dot(x, b - r), x @ a @ x)


def test_zero_right_hand_side():
    x = conjugate_gradient(lambda v: 2 * v, torch.zeros(4))
    assert torch.equal(x, torch.zeros(4))


def test_flatten_and_unflatten_round_trip():
    tensors = [torch.randn(2, 3), torch.randn(4), torch.randn(1, 1, 2)]
    flat = flatten_tensors(tensors)
    assert flat.shape == (12,)
    for got, want in zip(unflatten_like(flat, tensors), tensors):
        assert torch.equal(got, want)
