"""Render benchmark cases (used by the ``render`` suite and the rendering notebook).

Every case renders one view of ``synthetic_splats(num, sh_degree, seed=0)`` from an orbit camera at
distance 3 (60 degree horizontal fov). ``stage`` is one of:

- ``project``, ``sh``, ``isect``, ``rasterize``: that stage alone (forward, inputs precomputed);
- ``forward``: the whole ``rasterize`` call without gradients;
- ``forward+backward``: ``rasterize`` then backward of sum(colours) + sum(alphas) to every input;
- ``train-step``: ``rasterize``, the L1 loss against a fixed image, and its backward.

The last three also run under torch.compile (``compile``: "aot_eager", "inductor"; "eager" is no
compilation), interleaved with the eager runs; compilation happens in the case's setup.

Beside the timings, each case records (in :data:`CASE_EXTRAS`, merged by :func:`summarize_render`)
the number of tile intersections and ``first_call_peak_rss_mib``: how far the process's resident set
rose during the case's first call (inputs already built) above its level just before it, in MiB
(:func:`gsworkbench.bench.memory.peak_rss_increase_mib`: freed memory is returned to the OS first and
the kernel's high-water mark is reset, so the number does not depend on earlier cases). It is the
call's working memory, outputs included, as the OS sees it; NaN where it cannot be measured.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
import torch

from gsworkbench.bench.memory import peak_rss_increase_mib
from gsworkbench.bench.registry import Case
from gsworkbench.compile import compile_step
from gsworkbench.splat import _torch_impl, cameras
from gsworkbench.splat.rasterize import backend_module, rasterize
from gsworkbench.splats import SplatSet, synthetic_splats

STAGES = ("project", "sh", "isect", "rasterize", "forward", "forward+backward")
WHOLE_CALLS = ("forward", "forward+backward", "train-step")  # stages that can run compiled
CASE_EXTRAS: dict[str, dict[str, Any]] = {}


@functools.lru_cache(maxsize=4)
def _scene(num: int, sh_degree: int) -> SplatSet:
    return synthetic_splats(num, sh_degree, seed=0)


def _whole_call(
    stage: str, compile_mode: str, inputs: tuple[torch.Tensor, ...], Ks: torch.Tensor, width: int, height: int,
    sh_degree: int, backend: str,
) -> Callable[[], Any]:
    """One call of ``rasterize`` (forward), or with a loss and its backward (forward+backward: sum of
    colours and alphas; train-step: L1 against a fixed image), the forward and loss compiled with
    ``compile_mode`` (compile_step; the backward runs outside the compiled function, compiled by
    AOTAutograd). Compilation happens here, in the setup: two calls warm it up."""
    leaves = [t.detach().clone().requires_grad_(stage != "forward") for t in inputs]

    def render(*ts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        img, alpha, _ = rasterize(*ts, Ks, width, height, sh_degree=sh_degree, backend=backend)
        return img, alpha

    if stage == "forward":
        compiled = compile_step(render, compile_mode, eager_first_call=False)

        def fn() -> Any:
            with torch.no_grad():
                return compiled(*leaves)

    else:
        with torch.no_grad():
            target = render(*leaves)[0].flip(1) if stage == "train-step" else None  # a fixed image: mirrored

        def loss(*ts: torch.Tensor) -> torch.Tensor:
            img, alpha = render(*ts)
            return (img - target).abs().mean() if target is not None else img.sum() + alpha.sum()

        compiled = compile_step(loss, compile_mode, eager_first_call=False)

        def fn() -> Any:
            for t in leaves:
                t.grad = None
            compiled(*leaves).backward()

    if compile_mode != "eager":
        fn()
        fn()
    return fn


def _make_setup(name: str, num: int, width: int, height: int, sh_degree: int, backend: str, stage: str,  # noqa: ANN202
                compile_mode: str = "eager"):  # fmt: skip
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
        else:
            inputs = (means, quats, scales, opac, sh, vm)
            fn = _whole_call(stage, compile_mode, inputs, Ks, width, height, sh_degree, backend)
        CASE_EXTRAS[name] = {"n_isects": int(fid.numel()), "first_call_peak_rss_mib": peak_rss_increase_mib(fn)}
        return fn

    return setup


def render_cases(
    nums: Iterable[int],
    sizes: Iterable[tuple[int, int]],
    sh_degrees: Iterable[int],
    backends: Iterable[str],
    stages: Iterable[str] = STAGES,
    skip: Callable[[dict[str, Any]], str | None] = lambda p: None,
    compile_modes: Iterable[str] = ("eager",),
) -> list[Case]:
    """The grid of cases; ``skip(params)`` may return a reason to record a case as skipped.

    ``compile_modes``: "eager", "aot_eager", "inductor" (torch.compile backends) for the stages
    forward, forward+backward and train-step (the single-stage cases run eagerly only)."""
    cases = []
    for num in nums:
        for width, height in sizes:
            for deg in sh_degrees:
                for backend in backends:
                    for stage in stages:
                        for mode in compile_modes if stage in WHOLE_CALLS else ("eager",):
                            params = dict(backend=backend, num=num, width=width, height=height, sh_degree=deg,
                                          stage=stage, compile=mode)  # fmt: skip
                            name = f"render/{backend}/n{num}/{width}x{height}/sh{deg}/{stage}"
                            name += f"/{mode}" if mode != "eager" else ""
                            setup = _make_setup(name, num, width, height, deg, backend, stage, mode)
                            cases.append(Case(name, params, setup, skip=skip(params)))
    return cases


def summarize_render(df: pd.DataFrame) -> pd.DataFrame:
    """Adds n_isects, first_call_peak_rss_mib, fps, isects_per_s, the backward time, ext-over-torch speedups and
    compiled-over-eager speedups."""
    df = df.copy()
    if "compile" not in df:
        df["compile"] = "eager"
    for col in ("n_isects", "first_call_peak_rss_mib"):
        df[col] = [CASE_EXTRAS.get(c, {}).get(col) for c in df["case"]]
    if "median_s" not in df:
        df["median_s"] = float("nan")
    key = ["backend", "compile", "num", "width", "height", "sh_degree"]
    fwd = df[df.stage == "forward"].set_index(key)["median_s"]
    both = df[df.stage == "forward+backward"].set_index(key)["median_s"]
    bwd = (both - fwd).dropna()
    if len(bwd):
        extra = bwd.rename("median_s").reset_index().assign(stage="backward")
        n_is = df[df.stage == "forward"].set_index(key)["n_isects"]
        extra["n_isects"] = n_is.reindex(extra.set_index(key).index).to_numpy()
        df = pd.concat([df, extra], ignore_index=True)
    df["n_isects"] = df["n_isects"].astype("Int64")
    df["fps"] = (1.0 / df["median_s"]).where(df.stage.isin(list(WHOLE_CALLS)))
    df["isects_per_s"] = df["n_isects"] / df["median_s"]
    cols = [*key, "stage"]
    t = df[df.backend == "torch"][[*cols, "median_s"]].rename(columns={"median_s": "torch_s"})
    t = t.drop(columns="backend").dropna()
    df = df.merge(t, on=cols[1:], how="left")
    df["speedup_vs_torch"] = (df["torch_s"] / df["median_s"]).where(df.backend != "torch")
    df = df.drop(columns="torch_s")
    cols = [c for c in [*key, "stage"] if c != "compile"]
    e = df[df.compile == "eager"][[*cols, "median_s"]].rename(columns={"median_s": "eager_s"}).dropna()
    df = df.merge(e, on=cols, how="left")
    df["speedup_vs_eager"] = df["eager_s"] / df["median_s"]
    return df.drop(columns="eager_s")
