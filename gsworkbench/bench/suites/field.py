"""``gsworkbench bench field``: forward and forward+backward of every field backend.

Sizes: N = 100 and 1000 Gaussians x B = 500 points, and N = 1000 x B = 5000, each with full and
diagonal covariance, for all backends; N = 4096 x B = 65536 for ``torch`` and ``ext`` only.
The summary adds pairs per second and the speedup over ``vectorized`` and over ``loop`` measured in
the same run.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import torch

from gsworkbench._ext import has_ext
from gsworkbench.bench.registry import Case, register_suite
from gsworkbench.field import BACKENDS, evaluate
from gsworkbench.field._torch_impl import memory_budget, vectorized_bytes


def field_inputs(B: int, N: int, covariance: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Random points in [-1,1]^3, Gaussians inside it with realistic widths, signed weights."""
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


def _make(B: int, N: int, covariance: str, backend: str, mode: str) -> Callable[[], Callable[[], object]]:
    def setup() -> Callable[[], object]:
        inputs = field_inputs(B, N, covariance)
        if mode == "forward":

            def run() -> object:
                with torch.no_grad():
                    return evaluate(*inputs, covariance=covariance, backend=backend)

            return run
        leaves = [t.clone().requires_grad_() for t in inputs]
        grad = torch.ones(B)

        def run_fb() -> object:
            for t in leaves:
                t.grad = None
            evaluate(*leaves, covariance=covariance, backend=backend).backward(grad)
            return leaves[0].grad

        return run_fb

    return setup


def _skip(backend: str, B: int, N: int) -> str | None:
    if backend == "ext" and not has_ext():
        return "extension not built"
    if backend == "vectorized" and vectorized_bytes(B, N, 4) > memory_budget():
        return "over the memory budget"
    return None


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Adds pairs/s and speedups over vectorized and loop within each (N, B, covariance, mode)."""
    if "median_s" not in df:
        return df
    df = df.copy()
    df["pairs_per_s"] = df.N * df.B / df.median_s
    keys = ["N", "B", "covariance", "mode"]
    for base in ("vectorized", "loop"):
        ref = df[df.backend == base].set_index(keys).median_s.rename(f"_{base}")
        df = df.join(ref, on=keys)
        df[f"speedup_vs_{base}"] = df[f"_{base}"] / df.median_s
        df = df.drop(columns=f"_{base}")
    df["iqr_pct"] = 100 * df.iqr_s / df.median_s
    return df


@register_suite("field", "Gaussian field: forward and forward+backward per backend", summarize)
def cases(quick: bool) -> list[Case]:
    if quick:
        sizes = [(100, 200, BACKENDS)]
    else:
        sizes = [(100, 500, BACKENDS), (1000, 500, BACKENDS), (1000, 5000, BACKENDS), (4096, 65536, ("torch", "ext"))]
    out = []
    for N, B, backends in sizes:
        for covariance in ("full", "diag"):
            if N == 4096 and covariance == "diag":
                continue  # the large size is specified for full covariance
            for mode in ("forward", "forward+backward"):
                for backend in backends:
                    params = {"backend": backend, "N": N, "B": B, "covariance": covariance, "mode": mode}
                    name = f"field/{backend}/N{N}/B{B}/{covariance}/{mode}"
                    out.append(Case(name, params, _make(B, N, covariance, backend, mode), _skip(backend, B, N)))
    return out
