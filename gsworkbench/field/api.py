"""``evaluate``: the Gaussian field at points, with checked inputs and a choice of backend."""

from __future__ import annotations

import torch

from gsworkbench._ext import require_kernel
from gsworkbench.core.validation import (
    check_choice,
    check_finite_all,
    check_same_device_dtype,
    check_same_size,
    check_tensor,
    checking_values,
)
from gsworkbench.field import _numba_impl, _torch_impl
from gsworkbench.field.ops import field_forward

BACKENDS = ("loop", "vectorized", "torch", "numba", "ext")
COVARIANCES = ("full", "diag")


def check_field_inputs(
    points: torch.Tensor, means: torch.Tensor, factors: torch.Tensor, weights: torch.Tensor, covariance: str
) -> None:
    """ValueError naming the problem: shapes, dtypes, devices, non-finite values, bad factors.

    The value checks (finite, positive diagonal, lower-triangular) run in eager mode only
    (:func:`gsworkbench.core.validation.checking_values`)."""
    check_choice("covariance", covariance, COVARIANCES)
    check_tensor("points", points, (None, 3), finite=False)
    check_tensor("means", means, (None, 3), finite=False)
    check_tensor("weights", weights, (None,), finite=False)
    check_tensor("factors", factors, (None, 3, 3) if covariance == "full" else (None, 3), finite=False)
    check_same_size("N (number of Gaussians)", ("means", means, 0), ("factors", factors, 0), ("weights", weights, 0))
    check_same_device_dtype(points=points, means=means, factors=factors, weights=weights)
    if not checking_values():  # eager only: see gsworkbench.core.validation
        return
    # one tensor_stats pass for the finite scans and the factors' ranges (diagonal > 0, zero upper triangle)
    tensors = dict(points=points, means=means, factors=factors, weights=weights)
    if covariance == "full":
        tensors.update(diagonal=torch.diagonal(factors, dim1=-2, dim2=-1), upper0=factors[:, 0, 1:],
                       upper1=factors[:, 1, 2])  # fmt: skip
    stats = dict(zip(tensors, check_finite_all(tensors)))  # (finite, min, max); +inf, -inf when empty
    if covariance == "full":
        if not stats["diagonal"][1] > 0:
            raise ValueError("factors must have a positive diagonal (Cholesky factors L with Sigma = L L^T)")
        if any(stats[k][1] < 0 or stats[k][2] > 0 for k in ("upper0", "upper1")):
            raise ValueError("factors must be lower-triangular (entries above the diagonal must be 0)")
    elif not stats["factors"][1] > 0:
        raise ValueError("factors (standard deviations, covariance='diag') must be positive")


def evaluate(
    points: torch.Tensor,
    means: torch.Tensor,
    factors: torch.Tensor,
    weights: torch.Tensor,
    *,
    covariance: str = "full",
    backend: str = "ext",
    memory_budget: int | None = None,
) -> torch.Tensor:
    """Values [B] of a sum of N Gaussians at B points.

    value_b = sum_n w_n exp(-1/2 (x_b - mu_n)^T Sigma_n^-1 (x_b - mu_n)).

    Args:
        points: [B,3] query points (world units).
        means: [N,3] centres.
        factors: ``covariance="full"``: [N,3,3] lower Cholesky factors L (positive diagonal,
            Sigma = L L^T); ``"diag"``: [N,3] standard deviations per axis.
        weights: [N] weights (any sign).
        backend: ``loop`` | ``vectorized`` | ``torch`` | ``numba`` (CPU) | ``ext`` (see
            :mod:`gsworkbench.field`).
        memory_budget: bytes allowed to ``vectorized``/``torch`` temporaries (default 2 GiB or
            ``$GSW_MEMORY_BUDGET``); over it they raise instead of exhausting RAM.

    Gradients flow to points, means, every entry of the lower factor (or the deviations) and weights.
    """
    check_choice("backend", backend, BACKENDS)
    check_field_inputs(points, means, factors, weights, covariance)
    L = torch.diag_embed(factors) if covariance == "diag" else factors
    if backend == "ext":
        require_kernel("field_forward", points.device.type)
        return field_forward(points, means, L, weights)
    L = torch.tril(L)  # the upper triangle is not a parameter: no gradient flows there
    if points.shape[0] == 0 or means.shape[0] == 0:
        backend = "torch"  # empty sums: the chunked form returns zeros that stay in the graph
    if backend == "loop":
        return _torch_impl.evaluate_loop(points, means, L, weights)
    if backend == "numba":
        return _numba_impl.evaluate_numba(points, means, L, weights)
    if backend == "vectorized":
        return _torch_impl.evaluate_vectorized(points, means, L, weights, memory_budget)
    return _torch_impl.evaluate_torch(points, means, L, weights, memory_budget)


def random_field_inputs(B: int, N: int, covariance: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Inputs of :func:`evaluate` for benchmarks and profiles: ``B`` random points in [-1,1]^3 [B,3],
    ``N`` Gaussians inside it with realistic widths (means [N,3], factors [N,3,3] lower-triangular, or
    [N,3] standard deviations for ``covariance="diag"``), signed weights [N]; seeded, so repeatable."""
    g = torch.Generator().manual_seed(seed)
    points = torch.rand(B, 3, generator=g) * 2 - 1
    means = torch.rand(N, 3, generator=g) * 2 - 1
    sigma = 0.02 + 0.1 * torch.rand(N, 3, generator=g)
    if covariance == "diag":
        factors = sigma
    else:
        factors = torch.diag_embed(sigma) + torch.tril(0.02 * torch.randn(N, 3, 3, generator=g), -1)
    weights = torch.randn(N, generator=g)
    return points, means, factors, weights
