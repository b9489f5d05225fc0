"""``overhead``: the fixed cost of tiny calls, where the work is nearly nothing and the time is the call.

Cases (backend ``ext``; each the median of 200 single calls, with their IQR, after 20 warm-up calls):

- ``field``: :func:`gsworkbench.field.evaluate` on 1 point and 1 Gaussian (full covariance), forward
  (no grad) and forward+backward (backward of the sum to all four inputs);
- ``rasterize``: :func:`gsworkbench.splat.rasterize` of 10 Gaussians (SH degree 3) at 16x16, one
  camera, forward (no grad) and forward+backward (backward of sum(colours) + sum(alphas) to every input).

This is what a training loop on small batches, or interactive use, pays per call on top of the work:
the input checks, the Python and autograd layers, and waking OpenMP threads for tiny work. Run with the
threads of a training run (``--threads``; the table records them) and, to match how the targets were
set, ``OMP_WAIT_POLICY=PASSIVE``. The summary adds ``median_us`` and ``iqr_us``. quick=True: 50 calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import torch

from gsworkbench._ext import has_ext
from gsworkbench.bench.registry import Case, Prepared, register_suite

CALLS = 200
MODES = ("forward", "forward+backward")


def _leaves(tensors: tuple[torch.Tensor, ...], grad: bool) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(grad) for t in tensors]


def _field_setup(mode: str) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        from gsworkbench.field import evaluate

        g = torch.Generator().manual_seed(0)
        inputs = (torch.rand(1, 3, generator=g), torch.rand(1, 3, generator=g), 0.3 * torch.eye(3)[None],
                  torch.ones(1))  # fmt: skip
        if mode == "forward":

            def fwd() -> Any:
                with torch.no_grad():
                    return evaluate(*inputs, backend="ext")

            return Prepared(fwd)
        leaves = _leaves(inputs, True)

        def fwd_bwd() -> Any:
            for t in leaves:
                t.grad = None
            evaluate(*leaves, backend="ext").sum().backward()

        return Prepared(fwd_bwd)

    return setup


def _rasterize_setup(mode: str) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        from gsworkbench.core.splats import synthetic_splats
        from gsworkbench.splat import orbit_cameras, rasterize

        s = synthetic_splats(10, 3, seed=0)
        viewmats, Ks = orbit_cameras(1, 16, 16, distance=3.0)
        inputs = (s.means, s.quats, s.scales, s.opacities, s.sh, viewmats)
        if mode == "forward":

            def fwd() -> Any:
                with torch.no_grad():
                    return rasterize(*inputs, Ks, 16, 16, sh_degree=3, backend="ext")

            return Prepared(fwd)
        leaves = _leaves(inputs, True)

        def fwd_bwd() -> Any:
            for t in leaves:
                t.grad = None
            img, alpha, _ = rasterize(*leaves, Ks, 16, 16, sh_degree=3, backend="ext")
            (img.sum() + alpha.sum()).backward()

        return Prepared(fwd_bwd)

    return setup


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Adds the median and IQR in microseconds."""
    df = df.copy()
    if "median_s" in df:
        df["median_us"] = df.median_s * 1e6
        df["iqr_us"] = df.iqr_s * 1e6
    return df


@register_suite("overhead", "fixed cost of tiny calls: field 1x1 and rasterize 10 Gaussians at 16x16", summarize)
def cases(quick: bool) -> list[Case]:
    calls = 50 if quick else CALLS
    skip = None if has_ext() else "extension not built"
    out = []
    for op, make, size in (("field", _field_setup, "B1/N1"), ("rasterize", _rasterize_setup, "n10/16x16")):
        for mode in MODES:
            params = {"op": op, "backend": "ext", "size": size, "mode": mode, "calls": calls}
            out.append(Case(f"overhead/{op}/{size}/{mode}", params, make(mode), skip, single_calls=calls))
    return out
