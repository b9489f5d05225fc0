"""``render``: the 3DGS rasterizer (gsworkbench.splat), ext against the torch reference.

Full grid (ext): 10k, 100k, 1M Gaussians x 128^2, 256^2, 512^2, 800^2 x SH degree 0 and 3, forward and
forward+backward; the per-stage breakdown (project, sh, isect, rasterize) at SH degree 3. The torch
reference runs on the small end of the grid (<= 100k Gaussians at <= 256^2, forward+backward only at
10k) and is recorded as skipped elsewhere, as is ext forward+backward for 1M Gaussians above 512^2
(several seconds each on 2 cores). Plus the target case: 2,000 Gaussians at 128^2, SH degree 3,
forward, forward+backward and train-step (L1 loss + backward), each eager and under torch.compile
(aot_eager, inductor), interleaved. Plus the real-size scenes of the train suite (``scene`` column;
gsworkbench.studies.scene_splats), ext forward at SH degree 3 at 800x800 and 1920x1080 from one of the
object scene's train views: ``surface`` 300k and 1M, ``dense`` (a trained-like object) 100k and 300k,
``random-init`` (a NeRF-synthetic start) 100k, ``volumetric`` (translucent splats filling the
object's box) 100k, ``cloud`` (translucent splats filling the whole view, each pixel saturating only
after a hundred or more) 100k and ``trained`` (a real trainer run on the 800 px object, capped at 100k; seen from
one of its held-out views; column ``gaussians`` says where it ended below 100k) 100k. quick=True: 500
Gaussians at 64x48 (for tests), with the ext train-step also under aot_eager, and each scene kind at
2,000 Gaussians at 64x48; the real-size cases are listed as skipped (full grid only). External
rasterizers registered with ``gsworkbench.studies.lineup.register_implementation("rasterize", name, fn)``
join the forward and forward+backward cases (checked against the torch reference first; see that module).

The cases (:func:`render_cases`, also used by the rendering notebook): every case renders one view of
``synthetic_splats(num, sh_degree, seed=0)`` (``scene`` = ``synthetic``) from an orbit camera at
distance 3 (60 degree horizontal fov); :func:`scene_cases` renders the real-size scenes. ``stage`` is
one of:

- ``project``, ``sh``, ``isect``, ``rasterize``: that stage alone (forward, inputs precomputed);
- ``forward``: the whole ``rasterize`` call without gradients;
- ``forward+backward``: ``rasterize`` then backward of sum(colours) + sum(alphas) to every input;
- ``train-step``: ``rasterize``, the L1 loss against a fixed image, and its backward.

The last three also run under torch.compile (``compile``: "aot_eager", "inductor"; "eager" is no
compilation), interleaved with the eager runs; compilation happens in the case's setup.

Beside the timings, each case's setup returns (as its extras, columns of its row) the number of tile
intersections and ``first_call_peak_rss_mib``: how far the process's resident set rose during the
case's first call (inputs already built) above its level just before it, in MiB
(:func:`gsworkbench.bench.peak_rss.peak_rss_increase_mib`: freed memory is returned to the OS first and
the kernel's high-water mark is reset, so the number does not depend on earlier cases). It is the
call's working memory, outputs included, as the OS sees it; NaN where it cannot be measured. And the
roofline counts of the forward stages and of ``forward+backward`` (``flops_per_call``, ``bytes_per_call``:
:func:`gsworkbench.splat.ops.render_stage_work`, which counts the rasterize backward but not the other
stages' backward; NaN for ``train-step``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
import torch

from gsworkbench._ext import has_ext
from gsworkbench.bench.peak_rss import peak_rss_increase_mib
from gsworkbench.bench.registry import Case, Prepared, register_suite
from gsworkbench.core import cameras, gaussians
from gsworkbench.core.compile import COMPILE_MODES, compile_step
from gsworkbench.core.splats import SplatSet, synthetic_splats
from gsworkbench.splat import _torch_impl
from gsworkbench.splat.ops import blended_evaluations, last_contributors, render_stage_work
from gsworkbench.splat.rasterize import backend_module, cuts_saturated_lists, rasterize
from gsworkbench.studies.lineup import check_rasterize, implementations

STAGES = ("project", "sh", "isect", "rasterize", "forward", "forward+backward")
WHOLE_CALLS = ("forward", "forward+backward", "train-step")  # stages that can run compiled
EXTRA_COLUMNS = ("n_isects", "first_call_peak_rss_mib", "flops_per_call", "bytes_per_call", "gaussians")  # extras
FULL_NUMS = (10_000, 100_000, 1_000_000)
FULL_SIZES = ((128, 128), (256, 256), (512, 512), (800, 800))
# the real-size scenes: (kind, Gaussians) at each of SCENE_SIZES, ext forward, SH degree 3
SCENE_NUMS = (
    ("surface", 300_000), ("surface", 1_000_000), ("dense", 100_000), ("dense", 300_000), ("random-init", 100_000),
    ("volumetric", 100_000), ("cloud", 100_000), ("trained", 100_000),
)
SCENE_SIZES = ((800, 800), (1920, 1080))
SCENE_KINDS = tuple(dict.fromkeys(kind for kind, _ in SCENE_NUMS))
QUICK_SKIP = "real-size case: runs in the full grid only (skipped in --quick)"


@functools.lru_cache(maxsize=4)
def _scene(num: int, sh_degree: int) -> SplatSet:
    return synthetic_splats(num, sh_degree, seed=0)


def _whole_call(
    stage: str, compile_mode: str, inputs: tuple[torch.Tensor, ...], Ks: torch.Tensor, width: int, height: int,
    sh_degree: int, rasterizer: Callable[..., Any],
) -> Callable[[], Any]:
    """One call of ``rasterizer`` (forward; ``rasterize``'s signature less ``backend``), or with a loss
    and its backward (forward+backward: sum of colours and alphas; train-step: L1 against a fixed
    image), the forward and loss compiled with ``compile_mode`` (compile_step; the backward runs
    outside the compiled function, compiled by AOTAutograd). Compilation happens here, in the setup:
    two calls warm it up."""
    leaves = [t.detach().clone().requires_grad_(stage != "forward") for t in inputs]

    def render(*ts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        img, alpha, _ = rasterizer(*ts, Ks, width, height, sh_degree=sh_degree)
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


def _stage_call(
    stage: str, inputs: tuple[torch.Tensor, ...], Ks: torch.Tensor, width: int, height: int, sh_degree: int,
    backend: str, compile_mode: str = "eager",
) -> tuple[Callable[[], Any], int, int | None]:  # fmt: skip
    """The callable of one case's ``stage`` on ``inputs`` (means, quats, scales, opacities, sh, viewmats;
    a single stage runs on precomputed inputs), the view's number of tile intersections and, for the
    stages that rasterize (with the extension), the forward's blended evaluations
    (:func:`gsworkbench.splat.ops.blended_evaluations`)."""
    means, quats, scales, opac, sh, vm = inputs
    impl = backend_module(backend)
    ts = 16
    tw, th = (width + ts - 1) // ts, (height + ts - 1) // ts
    radii, m2, depths, conics, _ = impl.project_gaussians(means, quats, scales, vm, Ks, width, height)
    dirs = _torch_impl.view_dirs(means, vm)
    colors = impl.sh_to_color(sh, dirs, sh_degree)
    o = opac[None].expand(1, -1).contiguous()
    cut = cuts_saturated_lists(backend)  # as rasterize() lists them
    _, _, fid, toff = impl.isect_tiles(m2, radii, depths, ts, tw, th, conics, o, cut_saturated=cut)
    if stage == "project":
        fn = lambda: impl.project_gaussians(means, quats, scales, vm, Ks, width, height)  # noqa: E731
    elif stage == "sh":
        fn = lambda: impl.sh_to_color(sh, dirs, sh_degree)  # noqa: E731
    elif stage == "isect":
        fn = lambda: impl.isect_tiles(m2, radii, depths, ts, tw, th, conics, o, cut_saturated=cut)  # noqa: E731
    elif stage == "rasterize":
        fn = lambda: impl.rasterize_to_pixels(m2, conics, colors, o, width, height, ts, toff, fid)  # noqa: E731
    else:
        rasterizer = functools.partial(rasterize, backend=backend)
        fn = _whole_call(stage, compile_mode, inputs, Ks, width, height, sh_degree, rasterizer)
    evaluations = None
    if stage in ("rasterize", "forward", "forward+backward") and has_ext() and m2.device.type == "cpu":
        # the ext forward's last contributors give the blends that made the image
        evaluations = blended_evaluations(toff, last_contributors(m2, conics, o, width, height, ts, toff, fid), ts)
    return fn, int(fid.numel()), evaluations


def _extras(fn: Callable[[], Any], stage: str, num: int, width: int, height: int, sh_degree: int,
            n_isects: int, evaluations: int | None = None) -> dict[str, Any]:  # fmt: skip
    """A case's extra columns: intersections, first-call memory and the roofline counts."""
    work = render_stage_work(stage, num, width, height, sh_degree, n_isects, evaluations=evaluations)
    return {"n_isects": n_isects, "first_call_peak_rss_mib": peak_rss_increase_mib(fn), **work}


def _make_setup(num: int, width: int, height: int, sh_degree: int, backend: str, stage: str,
                compile_mode: str = "eager") -> Callable[[], Prepared]:  # fmt: skip
    def setup() -> Prepared:
        s = _scene(num, sh_degree)
        vm, Ks = cameras.orbit_cameras(1, width, height, distance=3.0)
        inputs = (s.means, s.quats, s.scales, s.opacities, s.sh, vm)
        fn, n_isects, evaluations = _stage_call(stage, inputs, Ks, width, height, sh_degree, backend, compile_mode)
        return Prepared(fn, _extras(fn, stage, num, width, height, sh_degree, n_isects, evaluations))

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
                            params = dict(backend=backend, scene="synthetic", num=num, width=width,
                                          height=height, sh_degree=deg, stage=stage, compile=mode)  # fmt: skip
                            name = f"render/{backend}/n{num}/{width}x{height}/sh{deg}/{stage}"
                            name += f"/{mode}" if mode != "eager" else ""
                            setup = _make_setup(num, width, height, deg, backend, stage, mode)
                            cases.append(Case(name, params, setup, skip=skip(params)))
    return cases


def _lineup_setup(rasterizer: Callable[..., Any], num: int, width: int, height: int, sh_degree: int,
                  stage: str) -> Callable[[], Prepared]:  # fmt: skip
    def setup() -> Prepared:
        s = _scene(num, sh_degree)
        vm, Ks = cameras.orbit_cameras(1, width, height, distance=3.0)
        inputs = (s.means, s.quats, s.scales, s.opacities, s.sh, vm)
        fn = _whole_call(stage, "eager", inputs, Ks, width, height, sh_degree, rasterizer)
        return Prepared(fn, {"first_call_peak_rss_mib": peak_rss_increase_mib(fn)})

    return setup


def render_lineup_cases(
    nums: Iterable[int], sizes: Iterable[tuple[int, int]], sh_degrees: Iterable[int],
    stages: Iterable[str] = ("forward", "forward+backward"),
    skip: Callable[[dict[str, Any]], str | None] = lambda p: None,
) -> list[Case]:  # fmt: skip
    """Cases of the external rasterizers (:mod:`gsworkbench.studies.lineup`): the same names, params and
    calls as ours, backend = the implementation's name; one that fails
    :func:`~gsworkbench.studies.lineup.check_rasterize` is skipped with the reason, others per ``skip``."""
    out = []
    for name, fn in implementations("rasterize").items():
        skip_all = check_rasterize(name, fn)
        for num in nums:
            for width, height in sizes:
                for deg in sh_degrees:
                    for stage in stages:
                        params = dict(backend=name, scene="synthetic", num=num, width=width, height=height,
                                      sh_degree=deg, stage=stage, compile="eager")  # fmt: skip
                        case = f"render/{name}/n{num}/{width}x{height}/sh{deg}/{stage}"
                        why = skip_all or skip(params)
                        out.append(Case(case, params, _lineup_setup(fn, num, width, height, deg, stage), why))
    return out


@functools.lru_cache(maxsize=1)
def _scene_splats(kind: str, num: int, scene_size: tuple[int, int], sh_degree: int) -> SplatSet:
    from gsworkbench.studies.scene_splats import object_scene, scene_splats

    return scene_splats(kind, object_scene(*scene_size), num, sh_degree)


def _scene_setup(kind: str, num: int, width: int, height: int, scene_size: tuple[int, int],
                 sh_degree: int = 3, stage: str = "forward") -> Callable[[], Prepared]:  # fmt: skip
    def setup() -> Prepared:
        from gsworkbench.studies.scene_splats import kind_camera, object_scene

        s = _scene_splats(kind, num, scene_size, sh_degree)
        vm, Ks = kind_camera(kind, object_scene(*scene_size), width, height)
        scales, opac = gaussians.scales_from_log(s.log_scales), gaussians.opacity_from_logit(s.opacity_logits)
        inputs = (s.means, s.quats, scales, opac, s.sh, vm)
        fn, n_isects, evaluations = _stage_call(stage, inputs, Ks, width, height, sh_degree, "ext")
        # counted for the Gaussians rendered: a trained run ends below num if too few were seen to grow
        extras = _extras(fn, stage, len(s), width, height, sh_degree, n_isects, evaluations)
        return Prepared(fn, {**extras, "gaussians": len(s)})

    return setup


def scene_cases(kinds_nums: Iterable[tuple[str, int]], sizes: Iterable[tuple[int, int]],
                scene_size: tuple[int, int] = (800, 800), skip: str | None = None,
                stages: Iterable[str] = ("forward",)) -> list[Case]:  # fmt: skip
    """ext cases (SH degree 3) of the real-size scenes (:mod:`gsworkbench.studies.scene_splats`): each
    (kind, Gaussians) at each image size and stage (``forward``, or a single forward stage: ``project``,
    ``sh``, ``isect``, ``rasterize``), splats built on the object scene at ``scene_size`` and seen from its
    first train view, or, for ``trained``, its run's first held-out view
    (:func:`~gsworkbench.studies.scene_splats.kind_camera`; the vertical field of view kept at every size).
    ``gaussians`` (an extra) is the count rendered (a trained run grows to ``num`` by a budget)."""
    out = []
    for kind, num in kinds_nums:
        for width, height in sizes:
            for stage in stages:
                params = dict(backend="ext", scene=kind, num=num, width=width, height=height, sh_degree=3,
                              stage=stage, compile="eager")  # fmt: skip
                name = f"render/ext/{kind}/n{num}/{width}x{height}/sh3/{stage}"
                out.append(Case(name, params, _scene_setup(kind, num, width, height, scene_size, stage=stage), skip))
    return out


def summarize_render(df: pd.DataFrame) -> pd.DataFrame:
    """Adds n_isects, first_call_peak_rss_mib, fps, isects_per_s, the backward time, ext-over-torch speedups and
    compiled-over-eager speedups."""
    df = df.copy()
    if "compile" not in df:
        df["compile"] = "eager"
    if "scene" not in df:  # runs from before the real-size scenes
        df["scene"] = "synthetic"
    for col in EXTRA_COLUMNS:  # absent when no case was timed
        if col not in df:
            df[col] = float("nan")
    if "median_s" not in df:
        df["median_s"] = float("nan")
    key = ["backend", "compile", "scene", "num", "width", "height", "sh_degree"]
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


def _skip_full(p: dict[str, Any]) -> str | None:
    big = p["width"] * p["height"] > 256 * 256
    if p["backend"] == "torch":
        if p["num"] > 100_000 or big:
            return "torch reference: too slow for this size (sub-sampled grid)"
        if p["stage"] == "forward+backward" and p["num"] > 10_000:
            return "torch reference: backward too slow for this size (sub-sampled grid)"
        if p["stage"] in ("project", "sh", "isect", "rasterize") and p["sh_degree"] != 3:
            return "stage breakdown at SH degree 3 only"
    elif p["stage"] in ("project", "sh", "isect", "rasterize") and p["sh_degree"] != 3:
        return "stage breakdown at SH degree 3 only"
    if p["num"] >= 1_000_000 and p["stage"] == "forward+backward" and big and p["width"] > 512:
        return "1M forward+backward above 512^2: over the suite's time budget"
    return None


def cases(quick: bool) -> list[Case]:
    if quick:
        return (
            render_cases([500], [(64, 48)], [0, 3], ["ext", "torch"], STAGES)
            + render_cases([500], [(64, 48)], [3], ["ext"], ("train-step",), compile_modes=("eager", "aot_eager"))
            + render_lineup_cases([500], [(64, 48)], [0, 3])
            + scene_cases([(kind, 2_000) for kind in SCENE_KINDS], [(64, 48)], (64, 64))
            + scene_cases(SCENE_NUMS, SCENE_SIZES, skip=QUICK_SKIP)
        )
    target = render_cases([2_000], [(128, 128)], [3], ["ext", "torch"], WHOLE_CALLS, compile_modes=COMPILE_MODES)
    grid = render_cases(FULL_NUMS, FULL_SIZES, [0, 3], ["ext", "torch"], STAGES, skip=_skip_full)
    lineup = render_lineup_cases([2_000], [(128, 128)], [3]) + render_lineup_cases(
        FULL_NUMS, FULL_SIZES, [0, 3], skip=_skip_full
    )
    return target + grid + lineup + scene_cases(SCENE_NUMS, SCENE_SIZES)


register_suite("render", __doc__.split("\n\n")[0], summarize_render)(cases)
