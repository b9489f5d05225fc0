"""Render benchmark cases (used by the ``render`` suite and the rendering notebook).

Every case renders one view of ``synthetic_splats(num, sh_degree, seed=0)`` from an orbit camera at
distance 3 (60 degree horizontal fov). ``stage`` is one of:

- ``project``, ``sh``, ``isect``, ``rasterize``: that stage alone (forward, inputs precomputed);
- ``forward``: the whole ``rasterize`` call without gradients;
- ``forward+backward``: ``rasterize`` then backward of sum(colours) + sum(alphas) to every input.

Beside the timings, each case records (in :data:`CASE_EXTRAS`, merged by :func:`summarize_render`)
the number of tile intersections and ``peak_mem_mb``: the largest increase of the process's resident
set size (``/proc/self/statm``, sampled every millisecond by a thread) over its value just before the
case's first call (inputs already built). That is the call's peak working memory as the OS sees it,
approximately: memory that an earlier case freed but the C allocator kept resident is reused without
raising the RSS, so small values (and 0) are lower bounds; it is not torch-allocator accounting.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
import torch

from gsworkbench.bench.registry import Case
from gsworkbench.splat import _torch_impl, cameras
from gsworkbench.splat.rasterize import backend_module, rasterize
from gsworkbench.splats import SplatSet, synthetic_splats

STAGES = ("project", "sh", "isect", "rasterize", "forward", "forward+backward")
CASE_EXTRAS: dict[str, dict[str, Any]] = {}


@functools.lru_cache(maxsize=4)
def _scene(num: int, sh_degree: int) -> SplatSet:
    return synthetic_splats(num, sh_degree, seed=0)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: no measurement
        return 0


def peak_rss_increase(fn: Callable[[], Any], interval_s: float = 0.001) -> float:
    """Largest resident-set increase (MiB) during one call of ``fn``, sampled by a thread."""
    base = _rss_bytes()
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            time.sleep(interval_s)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        fn()
    finally:
        stop.set()
        th.join()
    peak[0] = max(peak[0], _rss_bytes())
    return (peak[0] - base) / 2**20


def _make_setup(name: str, num: int, width: int, height: int, sh_degree: int, backend: str, stage: str):  # noqa: ANN202
    def setup() -> Callable[[], Any]:
        s = _scene(num, sh_degree)
        vm, Ks = cameras.orbit_cameras(1, width, height, distance=3.0)
        means, quats, scales, opac, sh = s.means, s.quats, s.scales, s.opacities, s.sh
        impl = backend_module(backend)
        ts = 16
        tw, th = (width + ts - 1) // ts, (height + ts - 1) // ts
        radii, m2, depths, conics, _ = impl.project_gaussians(means, quats, scales, vm, Ks, width, height)
        dirs = _torch_impl.view_dirs(means, vm)
        colors = impl.sh_to_color(sh, dirs, sh_degree)
        _, _, fid, toff = impl.isect_tiles(m2, radii, depths, ts, tw, th)
        o = opac[None].expand(1, -1).contiguous()
        if stage == "project":
            fn = lambda: impl.project_gaussians(means, quats, scales, vm, Ks, width, height)  # noqa: E731
        elif stage == "sh":
            fn = lambda: impl.sh_to_color(sh, dirs, sh_degree)  # noqa: E731
        elif stage == "isect":
            fn = lambda: impl.isect_tiles(m2, radii, depths, ts, tw, th)  # noqa: E731
        elif stage == "rasterize":
            fn = lambda: impl.rasterize_to_pixels(m2, conics, colors, o, width, height, ts, toff, fid)  # noqa: E731
        elif stage == "forward":

            def fn() -> Any:
                with torch.no_grad():
                    return rasterize(
                        means,
                        quats,
                        scales,
                        opac,
                        sh,
                        vm,
                        Ks,
                        width,
                        height,
                        sh_degree=sh_degree,
                        backend=backend,
                    )

        else:
            leaves = [t.detach().clone().requires_grad_(True) for t in (means, quats, scales, opac, sh, vm)]

            def fn() -> Any:
                for t in leaves:
                    t.grad = None
                img, alpha, _ = rasterize(
                    *leaves[:5], leaves[5], Ks, width, height, sh_degree=sh_degree, backend=backend
                )
                (img.sum() + alpha.sum()).backward()

        # memory of the first (cold) call: later calls reuse memory the C allocator kept resident
        CASE_EXTRAS[name] = {"n_isects": int(fid.numel()), "peak_mem_mb": peak_rss_increase(fn)}
        return fn

    return setup


def render_cases(
    nums: Iterable[int],
    sizes: Iterable[tuple[int, int]],
    sh_degrees: Iterable[int],
    backends: Iterable[str],
    stages: Iterable[str] = STAGES,
    skip: Callable[[dict[str, Any]], str | None] = lambda p: None,
) -> list[Case]:
    """The grid of cases; ``skip(params)`` may return a reason to record a case as skipped."""
    cases = []
    for num in nums:
        for width, height in sizes:
            for deg in sh_degrees:
                for backend in backends:
                    for stage in stages:
                        params = dict(
                            backend=backend, num=num, width=width, height=height, sh_degree=deg, stage=stage
                        )
                        name = f"render/{backend}/n{num}/{width}x{height}/sh{deg}/{stage}"
                        setup = _make_setup(name, num, width, height, deg, backend, stage)
                        cases.append(Case(name, params, setup, skip=skip(params)))
    return cases


def summarize_render(df: pd.DataFrame) -> pd.DataFrame:
    """Adds n_isects, peak_mem_mb, fps, isects_per_s, the backward time and ext-over-torch speedups."""
    df = df.copy()
    for col in ("n_isects", "peak_mem_mb"):
        df[col] = [CASE_EXTRAS.get(c, {}).get(col) for c in df["case"]]
    if "median_s" not in df:
        df["median_s"] = float("nan")
    key = ["backend", "num", "width", "height", "sh_degree"]
    fwd = df[df.stage == "forward"].set_index(key)["median_s"]
    both = df[df.stage == "forward+backward"].set_index(key)["median_s"]
    bwd = (both - fwd).dropna()
    if len(bwd):
        extra = bwd.rename("median_s").reset_index().assign(stage="backward (fb - f)")
        n_is = df[df.stage == "forward"].set_index(key)["n_isects"]
        extra["n_isects"] = n_is.reindex(extra.set_index(key).index).to_numpy()
        df = pd.concat([df, extra], ignore_index=True)
    df["fps"] = (1.0 / df["median_s"]).where(df.stage.isin(["forward", "forward+backward"]))
    df["isects_per_s"] = df["n_isects"] / df["median_s"]
    cols = [*key, "stage"]
    t = df[df.backend == "torch"][[*cols, "median_s"]].rename(columns={"median_s": "torch_s"})
    t = t.drop(columns="backend").dropna()
    df = df.merge(t, on=cols[1:], how="left")
    df["speedup_vs_torch"] = (df["torch_s"] / df["median_s"]).where(df.backend != "torch")
    df = df.drop(columns="torch_s")
    return df
