"""``adam``: one optimiser step over the six splat parameter groups (SH degree 3), per implementation.

``backend``: ``fused``, ``foreach``, ``single`` (``torch.optim.Adam`` with its fused kernel, its
multi-tensor path or its per-tensor loop; each steps the groups one by one, as torch does), and
``visible`` (:class:`gsworkbench.train.adam.VisibleAdam`: only the rows flagged visible, a random
``visible`` share of the N rows, are stepped; the rest keep parameters and moments). The dense
backends run with every row visible; all backends of one (N, share) are timed in interleaved rounds.
Full grid: N = 100k and 1M, shares 1.0, 0.9, 0.5 and 0.2 for ``visible``. quick=True: N = 2,000.
Parameters and gradients are random (the step's cost does not depend on their values), the learning
rates the trainer's defaults. Each row's ``bytes_per_call`` is the step's least memory traffic
(:func:`gsworkbench.train.adam.adam_step_bytes` of the stepped rows' values), for the roofline columns.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import torch

from gsworkbench.bench.registry import Case, Prepared, register_suite

SHAPES = {"means": (3,), "quats": (4,), "log_scales": (3,), "opacity_logits": (), "sh_dc": (3,), "sh_rest": (15, 3)}
LRS = {"means": 1.6e-4, "quats": 1e-3, "log_scales": 5e-3, "opacity_logits": 5e-2, "sh_dc": 2.5e-3, "sh_rest": 1.25e-4}
ROW_VALUES = sum(math.prod(shape) for shape in SHAPES.values())  # parameter values per Gaussian: 59
DENSE = ("fused", "foreach", "single")
SHARES = (1.0, 0.9, 0.5, 0.2)


def step_setup(backend: str, num: int, share: float, seed: int = 0) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        from gsworkbench.train.adam import VisibleAdam, adam_step_bytes

        gen = torch.Generator().manual_seed(seed)
        params = []
        for name, shape in SHAPES.items():
            p = torch.randn(num, *shape, generator=gen).requires_grad_(True)
            p.grad = torch.randn(num, *shape, generator=gen)
            params.append({"params": [p], "lr": LRS[name]})
        if backend == "visible":
            opt = VisibleAdam(params, eps=1e-15)
            visible = torch.rand(num, generator=gen) < share
            fn: Callable[[], None] = lambda: opt.step(visible)  # noqa: E731
        else:
            kw = {"fused": True} if backend == "fused" else {"foreach": backend == "foreach", "fused": False}
            opt = torch.optim.Adam(params, eps=1e-15, **kw)
            fn = opt.step
        rows = int(round(share * num)) if backend == "visible" else num
        return Prepared(fn, {"rows_stepped": rows, "bytes_per_call": float(adam_step_bytes(rows * ROW_VALUES))})

    return setup


def cases(quick: bool) -> list[Case]:
    nums, shares = ((2_000,), (1.0, 0.5)) if quick else ((100_000, 1_000_000), SHARES)
    out = []
    for num in nums:
        for share in shares:
            for backend in (*DENSE, "visible") if share == 1.0 else ("visible",):
                params = {"backend": backend, "num": num, "visible": share}
                out.append(Case(f"adam/{backend}/n{num}/visible{share:g}", params, step_setup(backend, num, share)))
    return out


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Adds ms per step, nanoseconds per stepped row, and the time over ``fused``'s at the same N."""
    df = df.copy()
    if "median_s" not in df:
        return df
    df["ms_per_step"] = df["median_s"] * 1e3
    df["ns_per_row"] = df["median_s"] * 1e9 / df["rows_stepped"]
    fused = df[df["backend"] == "fused"].set_index("num")["median_s"]
    df["x_fused"] = [r.median_s / fused.get(r.num, float("nan")) for r in df.itertuples()]
    return df


register_suite("adam", __doc__.split("\n\n")[0], summarize)(cases)
