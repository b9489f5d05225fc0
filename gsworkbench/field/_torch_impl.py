"""Pure-torch backends of :func:`gsworkbench.field.evaluate` (the references beside the ext op).

All take points [B,3], means [N,3], lower Cholesky factors L [N,3,3] (Sigma = L L^T) and weights [N]
and return values [B]; autograd gives every gradient.

- ``loop``: one ``torch.linalg.solve`` per Gaussian, the original slow code users come from.
- ``vectorized``: one batched solve over an expanded [B,N,3,3] system.
- ``torch``: precomputed inverse factors M = L^-1, whitened offsets z = M (x - mu), chunked over B
  so memory stays within the budget.
"""

from __future__ import annotations

import torch

from gsworkbench.core.limits import MemoryBudgetError, memory_budget


def evaluate_loop(points: torch.Tensor, means: torch.Tensor, L: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Python loop over Gaussians, one solve each."""
    out = points.new_zeros(points.shape[0])
    for n in range(means.shape[0]):
        sigma = L[n] @ L[n].T
        d = points - means[n]
        sol = torch.linalg.solve(sigma, d.T)
        q = (d.T * sol).sum(0)
        out = out + weights[n] * torch.exp(-0.5 * q)
    return out


def vectorized_bytes(B: int, N: int, itemsize: int) -> int:
    """Rough peak bytes of :func:`evaluate_vectorized` with autograd (the [B,N,3,3] solve dominates)."""
    return B * N * (9 + 3 + 3 + 2) * itemsize * 3


def evaluate_vectorized(
    points: torch.Tensor, means: torch.Tensor, L: torch.Tensor, weights: torch.Tensor, budget: int | None = None
) -> torch.Tensor:
    """Batched solve over an expanded [B,N,3,3]; refuses sizes over the memory budget."""
    B, N = points.shape[0], means.shape[0]
    need, limit = vectorized_bytes(B, N, points.element_size()), memory_budget(budget)
    if need > limit:
        raise MemoryBudgetError(
            f"backend 'vectorized' would need about {need / 2**30:.1f} GiB for B={B}, N={N} "
            f"(budget {limit / 2**30:.1f} GiB); use backend 'torch' or 'ext', or raise GSW_MEMORY_BUDGET"
        )
    sigma = (L @ L.transpose(-1, -2)).expand(B, N, 3, 3)
    d = (points[:, None, :] - means[None, :, :])[..., None]  # [B,N,3,1]
    sol = torch.linalg.solve(sigma, d)
    q = (d * sol).sum((-1, -2))
    return (weights * torch.exp(-0.5 * q)).sum(-1)


def inverse_factors(L: torch.Tensor) -> torch.Tensor:
    """M = L^-1 [N,3,3] for lower-triangular L (a triangular solve against the identity)."""
    eye = torch.eye(3, dtype=L.dtype, device=L.device).expand_as(L)
    return torch.linalg.solve_triangular(L, eye, upper=False)


def torch_chunk_size(N: int, itemsize: int, budget: int | None = None) -> int:
    """Points per chunk of :func:`evaluate_torch` so that its [chunk, N] temporaries fit the budget."""
    per_point = max(N, 1) * 12 * itemsize  # d (3) + z (3) + q, e, products, saved for backward
    return memory_budget(budget) // per_point


def evaluate_torch(
    points: torch.Tensor, means: torch.Tensor, L: torch.Tensor, weights: torch.Tensor, budget: int | None = None
) -> torch.Tensor:
    """Inverse factors and whitened offsets, chunked over points to bound memory."""
    B, N = points.shape[0], means.shape[0]
    chunk = torch_chunk_size(N, points.element_size(), budget)
    if chunk < 1:
        raise MemoryBudgetError(
            f"backend 'torch' cannot fit even one point against N={N} Gaussians in the memory budget "
            f"({memory_budget(budget)} bytes); use backend 'ext' or raise GSW_MEMORY_BUDGET"
        )
    M = inverse_factors(L)
    m00, m10, m11 = M[:, 0, 0], M[:, 1, 0], M[:, 1, 1]
    m20, m21, m22 = M[:, 2, 0], M[:, 2, 1], M[:, 2, 2]
    outs = []
    for start in range(0, max(B, 1), chunk):  # at least once, so empty inputs keep their graph
        x = points[start : start + chunk]
        d0 = x[:, 0:1] - means[:, 0]
        d1 = x[:, 1:2] - means[:, 1]
        d2 = x[:, 2:3] - means[:, 2]
        z0 = m00 * d0
        z1 = m10 * d0 + m11 * d1
        z2 = m20 * d0 + m21 * d1 + m22 * d2
        q = z0 * z0 + z1 * z1 + z2 * z2
        outs.append(torch.exp(-0.5 * q) @ weights)
    return torch.cat(outs)
