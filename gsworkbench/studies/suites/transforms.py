"""``gsworkbench bench transforms``: every transform backend against a parallel memory copy.

Sweep: N = 10k, 100k, 1M, 2M splats (quick: 1k, 10k), SH degree 0 (means/quats/scales only) and 3,
with and without preallocated ``out`` buffers, one similarity transform (rotation, translation,
uniform scale, pivot). Plus a non-uniform-scale case (per-Gaussian SVD) at N = 100k (quick: 1k).

Bytes moved per splat (float32; ``gsworkbench.transforms.ops.transform_bytes``): read
means+quats+log_scales (40 B) [+ SH rest 180 B at degree 3], write the same. Opacity logits and SH DC
are unchanged and shared with the input, with or without ``out`` (never copied). The ``copy`` rows
time ``dst.copy_(src)`` of half those bytes (same read + write traffic) on the same threads: torch's
multithreaded copy into a preallocated tensor, the memory-bandwidth line. The summary adds Gaussians/s,
GB/s, the fraction of the copy bandwidth, the speedup over numpy and over numba; each row's
``bytes_per_call`` (the same count) feeds the roofline columns.

The headline case (``N1000000/sh0``, with and without ``out``): ``speedup_vs_numba`` of the ``ext``
rows is the ratio to the numba backend, a fused parallel numba loop over the splats (one pass per
frame, per-Gaussian scalar math, writing only the transformed fields), called through the same
``transform`` as ``ext``, in the same run.

Without ``out`` every call allocates fresh outputs, and the OS faults in (and zeroes) those pages on
first write: at SH degree 3 and N >= 1M that costs more than the transform itself (preallocate
``out`` in loops, or let torch use huge pages: ``THP_MEM_ALLOC_ENABLE=1``). Thread count: the
runner's (``--threads``), applied to torch, the ext kernel's OpenMP and numba alike.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import torch

from gsworkbench._ext import has_ext
from gsworkbench.bench.registry import Case, Prepared, register_suite
from gsworkbench.core.splats import SplatSet, synthetic_splats
from gsworkbench.transforms.ops import transform_bytes

BACKENDS = ("numpy", "numba", "torch", "ext")
TRANSFORM = {"rotation": [0.9, 0.2, -0.3, 0.25], "translation": [0.5, -1.0, 2.0], "scale": 1.5,
             "center": [0.1, 0.2, 0.3]}  # fmt: skip
NONUNIFORM = {**TRANSFORM, "scale": [0.5, 1.5, 2.0]}

_cache: dict[tuple[int, int], SplatSet] = {}


def splats_for(n: int, degree: int) -> SplatSet:
    """A synthetic set (the last one is kept, so a sweep builds each size once)."""
    key = (n, degree)
    if key not in _cache:
        _cache.clear()
        _cache[key] = synthetic_splats(n, degree, seed=1)
    return _cache[key]


def _transform_setup(backend: str, n: int, degree: int, out: bool, kw: dict) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        from gsworkbench.transforms import transform

        if backend == "numba":
            from gsworkbench.transforms._numba_impl import warm_up

            warm_up()  # compile time stays out of the timings
        s = splats_for(n, degree)
        buf = s.clone() if out else None
        work = {"bytes_per_call": float(transform_bytes(n, degree))}
        if out:
            return Prepared(lambda: transform(s, backend=backend, out=buf, **kw), work)
        return Prepared(lambda: transform(s, backend=backend, **kw), work)

    return setup


def _copy_setup(nbytes: int) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        src = torch.ones(max(nbytes // 8, 1), dtype=torch.float32)
        dst = torch.empty_like(src)
        return Prepared(lambda: dst.copy_(src), {"bytes_per_call": float(2 * 4 * src.numel())})

    return setup


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Adds Gaussians/s, GB/s, fraction of the copy bandwidth and speedups over numpy and numba."""
    if "median_s" not in df:
        return df
    df = df.copy()
    df["gaussians_per_s"] = df.n / df.median_s
    df["gb_per_s"] = df.bytes / df.median_s / 1e9
    keys = ["n", "sh_degree", "out"]
    copy = df[df.backend == "copy"].set_index(keys).gb_per_s.rename("copy_gb_per_s")
    df = df.join(copy, on=keys)
    df["frac_of_copy"] = df.gb_per_s / df.copy_gb_per_s
    for ref_backend in ("numpy", "numba"):
        ref = df[df.backend == ref_backend].set_index([*keys, "kind"]).median_s.rename("_ref")
        df = df.join(ref, on=[*keys, "kind"])
        df[f"speedup_vs_{ref_backend}"] = df._ref / df.median_s
        df = df.drop(columns=["_ref"])
    df["iqr_pct"] = 100 * df.iqr_s / df.median_s
    df.loc[df.backend == "copy", "gaussians_per_s"] = float("nan")
    return df


def sweep_cases(sizes: list[int], degrees: tuple[int, ...] = (0, 3), backends: tuple[str, ...] = BACKENDS,
                modes: tuple[bool, ...] = (False, True)) -> list[Case]:  # fmt: skip
    """The similarity sweep (and its copy rows) over ``sizes`` x ``degrees`` x out modes."""
    cases = []
    for n in sizes:
        for degree in degrees:
            for out in modes:
                nbytes = transform_bytes(n, degree)
                common = {"n": n, "sh_degree": degree, "out": out, "bytes": nbytes}
                tag = f"N{n}/sh{degree}/{'out' if out else 'alloc'}"
                cases.append(Case(f"transforms/copy/{tag}", {"backend": "copy", "kind": "copy", **common},
                                  _copy_setup(nbytes)))  # fmt: skip
                for b in backends:
                    skip = "extension not built" if b == "ext" and not has_ext() else None
                    cases.append(Case(f"transforms/{b}/{tag}", {"backend": b, "kind": "similarity", **common},
                                      _transform_setup(b, n, degree, out, TRANSFORM), skip))  # fmt: skip
    return cases


@register_suite("transforms", "splat transforms (means/quats/scales, SH degree 3) per backend vs memory copy",
                summarize)  # fmt: skip
def cases(quick: bool) -> list[Case]:
    sizes = [1_000, 10_000] if quick else [10_000, 100_000, 1_000_000, 2_000_000]
    out = sweep_cases(sizes)
    n = 1_000 if quick else 100_000
    for b in BACKENDS:
        skip = "extension not built" if b == "ext" and not has_ext() else None
        params = {"backend": b, "kind": "nonuniform", "n": n, "sh_degree": 3, "out": False,
                  "bytes": transform_bytes(n, 3)}  # fmt: skip
        setup = _transform_setup(b, n, 3, False, NONUNIFORM)
        out.append(Case(f"transforms/{b}/N{n}/sh3/nonuniform", params, setup, skip))
    return out
