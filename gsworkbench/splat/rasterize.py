"""``rasterize``: gsplat-compatible differentiable 3DGS rendering, with checked inputs and a backend.

Pipeline (each stage a separate, timeable function of the backend):
1. ``project_gaussians`` (EWA), 2. ``sh_colors_from_cameras`` (``sh_to_color`` of ``view_dirs``),
3. ``isect_tiles`` (depth-sorted keys), 4. ``rasterize_to_pixels``; gradients flow back through all of
them (autograd for ``torch``, the analytic backward ops for ``ext``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

import torch

from gsworkbench._ext import require_ext, require_kernel
from gsworkbench.core import gaussians
from gsworkbench.core.validation import (
    check_choice,
    check_finite_all,
    check_same_device_dtype,
    check_same_size,
    check_tensor,
    checking_values,
)
from gsworkbench.splat import _torch_impl, ops
from gsworkbench.splat.memory_estimate import check_rasterize_memory

BACKENDS = ("torch", "ext")
RENDER_MODES = ("RGB", "D", "ED", "RGB+D", "RGB+ED")
RASTERIZE_MODES = ("classic", "antialiased")
BIG_PIXELS = 1 << 20  # camera pixels from which rasterize estimates its memory before allocating
BIG_PAIRS = 1 << 18  # camera-Gaussian pairs from which it does so (a few hundred bytes each)


def cuts_saturated_lists(backend: str) -> bool:
    """Whether ``rasterize`` on ``backend`` asks ``isect_tiles`` to end each tile's list where the tile
    saturates (``cut_saturated``): the ext kernels do; the torch reference's whole lists render the same."""
    return backend == "ext"


def backend_module(backend: str) -> ModuleType:
    """The module holding the four stage functions of ``backend``."""
    check_choice("backend", backend, BACKENDS)
    if backend == "torch":
        return _torch_impl
    require_ext()
    return ops


def _check_int(name: str, value: object, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {value!r}")
    return value


def check_rasterize_inputs(
    *,
    means: torch.Tensor,
    quats: torch.Tensor,
    scales: torch.Tensor,
    opacities: torch.Tensor,
    colors: torch.Tensor,
    viewmats: torch.Tensor,
    Ks: torch.Tensor,
    width: int,
    height: int,
    sh_degree: int | None,
    near_plane: float,
    far_plane: float,
    backgrounds: torch.Tensor | None,
    render_mode: str,
    rasterize_mode: str,
    tile_size: int,
    backend: str,
    sh_rest: torch.Tensor | None = None,
    check_values: bool = True,
    scanned_by_ops: Collection[str] = (),
) -> None:
    """ValueError naming the problem: shapes, dtypes, devices, non-finite values, bad sizes or modes.
    The arguments are :func:`rasterize`'s, by name only (twenty of them: a positional call would
    shift silently when one is added).

    The value checks (finite, opacity and scale ranges, focal lengths) run in eager mode only
    (:func:`gsworkbench.core.validation.checking_values`), and only with ``check_values``; the others also
    trace under torch.compile. ``scanned_by_ops`` names the tensors left to the ops' own scans (which
    read them anyway: :func:`rasterize` on ext leaves means, quats and scales to the projection's
    ``check_values``, colors and sh_rest to the SH op's ``check_finite``)."""
    check_choice("backend", backend, BACKENDS)
    check_choice("render_mode", render_mode, RENDER_MODES)
    check_choice("rasterize_mode", rasterize_mode, RASTERIZE_MODES)
    _check_int("width", width, 1)
    _check_int("height", height, 1)
    _check_int("tile_size", tile_size, 1)
    if tile_size > 64:
        raise ValueError(f"tile_size must be <= 64, got {tile_size}")
    if not (0 < float(near_plane) < float(far_plane)):
        raise ValueError(f"need 0 < near_plane < far_plane, got {near_plane}, {far_plane}")
    check_tensor("means", means, (None, 3), finite=False)
    check_tensor("quats", quats, (None, 4), finite=False)
    check_tensor("scales", scales, (None, 3), finite=False)
    check_tensor("opacities", opacities, (None,), finite=False)
    check_tensor("viewmats", viewmats, (None, 4, 4), finite=False)
    check_tensor("Ks", Ks, (None, 3, 3), finite=False)
    if sh_rest is not None and sh_degree is None:
        raise ValueError("sh_rest (the SH coefficients after the first) needs sh_degree")
    if sh_degree is not None:
        _check_int("sh_degree", sh_degree, 0)
        check_tensor("colors", colors, (None, None, 3), finite=False)
        k = gaussians.num_sh_bases(sh_degree)
        n_rows = colors.shape[1]
        if sh_rest is not None:
            if colors.shape[1] != 1:
                raise ValueError(f"with sh_rest, colors must be the DC coefficients [N,1,3], got {list(colors.shape)}")
            check_tensor("sh_rest", sh_rest, (None, None, 3), finite=False)
            check_same_size("N (number of Gaussians)", ("colors", colors, 0), ("sh_rest", sh_rest, 0))
            n_rows += sh_rest.shape[1]
        if n_rows < k:
            got = list(colors.shape) if sh_rest is None else f"{n_rows} (colors and sh_rest)"
            raise ValueError(f"sh_degree {sh_degree} needs colors [N,K,3] with K >= {k}, got {got}")
        n_colors = ("colors", colors, 0)
    elif colors.dim() == 3:
        check_tensor("colors", colors, (None, None, None), finite=False)
        check_same_size("C (number of cameras)", ("viewmats", viewmats, 0), ("colors", colors, 0))
        n_colors = ("colors", colors, 1)
    else:
        check_tensor("colors", colors, (None, None), finite=False)
        n_colors = ("colors", colors, 0)
    if colors.shape[-1] < 1:
        raise ValueError("colors must have at least one channel")
    check_same_size(
        "N (number of Gaussians)",
        ("means", means, 0),
        ("quats", quats, 0),
        ("scales", scales, 0),
        ("opacities", opacities, 0),
        n_colors,
    )
    check_same_size("C (number of cameras)", ("viewmats", viewmats, 0), ("Ks", Ks, 0))
    if viewmats.shape[0] < 1:
        raise ValueError("need at least one camera (viewmats [C,4,4] with C >= 1)")
    tensors = dict(
        means=means, quats=quats, scales=scales, opacities=opacities, colors=colors, viewmats=viewmats, Ks=Ks
    )
    if sh_rest is not None:
        tensors["sh_rest"] = sh_rest
    if backgrounds is not None:
        if render_mode in ("D", "ED"):
            raise ValueError(f"backgrounds apply to colour channels; render_mode {render_mode!r} has none")
        check_tensor("backgrounds", backgrounds, (None, colors.shape[-1]), finite=False)
        check_same_size("C (number of cameras)", ("viewmats", viewmats, 0), ("backgrounds", backgrounds, 0))
        tensors["backgrounds"] = backgrounds
    check_same_device_dtype(**tensors)
    if check_values and checking_values():
        _check_values({k: t for k, t in tensors.items() if k not in scanned_by_ops})
    if backend == "ext":
        require_kernel("splat_rasterize", means.device.type)


def _check_values(tensors: dict[str, torch.Tensor]) -> None:
    """Finite values everywhere, opacities in [0, 1], scales >= 0 (where given), positive focal lengths:
    one pass and one device sync for all of them (:func:`gsworkbench.core.validation.check_finite_all`).
    ``tensors`` (named as :func:`rasterize` names them) gets the focal lengths added."""
    Ks = tensors["Ks"]
    # fx, fy of each camera [C,2]: one strided view of the diagonal (a tiny call pays for each view op)
    tensors["focal lengths"] = Ks.as_strided(
        (Ks.shape[0], 2), (Ks.stride(0), Ks.stride(1) + Ks.stride(2)), Ks.storage_offset()
    )
    stats = dict(zip(tensors, check_finite_all(tensors), strict=True))
    _, omin, omax = stats["opacities"]  # +inf/-inf when empty: passes
    if not (omin >= 0 and omax <= 1):
        raise ValueError("opacities must lie in [0, 1] (activated, not logits)")
    if "scales" in stats and not stats["scales"][1] >= 0:
        raise ValueError("scales must be non-negative (linear scales, not log-scales)")
    if not stats["focal lengths"][1] > 0:
        raise ValueError("Ks must have positive focal lengths fx, fy")


def _memory_check_args(
    C: int, N: int, width: int, height: int, colors: torch.Tensor, sh_degree: int | None,
    sh_rest: torch.Tensor | None, render_mode: str, backgrounds: torch.Tensor | None, tile_size: int,
    backend: str, grad: bool,
) -> dict[str, Any]:  # fmt: skip
    """The sizes :func:`gsworkbench.splat.memory_estimate.check_rasterize_memory` estimates a call from (all
    but dtype, device and the intersections)."""
    D = 1 if render_mode in ("D", "ED") else colors.shape[-1] + (render_mode in ("RGB+D", "RGB+ED"))
    sh_bases = 0
    if sh_degree is not None and render_mode not in ("D", "ED"):
        sh_bases = colors.shape[1] + (sh_rest.shape[1] if sh_rest is not None else 0)
    return dict(
        C=C, width=width, height=height, D=D, backend=backend, tile_size=tile_size,
        backgrounds=backgrounds is not None, grad=grad, n_gaussians=N, sh_bases=sh_bases,
        expected_depth=render_mode in ("ED", "RGB+ED"),
    )  # fmt: skip


def _ext_sh_colors(colors: torch.Tensor, means: torch.Tensor, viewmats: torch.Tensor, sh_degree: int,
                   sh_rest: torch.Tensor | None, check_finite: bool) -> torch.Tensor:  # fmt: skip
    """The ext SH colours, the coefficients scanned as they are read with ``check_finite``; the op's error
    names them as :func:`rasterize` does (colors, sh_rest)."""
    try:
        return ops.sh_colors_from_cameras(colors, means, viewmats, sh_degree, sh_rest, check_finite=check_finite)
    except ValueError as e:
        message = str(e)
        if not message.endswith("contains non-finite values (NaN or Inf)"):
            raise
        name = "sh_rest" if message.startswith("coeffs_rest") else "colors"
        raise ValueError(f"{name} contains non-finite values (NaN or Inf)") from None


def _no_stage(name: str) -> AbstractContextManager[Any]:
    return contextlib.nullcontext()


def rasterize(
    means: torch.Tensor,
    quats: torch.Tensor,
    scales: torch.Tensor,
    opacities: torch.Tensor,
    colors: torch.Tensor,
    viewmats: torch.Tensor,
    Ks: torch.Tensor,
    width: int,
    height: int,
    *,
    sh_degree: int | None = None,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    backgrounds: torch.Tensor | None = None,
    render_mode: str = "RGB",
    rasterize_mode: str = "classic",
    tile_size: int = 16,
    eps2d: float = 0.3,
    absgrad: bool = False,
    backend: str = "ext",
    stages: Callable[[str], AbstractContextManager[Any]] | None = None,
    sh_rest: torch.Tensor | None = None,
    check_values: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """Renders N Gaussians into C pinhole cameras (gsplat's ``rasterization`` conventions).

    Args:
        means [N,3] (world), quats [N,4] (wxyz, unnormalised), scales [N,3] (linear, world units),
        opacities [N] in [0,1]; colors [N,D] or [C,N,D] (any D), or SH coefficients [N,K,3] with
        ``sh_degree`` (colour = SH(dir) + 0.5 clamped at 0, dir = mean - camera centre); with
        ``sh_rest`` [N,K-1,3], colors holds only the DC coefficients [N,1,3] and the coefficients are
        the two along dim 1 (3DGS's sh0 and shN parameters passed apart: the ext backend reads and
        differentiates them where they lie, with no [N,K,3] concatenation per call);
        viewmats [C,4,4] world-to-camera (x right, y down, z forward); Ks [C,3,3] pinhole
        intrinsics (pixels); width, height (pixels).
        backgrounds: [C,D] colours composited behind the Gaussians (colour channels only).
        render_mode: "RGB" (colours), "D" (accumulated depth sum w_i z_i), "ED" (expected depth,
        D / alpha), "RGB+D", "RGB+ED" (depth appended as the last channel).
        rasterize_mode: "classic", or "antialiased" (opacity times sqrt(det cov2d / det blurred)).
        absgrad: after the backward, ``meta["means2d"].absgrad`` [C,N,2] holds the sum over pixels of the
        absolute per-pixel gradients of each projected mean (gsplat's absgrad; ``meta["means2d"].grad``
        after ``retain_grad()`` holds the plain sum). Both feed densification.
        backend: "ext" (compiled kernels, analytic backward) or "torch" (pure-torch reference).
        stages: optional ``name -> context manager`` wrapped around each stage ("project", "sh", "isect",
        "rasterize"), e.g. a stage timer or ``torch.profiler.record_function``.
        check_values: scan the inputs' values (finite, opacities in [0, 1], scales >= 0, focal lengths
        > 0) before rendering; shapes, dtypes and devices are always checked. A caller that watches its
        own values (the trainer's divergence monitor: a non-finite loss stops the step, parameters and
        gradients are scanned every few steps) may skip the scan, one pass over every input per call.

    Returns:
        render_colors [C,H,W,D'] (D' = D, 1, or D+1 with depth), render_alphas [C,H,W,1], meta
        (radii, means2d, depths, conics, opacities, tiles_per_gauss, isect_ids, flatten_ids,
        tile_offsets, n_isects, tile_width, tile_height, ...). On ext (CPU), long lists may end where
        their tiles saturate, keeping the Gaussians that reach the tile on its rows
        (``isect_tiles(cut_saturated=True)``): each tile's list is then a sublist of the torch
        reference's, and ``tiles_per_gauss`` still counts the whole boxes.
    """
    stage = stages if stages is not None else _no_stage
    # on the CPU, the ext projection and SH op scan their inputs as they read them: no second pass over
    # them (on a GPU the one scan of all inputs keeps to one device sync)
    ext_scans = backend == "ext" and isinstance(means, torch.Tensor) and means.device.type == "cpu"
    sh_op_scans = ext_scans and sh_degree is not None and render_mode not in ("D", "ED")
    scanned_by_ops = (*(("means", "quats", "scales") if ext_scans else ()),
                      *(("colors", "sh_rest") if sh_op_scans else ()))  # fmt: skip
    scan_in_ops = check_values and checking_values()
    with stage("project"):  # the input checks count as part of the projection stage
        check_rasterize_inputs(
            means=means,
            quats=quats,
            scales=scales,
            opacities=opacities,
            colors=colors,
            viewmats=viewmats,
            Ks=Ks,
            width=width,
            height=height,
            sh_degree=sh_degree,
            near_plane=near_plane,
            far_plane=far_plane,
            backgrounds=backgrounds,
            render_mode=render_mode,
            rasterize_mode=rasterize_mode,
            tile_size=tile_size,
            backend=backend,
            sh_rest=sh_rest,
            check_values=check_values,
            scanned_by_ops=scanned_by_ops,
        )
        if absgrad and torch.compiler.is_compiling():
            raise NotImplementedError(
                "rasterize(absgrad=True) is not supported under torch.compile (it accumulates into "
                "means2d.absgrad from the backward); run that step eagerly"
            )
        impl = ops if backend == "ext" else _torch_impl  # backend and extension checked above
        C, N = viewmats.shape[0], means.shape[0]
        # refuse a render that cannot fit before allocating any of it (small renders skip the estimate)
        memory_check: dict[str, Any] | None = None
        if checking_values() and (
            C * width * height >= BIG_PIXELS or C * N >= BIG_PAIRS or "GSW_MEMORY_LIMIT" in os.environ
        ):
            memory_check = _memory_check_args(
                C, N, width, height, colors, sh_degree, sh_rest, render_mode, backgrounds, tile_size, backend,
                torch.is_grad_enabled() and any(
                    t is not None and t.requires_grad for t in (means, quats, scales, opacities, colors, sh_rest)
                ),
            )  # fmt: skip
            check_rasterize_memory(**memory_check, dtype=means.dtype, device=means.device)
        if ext_scans:
            radii, means2d, depths, conics, comps = ops.project_gaussians(
                means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane,
                check_values=scan_in_ops,
            )  # fmt: skip
        else:
            radii, means2d, depths, conics, comps = impl.project_gaussians(
                means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane
            )
    opac = opacities.expand(C, N)  # [N] -> [C,N] in one view (one autograd node, not two)
    if rasterize_mode == "antialiased":
        opac = opac * comps
    if render_mode in ("D", "ED"):
        feats = depths[..., None]
    else:
        if sh_degree is not None:
            with stage("sh"):
                if sh_op_scans:
                    feats = _ext_sh_colors(colors, means, viewmats, sh_degree, sh_rest, scan_in_ops)
                else:
                    feats = impl.sh_colors_from_cameras(colors, means, viewmats, sh_degree, sh_rest)
        elif colors.dim() == 2:
            feats = colors.expand(C, N, colors.shape[-1])
        else:
            feats = colors
        if render_mode in ("RGB+D", "RGB+ED"):
            feats = torch.cat([feats, depths[..., None]], dim=-1)
    tile_width = (width + tile_size - 1) // tile_size
    tile_height = (height + tile_size - 1) // tile_size
    with stage("isect"):
        # boxes cut to each Gaussian's alpha support: the rasterizer would skip it in the tiles cut; the
        # ext kernel also ends long lists where their tiles saturate (the torch reference's whole lists
        # render the same)
        tiles_per_gauss, isect_ids, flatten_ids, tile_offsets = impl.isect_tiles(
            means2d, radii, depths, tile_size, tile_width, tile_height, conics, opac,
            cut_saturated=cuts_saturated_lists(backend),
        )  # fmt: skip
        if memory_check is not None and backend == "ext":  # the intersections known: before the pixels
            check_rasterize_memory(**memory_check, dtype=means.dtype, device=means.device,
                                   n_isects=flatten_ids.shape[0])  # fmt: skip
    with stage("rasterize"):
        render_colors, render_alphas = impl.rasterize_to_pixels(
            means2d, conics, feats, opac, width, height, tile_size, tile_offsets, flatten_ids, absgrad
        )
        if render_mode in ("ED", "RGB+ED"):
            render_colors = torch.cat(
                [render_colors[..., :-1], render_colors[..., -1:] / render_alphas.clamp_min(1e-10)], dim=-1
            )
        if backgrounds is not None:
            render_colors = impl.composite_background(render_colors, render_alphas, backgrounds)
    meta = dict(
        radii=radii,
        means2d=means2d,
        depths=depths,
        conics=conics,
        opacities=opac,
        compensations=comps,
        tiles_per_gauss=tiles_per_gauss,
        isect_ids=isect_ids,
        flatten_ids=flatten_ids,
        tile_offsets=tile_offsets,
        n_isects=flatten_ids.shape[0],  # an int; symbolic (data-dependent) while torch.compile traces
        tile_width=tile_width,
        tile_height=tile_height,
        tile_size=tile_size,
        width=width,
        height=height,
        n_cameras=C,
    )
    return render_colors, render_alphas, meta
