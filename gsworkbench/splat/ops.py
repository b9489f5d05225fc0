"""The extension's rasterizer ops: fake (meta) kernels and autograd, registered with torch.library.

Forward ops (csrc/cpu/splat_*.cpp; per-Gaussian and per-pixel math in csrc/include/gsw/):

- ``splat_project``: EWA projection -> radii, means2d, depths, conics, compensations (``check_values``:
  its inputs scanned as the CPU kernel reads them);
- ``splat_view_dirs``: view directions (camera centre to mean) of the SH colours (device-agnostic ATen
  ops in csrc/composite/splat_view_dirs_composite.cpp, which also serve as its fake kernel);
- ``splat_sh_to_color``: SH coefficients and view directions -> colours (``check_finite``: the
  coefficients scanned as the CPU kernel reads them);
- ``splat_sh_colors_from_cameras``: the two above as one op (what ``rasterize`` calls: one autograd node);
- ``splat_isect_tiles``: tile intersections sorted by tile then depth (no gradient);
- ``splat_rasterize``: per-tile front-to-back compositing -> colours, alphas, final transmittance,
  last contributor per pixel (the last two, the backward's state, empty with ``keep_state=False``
  unless a gradient is recorded); ``splat_rasterize_lane_counts`` is its counting twin (CPU,
  :func:`rasterize_lane_counts`);
- ``splat_composite_background``: the background behind a render, in one pass (CPU; its backward is
  registered here, as it is a single cheap elementwise op).

Each differentiable forward has an analytic ``*_backward`` op, wired to it in C++
(csrc/autograd/splat_autograd.cpp: a Python autograd layer cost tiny calls more than the kernels).
absgrad, the Python attribute ``means2d.absgrad`` set by the backward, comes from
:class:`_RasterizeWithAbsgrad` here, which :func:`rasterize_to_pixels` uses when asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gsworkbench._ext import has_ext, has_kernel, require_ext, require_kernel
from gsworkbench.core.compile import data_dependent_size
from gsworkbench.splat import _torch_impl


def _register() -> None:
    lib = "gsworkbench::"

    @torch.library.register_fake(lib + "splat_project")
    def _project_fake(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane,  # noqa: ANN001, ANN202
                      check_values=False):  # noqa: ANN001  # fmt: skip
        C, N = viewmats.shape[0], means.shape[0]
        return (
            means.new_empty(C, N, dtype=torch.int32),
            means.new_empty(C, N, 2),
            means.new_empty(C, N),
            means.new_empty(C, N, 3),
            means.new_empty(C, N),
        )

    @torch.library.register_fake(lib + "splat_project_backward")
    def _project_bwd_fake(
        means,
        quats,
        scales,
        viewmats,
        Ks,
        width,
        height,
        eps2d,
        near_plane,
        far_plane,  # noqa: ANN001, ANN202
        radii,
        v_means2d,
        v_depths,
        v_conics,
        v_comps,
    ):
        return (
            torch.empty_like(means),
            torch.empty_like(quats),
            torch.empty_like(scales),
            torch.empty_like(viewmats),
        )


    @torch.library.register_fake(lib + "splat_sh_to_color")
    def _sh_fake(coeffs, dirs, degree, coeffs_rest=None, check_finite=False):  # noqa: ANN001, ANN202
        return dirs.new_empty(dirs.shape[0], dirs.shape[1], 3)

    @torch.library.register_fake(lib + "splat_sh_to_color_backward")
    def _sh_bwd_fake(v_colors, coeffs, dirs, degree, coeffs_rest=None):  # noqa: ANN001, ANN202
        rest = coeffs.new_empty(0) if coeffs_rest is None else torch.empty_like(coeffs_rest)
        return torch.empty_like(coeffs), torch.empty_like(dirs), rest


    @torch.library.register_fake(lib + "splat_isect_tiles")
    def _isect_fake(means2d, radii, depths, tile_size, tile_width, tile_height, conics=None, opacities=None,  # noqa: ANN001, ANN202, E501
                    cut_saturated=False):  # noqa: ANN001  # fmt: skip
        C, N = radii.shape
        m = data_dependent_size(radii)  # M intersections: unbacked under torch.compile, no config needed
        return (
            radii.new_empty(C, N),
            radii.new_empty(m, dtype=torch.int64),
            radii.new_empty(m),
            radii.new_empty(C, tile_height, tile_width),
        )

    @torch.library.register_fake(lib + "splat_rasterize")
    def _raster_fake(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids, absgrad=False,  # noqa: ANN001, ANN202, E501
                     keep_state=True):  # noqa: ANN001  # fmt: skip
        C, D = colors.shape[0], colors.shape[2]
        state = (C, height, width) if keep_state else (0,)  # below autograd: as the kernel returns it
        return (
            colors.new_empty(C, height, width, D),
            colors.new_empty(C, height, width, 1),
            colors.new_empty(state),
            colors.new_empty(state, dtype=torch.int32),
        )

    @torch.library.register_fake(lib + "splat_rasterize_lane_counts")
    def _lane_counts_fake(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids):  # noqa: ANN001, ANN202, E501
        return colors.new_empty(9, dtype=torch.float64)

    @torch.library.register_fake(lib + "splat_rasterize_backward")
    def _raster_bwd_fake(
        means2d,
        conics,
        colors,
        opacities,
        width,
        height,
        tile_size,
        tile_offsets,  # noqa: ANN001, ANN202
        flatten_ids,
        transmittances,
        last_ids,
        v_colors,
        v_alphas,
        absgrad=False,
    ):
        return (
            torch.empty_like(means2d),
            torch.empty_like(conics),
            torch.empty_like(colors),
            torch.empty_like(opacities),
            torch.empty_like(means2d) if absgrad else means2d.new_empty(0),
        )


def _accumulate_absgrad(means2d: torch.Tensor, abs_grad: torch.Tensor) -> None:
    """Adds ``abs_grad`` [C,N,2] to ``means2d.absgrad`` (created on the first backward)."""
    prev = getattr(means2d, "absgrad", None)
    means2d.absgrad = abs_grad if prev is None else prev + abs_grad


class _RasterizeWithAbsgrad(torch.autograd.Function):
    """``splat_rasterize`` whose backward also adds the per-pixel absolute gradients of ``means2d`` to
    ``means2d.absgrad`` [C,N,2] (gsplat's convention), a Python attribute that the op's C++ autograd
    cannot set. Eager only: ``rasterize`` refuses absgrad under torch.compile."""

    @staticmethod
    def forward(ctx, means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids):  # noqa: ANN001, ANN205, E501
        out = torch.ops.gsworkbench.splat_rasterize(
            means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids, True
        )
        ctx.args = (width, height, tile_size)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(means2d, conics, colors, opacities, tile_offsets, flatten_ids, out[2], out[3])
        return out[0], out[1]

    @staticmethod
    def backward(ctx, v_colors, v_alphas):  # noqa: ANN001, ANN205
        means2d, conics, colors, opacities, tile_offsets, flatten_ids, trans, last = ctx.saved_tensors
        if v_colors is None and v_alphas is None:
            return (None,) * 9
        C, H, W = trans.shape
        if v_colors is None:
            v_colors = colors.new_zeros(C, H, W, colors.shape[2])
        if v_alphas is None:
            v_alphas = colors.new_zeros(C, H, W, 1)
        gm, gc, gcol, go, gabs = torch.ops.gsworkbench.splat_rasterize_backward(
            means2d, conics, colors, opacities, *ctx.args, tile_offsets, flatten_ids, trans, last, v_colors, v_alphas,
            True,
        )  # fmt: skip
        _accumulate_absgrad(means2d, gabs)
        return gm, gc, gcol, go, None, None, None, None, None


def _register_background() -> None:
    @torch.library.register_fake("gsworkbench::splat_composite_background")
    def _bg_fake(colors, alphas, backgrounds):  # noqa: ANN001, ANN202
        return torch.empty_like(colors)

    @torch.library.register_fake("gsworkbench::splat_composite_background_backward")
    def _bg_bwd_fake(v_out, alphas, backgrounds, bg_grad):  # noqa: ANN001, ANN202
        return torch.empty_like(alphas), (torch.empty_like(backgrounds) if bg_grad else backgrounds.new_empty(0))

    def _setup(ctx, inputs, output):  # noqa: ANN001, ANN202
        ctx.save_for_backward(inputs[1], inputs[2])

    def _backward(ctx, v_out):  # noqa: ANN001, ANN202
        alphas, backgrounds = ctx.saved_tensors
        bg_grad = ctx.needs_input_grad[2]
        v_alphas, v_bg = torch.ops.gsworkbench.splat_composite_background_backward(
            v_out, alphas, backgrounds, bg_grad
        )
        return v_out, v_alphas, (v_bg if bg_grad else None)

    torch.library.register_autograd("gsworkbench::splat_composite_background", _backward, setup_context=_setup)


if has_ext():
    _register()
if has_kernel("splat_composite_background", "cpu"):
    _register_background()


def composite_background(colors: torch.Tensor, alphas: torch.Tensor, backgrounds: torch.Tensor) -> torch.Tensor:
    """Ext background compositing (one pass on the CPU); same contract as
    :func:`gsworkbench.splat._torch_impl.composite_background`, which serves other devices."""
    if colors.device.type == "cpu" and has_kernel("splat_composite_background", "cpu"):
        return torch.ops.gsworkbench.splat_composite_background(colors, alphas, backgrounds.to(colors.dtype))
    return _torch_impl.composite_background(colors, alphas, backgrounds)


def project_gaussians(
    means: torch.Tensor,
    quats: torch.Tensor,
    scales: torch.Tensor,
    viewmats: torch.Tensor,
    Ks: torch.Tensor,
    width: int,
    height: int,
    eps2d: float = 0.3,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    *,
    check_values: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ext EWA projection; same contract as :func:`gsworkbench.splat._torch_impl.project_gaussians`.
    ``check_values``: ValueError when means, quats or scales hold a NaN or an infinity, or a scale is
    negative (the CPU kernel scans them as it reads them, with no second pass)."""
    require_ext()
    return torch.ops.gsworkbench.splat_project(
        means,
        quats,
        scales,
        viewmats,
        Ks,
        int(width),
        int(height),
        float(eps2d),
        float(near_plane),
        float(far_plane),
        bool(check_values),
    )


def view_dirs(means: torch.Tensor, viewmats: torch.Tensor) -> torch.Tensor:
    """Ext SH view directions [C,N,3]; same contract as :func:`gsworkbench.splat._torch_impl.view_dirs`."""
    require_ext()
    return torch.ops.gsworkbench.splat_view_dirs(means, viewmats)


def sh_to_color(
    coeffs: torch.Tensor,
    dirs: torch.Tensor,
    degree: int,
    coeffs_rest: torch.Tensor | None = None,
    *,
    check_finite: bool = False,
) -> torch.Tensor:
    """Ext SH to colour: coeffs [N,K,3] (or the DC row [N,1,3] and coeffs_rest [N,K-1,3]), dirs [C,N,3]
    -> colours [C,N,3]. ``check_finite``: ValueError when coeffs or coeffs_rest holds a NaN or an
    infinity (every row; the CPU kernel scans them as it reads them, with no second pass)."""
    require_ext()
    return torch.ops.gsworkbench.splat_sh_to_color(coeffs, dirs, int(degree), coeffs_rest, bool(check_finite))


def sh_colors_from_cameras(
    coeffs: torch.Tensor,
    means: torch.Tensor,
    viewmats: torch.Tensor,
    degree: int,
    coeffs_rest: torch.Tensor | None = None,
    *,
    check_finite: bool = False,
) -> torch.Tensor:
    """Ext :func:`sh_to_color` of :func:`view_dirs` as one op (one autograd node); same contract as
    :func:`gsworkbench.splat._torch_impl.sh_colors_from_cameras`, and ``check_finite`` as in
    :func:`sh_to_color`."""
    require_ext()
    return torch.ops.gsworkbench.splat_sh_colors_from_cameras(
        coeffs, means, viewmats, int(degree), coeffs_rest, bool(check_finite)
    )


def isect_tiles(
    means2d: torch.Tensor,
    radii: torch.Tensor,
    depths: torch.Tensor,
    tile_size: int,
    tile_width: int,
    tile_height: int,
    conics: torch.Tensor | None = None,
    opacities: torch.Tensor | None = None,
    cut_saturated: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ext tile intersection; same contract as :func:`gsworkbench.splat._torch_impl.isect_tiles` (with
    conics and opacities, each 3-sigma box cut to the bounding box of the Gaussian's alpha support).
    ``cut_saturated``: the CPU kernel ends each tile's list where its pixels have surely stopped
    compositing and keeps the Gaussians that reach the tile on its rows, as
    :func:`gsworkbench.splat._torch_impl.saturation_keep` and
    :func:`gsworkbench.splat._torch_impl.row_support_reach` do in float64 (lists that agree with them up
    to float32 rounding); the CUDA kernel returns the whole lists. No gradient flows
    through it (its C++ autograd kernel goes straight to the kernel)."""
    require_ext()
    grid = (int(tile_size), int(tile_width), int(tile_height))
    return torch.ops.gsworkbench.splat_isect_tiles(
        means2d, radii, depths, *grid, conics, opacities, bool(cut_saturated)
    )


def rasterize_to_pixels(
    means2d: torch.Tensor,
    conics: torch.Tensor,
    colors: torch.Tensor,
    opacities: torch.Tensor,
    width: int,
    height: int,
    tile_size: int,
    tile_offsets: torch.Tensor,
    flatten_ids: torch.Tensor,
    absgrad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ext tile rasterization: colours [C,H,W,D] and alphas [C,H,W,1]; differentiable.

    With ``absgrad``, the backward also sets ``means2d.absgrad`` [C,N,2]: the sum over pixels of the
    absolute per-pixel gradients of each projected mean (for absgrad densification).
    """
    require_ext()
    if absgrad and torch.is_grad_enabled() and means2d.requires_grad:
        return _RasterizeWithAbsgrad.apply(
            means2d, conics, colors, opacities, int(width), int(height), int(tile_size), tile_offsets, flatten_ids
        )
    out = torch.ops.gsworkbench.splat_rasterize(
        means2d,
        conics,
        colors,
        opacities,
        int(width),
        int(height),
        int(tile_size),
        tile_offsets,
        flatten_ids,
        False,
        False,  # keep_state: the transmittances and last contributors, unless a gradient needs them
    )
    return out[0], out[1]


# ---- work counts of the forward kernels, for the roofline (gsworkbench.bench.roofline) ----
# Floating-point operations of one pixel-splat evaluation of the CPU forward (csrc/cpu/splat_simd.h
# chunk_alpha_vis, csrc/cpu/splat_rasterize_forward.h composite_chunk), an FMA counted as two:
# offsets dx, dy (2), sigma = (ca dx^2 + cc dy^2) / 2 + cb dx dy (9), exp(-sigma) (range reduction 6,
# degree-6 polynomial 12, scale 1: 19), alpha = opacity e (1), 1 - alpha, T (1 - alpha), alpha T (3),
# then one FMA per colour channel: 34 + 2 D. Comparisons, min/max and mask moves are not counted.
RASTERIZE_FLOPS_PER_EVALUATION_BASE = 34
# Floating-point operations of one pixel-splat evaluation of the CPU backward of the compositing
# (csrc/cpu/splat_rasterize_backward.h, its AVX2 and AVX-512 twins without absgrad), an FMA counted as
# two: alpha as in the forward (offsets 2, sigma 9, exp 19, alpha 1: 31); 1 - alpha and its reciprocal
# (2); the transmittance before the splat, alpha times it and dL/dalpha's first term (3); dL/dalpha's
# update from the colour behind (4) and that colour's running dot product (2); dL/dopacity's term, its
# sum and v_sigma (3); the mean and conic moments (2 products, 2 sums, 3 FMAs: 10); then per colour
# channel two FMAs (the colour's dot product with dL/dcolour, the colour gradient): 55 + 4 D.
RASTERIZE_BACKWARD_FLOPS_PER_EVALUATION_BASE = 55
# Flops of the real SH basis per degree beyond the constant term (the standard polynomials in x, y, z:
# degree 1: 3, degree 2: 6 products and 5 terms, degree 3: 7 terms), cumulative.
_SH_BASIS_FLOPS = (0, 3, 18, 43)


@dataclass(frozen=True)
class LaneCounts:
    """What one forward of the CPU rasterizer did, counted by its counting twin.

    ``pairs``: tile-Gaussian pairs whose alpha support reaches a row of the tile while the tile was
    still compositing; ``blends``: chunk blends (one Gaussian into one chunk of ``lanes_per_blend``
    pixels of a tile: one SIMD vector, 8 in the AVX2 twin and 16 in the AVX-512 one, which a build has
    as ``gsworkbench._C.raster_lanes``), each evaluating that many lanes,
    of which ``active`` were still compositing and ``blended`` composited; ``busy_sum_s`` /
    ``busy_max_s``: seconds inside tiles, summed over the ``threads`` that ran and of the busiest (the
    counting's own cost included)."""

    threads: int
    tiles: int
    pairs: int
    blends: int
    active: int
    blended: int
    busy_sum_s: float
    busy_max_s: float
    lanes_per_blend: int

    @property
    def lanes(self) -> int:
        """Pixel lanes evaluated: ``blends * lanes_per_blend``."""
        return self.blends * self.lanes_per_blend


def rasterize_lane_counts(
    means2d: torch.Tensor, conics: torch.Tensor, colors: torch.Tensor, opacities: torch.Tensor, width: int,
    height: int, tile_size: int, tile_offsets: torch.Tensor, flatten_ids: torch.Tensor,
) -> LaneCounts:  # fmt: skip
    """Runs the CPU forward's counting twin on ``splat_rasterize``'s inputs (the image is dropped) and
    returns its :class:`LaneCounts`: where a forward's lanes and threads go. CPU tensors only."""
    require_kernel("splat_rasterize_lane_counts", means2d.device.type)
    out = torch.ops.gsworkbench.splat_rasterize_lane_counts(
        means2d, conics, colors, opacities, int(width), int(height), int(tile_size), tile_offsets, flatten_ids
    ).tolist()
    return LaneCounts(*(int(v) for v in out[:6]), out[6], out[7], int(out[8]))


def rasterize_flops_per_evaluation(channels: int = 3) -> int:
    """Flops of one pixel-splat evaluation of the CPU forward with ``channels`` colour channels."""
    return RASTERIZE_FLOPS_PER_EVALUATION_BASE + 2 * channels


def rasterize_backward_flops_per_evaluation(channels: int = 3) -> int:
    """Flops of one pixel-splat evaluation of the CPU backward with ``channels`` colour channels."""
    return RASTERIZE_BACKWARD_FLOPS_PER_EVALUATION_BASE + 4 * channels


def last_contributors(
    means2d: torch.Tensor, conics: torch.Tensor, opacities: torch.Tensor, width: int, height: int, tile_size: int,
    tile_offsets: torch.Tensor, flatten_ids: torch.Tensor,
) -> torch.Tensor:  # fmt: skip
    """The ext forward's last contributor of each pixel, int32 [C,H,W] (the index into the flattened tile
    lists of the last splat blended, -1 for none), on ``splat_rasterize``'s inputs less the colours:
    which splats blend depends on the 2D means [C,N,2], conics [C,N,3] and opacities [C,N] alone, so the
    forward runs on zero colours. For :func:`blended_evaluations`; no gradient."""
    require_ext()
    colors = means2d.new_zeros(*means2d.shape[:2], 3)
    with torch.no_grad():
        out = torch.ops.gsworkbench.splat_rasterize(means2d.detach(), conics.detach(), colors, opacities.detach(),
                                                    int(width), int(height), int(tile_size), tile_offsets,
                                                    flatten_ids, False, True)  # fmt: skip
    return out[3]


def blended_evaluations(tile_offsets: torch.Tensor, last_ids: torch.Tensor, tile_size: int = 16) -> int:
    """Pixel-splat evaluations up to each pixel's last contributor: per pixel, its tile's list from the
    start to ``last_ids`` (the forward's int32 [C,H,W] output: the index into the flattened tile lists of
    the last splat blended, -1 for none), summed. The work a per-pixel kernel with early termination
    does to produce the image, less the evaluations after a pixel's last blend (splats below 1/255 or a
    pixel that never saturates). The CPU kernel's own work differs: its row culling skips splats whose
    support misses a row of the tile, and it evaluates lanes past a pixel's last blend; on the headline
    scenes it evaluates about 0.7 of this count (:func:`rasterize_lane_counts`).

    ``tile_offsets`` [C,th,tw] (int32 or int64): each tile's first index into the lists."""
    C, H, W = last_ids.shape
    rows = torch.arange(H, device=last_ids.device) // tile_size
    cols = torch.arange(W, device=last_ids.device) // tile_size
    start = tile_offsets.long()[:, rows][:, :, cols]  # [C,H,W]: each pixel's tile start
    last = last_ids.long()
    return int(torch.where(last >= 0, last - start + 1, torch.zeros_like(last)).sum())


def _raster_counts(n_isects: int, tile_size: int, channels: int, itemsize: int,
                   evaluations: int | None) -> tuple[int, int, int]:  # fmt: skip
    """What the rasterizer's forward and backward counts share: the evaluations (measured, else the bound
    ``tile_size**2`` per intersection), the bytes of one intersection's Gaussian record (its index, 2D
    mean, conic, colours, opacity) and of one Gaussian's values, ``2 + 3 + channels + 1`` of them."""
    evaluations = tile_size * tile_size * n_isects if evaluations is None else int(evaluations)
    gaussian = (2 + 3 + channels + 1) * itemsize
    return evaluations, 4 + gaussian, gaussian


def rasterize_work(
    n_isects: int, width: int, height: int, tile_size: int = 16, channels: int = 3, cameras: int = 1,
    itemsize: int = 4, evaluations: int | None = None, keep_state: bool = False,
) -> dict[str, float]:  # fmt: skip
    """The work of one ``splat_rasterize`` forward call: ``flops_per_call``, ``bytes_per_call`` and
    ``evaluations`` (pixel-splat evaluations counted).

    Flops: evaluations x :func:`rasterize_flops_per_evaluation`. ``evaluations``: the measured count of
    :func:`blended_evaluations` (the per-pixel algorithm's work for the image; the CPU kernel's own
    lanes are counted by :func:`rasterize_lane_counts`, and are fewer) when the caller has the forward's
    outputs, else the bound ``tile_size**2`` per tile intersection (every pixel of every listed tile; the
    kernel skips chunks outside a splat's support and stops saturated chunks, so a share from this
    bound can exceed 100%). Bytes: each intersection's Gaussian record read once (its index, 2D mean,
    conic, colours, opacity) and each pixel's outputs written once (colours, alpha; with ``keep_state``,
    a call that records a gradient, also the transmittance and last contributor the backward reads).
    Left out: the tile offsets and the re-reads of records from cache by later chunks of the same tile."""
    pixels = cameras * width * height
    evaluations, record, _ = _raster_counts(n_isects, tile_size, channels, itemsize, evaluations)
    out = (channels + 1) * itemsize + (itemsize + 4 if keep_state else 0)
    return {"flops_per_call": float(rasterize_flops_per_evaluation(channels) * evaluations),
            "bytes_per_call": float(n_isects * record + pixels * out), "evaluations": float(evaluations)}  # fmt: skip


def rasterize_backward_work(
    num: int, n_isects: int, width: int, height: int, tile_size: int = 16, channels: int = 3, cameras: int = 1,
    itemsize: int = 4, evaluations: int | None = None,
) -> dict[str, float]:  # fmt: skip
    """The work of one ``splat_rasterize_backward`` call for ``num`` Gaussians: ``flops_per_call``,
    ``bytes_per_call`` and ``evaluations``.

    Flops: evaluations x :func:`rasterize_backward_flops_per_evaluation`. The backward evaluates each
    pixel's tile list from its last contributor back to the start, so the forward's
    :func:`blended_evaluations` count it too (the per-pixel algorithm's work, as for the forward; else the bound of
    :func:`rasterize_work`). Bytes: each intersection's Gaussian record read once, each pixel's final
    transmittance, last contributor and incoming gradients (colours, alpha) read once, and the gradients
    of every Gaussian (2D mean, conic, colours, opacity) written once. Left out: the per-thread gradient
    sums (written per tile, reduced once) and re-reads of records from cache."""
    pixels = cameras * width * height
    evaluations, record, gaussian = _raster_counts(n_isects, tile_size, channels, itemsize, evaluations)
    per_pixel = (channels + 2) * itemsize + 4
    grads = cameras * num * gaussian
    return {"flops_per_call": float(rasterize_backward_flops_per_evaluation(channels) * evaluations),
            "bytes_per_call": float(n_isects * record + pixels * per_pixel + grads),
            "evaluations": float(evaluations)}  # fmt: skip


def project_work(num: int, cameras: int = 1, itemsize: int = 4) -> dict[str, float]:
    """The traffic of one ``splat_project`` call: means, quats and scales read (10 values a Gaussian),
    radii (int32), 2D means, depths, conics and compensations written per camera. Its flops (quaternion
    to rotation, the 3D and 2D covariances, their inverse and the radius) are not counted: NaN."""
    nbytes = num * (10 * itemsize + cameras * (4 + 7 * itemsize))
    return {"flops_per_call": float("nan"), "bytes_per_call": float(nbytes)}


def sh_work(num: int, sh_degree: int, cameras: int = 1, itemsize: int = 4) -> dict[str, float]:
    """The work of one ``splat_sh_to_color`` call: per Gaussian and camera, the SH basis at the view
    direction (``_SH_BASIS_FLOPS``), the 3 K coefficient products and sums (6 K flops for K = (d + 1)^2),
    the +1/2 and clamp (3); bytes: the coefficients (3 K) and direction (3) read, the colour (3) written.
    Left out: the direction's normalisation inside the kernel."""
    if not 0 <= sh_degree < len(_SH_BASIS_FLOPS):
        raise ValueError(f"sh_work: sh_degree must be in 0..{len(_SH_BASIS_FLOPS) - 1}, got {sh_degree}")
    k = (sh_degree + 1) ** 2
    flops = num * cameras * (_SH_BASIS_FLOPS[sh_degree] + 6 * k + 3)
    return {"flops_per_call": float(flops), "bytes_per_call": float(num * cameras * (3 * k + 6) * itemsize)}


def isect_work(num: int, n_isects: int, width: int, height: int, tile_size: int = 16,
               cameras: int = 1) -> dict[str, float]:  # fmt: skip
    """The traffic of one ``splat_isect_tiles`` call as :func:`~gsworkbench.splat.rasterize` makes it (with
    the tile cover): 2D means, radii, depths, conics and opacities read (32 bytes a Gaussian and camera
    in float32), tiles per Gaussian (4), intersection ids (8) and flattened ids (4) per intersection and
    the tile offsets (4 per tile) written. Left out: the radix sort's passes over its working arrays and
    the cover's per-Gaussian arithmetic. Integer work: no flops (NaN)."""
    tiles = cameras * ((width + tile_size - 1) // tile_size) * ((height + tile_size - 1) // tile_size)
    nbytes = cameras * num * 36 + 12 * n_isects + 4 * tiles
    return {"flops_per_call": float("nan"), "bytes_per_call": float(nbytes)}


def render_stage_work(stage: str, num: int, width: int, height: int, sh_degree: int, n_isects: int,
                      tile_size: int = 16, evaluations: int | None = None) -> dict[str, float]:  # fmt: skip
    """The counts of one forward stage (``project``, ``sh``, ``isect``, ``rasterize``), of the whole
    ``forward`` (their sum; flops of the counted stages only, sh and rasterize) of one camera, or of
    ``forward+backward`` (the forward and :func:`rasterize_backward_work`; the backward passes of SH,
    projection and view directions are not counted); NaN for any other stage. ``evaluations``: the
    rasterizer's measured :func:`blended_evaluations` (see :func:`rasterize_work`), else its upper bound."""
    parts = {
        "project": lambda: project_work(num),
        "sh": lambda: sh_work(num, sh_degree),
        "isect": lambda: isect_work(num, n_isects, width, height, tile_size),
        "rasterize": lambda: rasterize_work(n_isects, width, height, tile_size, evaluations=evaluations,
                                            keep_state=stage == "forward+backward"),  # fmt: skip
    }
    if stage in parts:
        return parts[stage]()
    if stage not in ("forward", "forward+backward"):
        return {"flops_per_call": float("nan"), "bytes_per_call": float("nan")}
    works = [make() for make in parts.values()]
    if stage == "forward+backward":
        works.append(rasterize_backward_work(num, n_isects, width, height, tile_size, evaluations=evaluations))
    flops = sum(w["flops_per_call"] for w in works if w["flops_per_call"] == w["flops_per_call"])
    return {"flops_per_call": float(flops), "bytes_per_call": float(sum(w["bytes_per_call"] for w in works))}
