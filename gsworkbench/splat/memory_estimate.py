"""What :func:`gsworkbench.splat.rasterize` will allocate, estimated before it allocates.

The ``ext`` estimate is an upper bound of the call's peak resident memory (torch tensors and the
extension's own buffers alike), measured against it in docs/tables/rasterize_memory.csv and in
tests/test_rasterize_memory.py (docs/memory.md tells how). It sums the bytes of the buffers the call
allocates, counted as if all were alive at once: an upper bound, and within 2x of the peak because the
buffers freed before the peak (the forward's temporaries, when the backward peaks) are the smaller part:

- per pixel (C x H x W): the outputs and what the backward needs of them (:func:`ext_pixel_bytes`);
- per camera-Gaussian pair (C x N): projections, colours, the tile-intersection scratch, the
  rasterizer's support records, the backward's per-thread sums and gradients (:func:`ext_pair_bytes`);
- per Gaussian (N): the input gradients (:func:`ext_gaussian_bytes`);
- per tile intersection (M, known only once the tiles are intersected), per tile and per thread
  (:func:`ext_isect_bytes`, :func:`ext_tile_bytes`); plus :data:`EXT_FIXED_BYTES`, and the sum
  times :data:`EXT_MARGIN`.

``rasterize`` checks it twice: before anything is allocated, with M = 0 (pixels and Gaussians are
known, the intersections are not), and again once the intersections are known, before the per-pixel
buffers are allocated.

The ``torch`` reference's up-front estimate is a lower one, of its large buffers only: per pixel the
output colours and alphas, with ``backgrounds`` the composite's two colour-sized temporaries, with
autograd the gradients of both outputs; per-tile colour and alpha blocks over the image padded to whole tiles,
copied twice more by the concatenation and the tile-to-row reordering, plus two float64 maps of the
final transmittance. It needs up to :data:`TORCH_BYTES_PER_PAIR` bytes for every (intersection,
tile pixel) pair, of all intersections with autograd (kept until the backward), of one chunk of them
without; that part is checked once the intersections are known (:func:`check_torch_pairs`). Its
per-Gaussian buffers are not counted.
"""

from __future__ import annotations

import torch

from gsworkbench.core.limits import check_fits

# The torch reference's [m,P] tensors per (intersection, tile pixel) pair, float32 and float64 (dx, dy,
# sigma, alpha, log T, its cumulative sums, the weighted colours [D], ...): saved for the backward
# (then its gradients beside them), or one chunk's at a time without autograd. Measured peaks: about
# 130 bytes per pair with autograd, 100-125 without.
TORCH_BYTES_PER_PAIR = 160

# Memory the call touches whatever its size: the rasterizer threads' per-tile state, small tensors and
# autograd nodes (a few hundred KiB measured), with room for malloc arenas of threads new to the call.
EXT_FIXED_BYTES = 4 * 2**20
# The sum of the terms times this: page and allocator rounding, and glibc heap blocks that a freed
# buffer leaves too fragmented to reuse, which the byte counts do not see.
EXT_MARGIN = 1.1


def ext_pixel_bytes(D: int, itemsize: int, backgrounds: bool, expected_depth: bool, grad: bool) -> int:
    """Bytes per camera pixel of the ``ext`` backend, for D output channels of ``itemsize`` bytes."""
    s = itemsize
    n = (D + 1) * s  # splat_rasterize's outputs: colours [D], alpha
    if grad:
        n += s + 4  # and for the backward: the final transmittance, the last index (int32)
    if expected_depth:
        n += (D + 2) * s  # depth / alpha.clamp_min: the clamp, the quotient and the concatenated colours
    if backgrounds:
        n += D * s  # the composite, alive beside the rasterizer's colours while it is computed
    if grad:
        n += (D + 1) * s  # the gradients of colours and alpha, made contiguous for the backward kernel
        if expected_depth:
            n += (D + 3) * s  # the quotient's backward: its terms, the alpha gradients summed
        if backgrounds:
            n += 2 * s  # the composite's backward: the alpha gradient, summed with the caller's
    return n


def ext_pair_bytes(D: int, itemsize: int, sh: bool, threads: int, grad: bool) -> int:
    """Bytes per camera-Gaussian pair of the ``ext`` backend (``threads``: OpenMP threads)."""
    s = itemsize
    n = 4 + 7 * s  # splat_project: radii int32, means2d [2], depths, conics [3], compensations
    n += s  # opacities per camera: made contiguous over C > 1 cameras, or the antialiased product
    n += D * s  # features per camera: SH colours, the concatenated depth, or colours made contiguous
    if sh:
        n += 3 * s  # the view directions (kept for the SH backward)
    n += 4  # tiles_per_gauss int32
    # splat_isect_tiles' scratch (per calling thread, kept across calls): tile boxes int32 [4] per pair,
    # the depth-sorted keys and the radix sort's second buffer (uint64 per visible pair), boxes in depth
    # order int32 [4] per visible pair, and the saturation cut's record [6] per visible pair; every pair
    # may be visible
    n += 16 + 8 + 8 + 16 + 6 * s
    # the rasterizer's Gaussian record (splat_tiles.h GaussianRecord: support, 2D mean and blend terms),
    # aligned to a 64-byte cache line: one line for float, two for double
    n += 16 * s
    if grad:
        # splat_rasterize_backward: per-thread sums of mean2d [2], conic [3], opacity, colour [D], then
        # the gradients of the same; the projection backward's zero gradients of depths and
        # compensations; the opacity product's gradient
        n += threads * (6 + D) * s + (6 + D) * s + 2 * s + s
        if sh:
            n += 3 * s  # the gradient of the view directions
    return n


def ext_gaussian_bytes(D: int, itemsize: int, sh_bases: int, grad: bool) -> int:
    """Bytes per Gaussian of the ``ext`` backend (``sh_bases``: SH coefficients per channel, 0 without)."""
    if not grad:
        return 0
    s = itemsize
    # the projection backward's means [3], quats [4], scales [3]; the means' gradient from the view
    # directions and their sum [3 + 3]; the opacities' gradient summed over cameras; the colours' or SH
    # coefficients' gradient
    return (10 + 6 + 1) * s + (3 * sh_bases if sh_bases else D) * s


def ext_isect_bytes() -> int:
    """Bytes per tile intersection: isect_ids int64 and flatten_ids int32, and the saturation cut's kept
    entry (uint64, scratch kept across calls)."""
    return 8 + 4 + 8


def ext_tile_bytes(threads: int) -> int:
    """Bytes per camera tile: tile_offsets int32, the intersection pass's start offsets and per-thread
    histograms (int64), and the saturation cut's quarter bounds (4 float64 at most)."""
    return 4 + 8 + 8 * threads + 32


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def rasterize_bytes(
    C: int, width: int, height: int, D: int, itemsize: int, backend: str, tile_size: int,
    backgrounds: bool, grad: bool, *, n_gaussians: int = 0, sh_bases: int = 0, n_isects: int = 0,
    expected_depth: bool = False, threads: int | None = None,
) -> int:  # fmt: skip
    """Estimated peak bytes of one rasterize call of C cameras of ``width`` x ``height`` pixels, D output
    channels of ``itemsize`` bytes, ``n_gaussians`` Gaussians (``sh_bases`` SH coefficients per
    channel, 0 for plain colours) and ``n_isects`` tile intersections (0 before they are known), with
    or without autograd (``grad``). ``threads``: OpenMP threads (default torch's). ``ext``: an upper
    bound of the peak; ``torch``: a lower estimate (before its per-pair tensors; module docstring)."""
    px = C * width * height
    if backend == "ext":
        nth = torch.get_num_threads() if threads is None else threads
        tiles = C * _ceil_div(width, tile_size) * _ceil_div(height, tile_size)
        return int(EXT_MARGIN * (
            EXT_FIXED_BYTES
            + px * ext_pixel_bytes(D, itemsize, backgrounds, expected_depth, grad)
            + C * n_gaussians * ext_pair_bytes(D, itemsize, sh_bases > 0, nth, grad)
            + n_gaussians * ext_gaussian_bytes(D, itemsize, sh_bases, grad)
            + n_isects * ext_isect_bytes()
            + tiles * ext_tile_bytes(nth)
        ))  # fmt: skip
    per_px = (D + 1) * itemsize + (2 * D * itemsize if backgrounds else 0) + ((D + 1) * itemsize if grad else 0)
    padded = C * _ceil_div(width, tile_size) * tile_size * _ceil_div(height, tile_size) * tile_size
    return px * per_px + padded * (3 * (D + 1) * itemsize + 16)


def check_rasterize_memory(
    C: int, width: int, height: int, D: int, dtype: torch.dtype, device: torch.device, backend: str,
    tile_size: int, backgrounds: bool, grad: bool, *, n_gaussians: int = 0, sh_bases: int = 0,
    n_isects: int | None = None, expected_depth: bool = False,
) -> None:  # fmt: skip
    """MemoryBudgetError when the estimate exceeds the memory available on ``device``. ``n_isects``
    None: before anything is allocated, the intersections not yet known (counted as 0); else after the
    projection and the tile intersection, whose outputs the call then holds already."""
    need = rasterize_bytes(
        C, width, height, D, dtype.itemsize, backend, tile_size, backgrounds, grad, n_gaussians=n_gaussians,
        sh_bases=sh_bases, n_isects=n_isects or 0, expected_depth=expected_depth,
    )  # fmt: skip
    held = 0
    if n_isects is not None:  # the projection's outputs and the intersection lists, allocated by now
        held = C * n_gaussians * (4 + 7 * dtype.itemsize) + n_isects * ext_isect_bytes()
    isects = "" if n_isects is None else f" and {n_isects} tile intersections"
    check_fits(
        need,
        f"rasterize ({backend}) of {C} camera(s) at {width}x{height} px with {D} channel(s), "
        f"{n_gaussians} Gaussians{isects}{' with autograd' if grad else ''}",
        device,
        "render fewer cameras or Gaussians at a time, or a smaller image",
        allocated=held,
    )


def check_torch_pairs(M: int, P: int, device: torch.device, grad: bool = True) -> None:
    """The torch reference's per-pair tensors of M intersections x P tile pixels: with autograd (``grad``)
    all the call's intersections, without it the largest chunk's."""
    what = "with autograd over" if grad else "over chunks of up to"
    check_fits(
        M * P * TORCH_BYTES_PER_PAIR,
        f"rasterize (torch) {what} {M} tile intersections x {P} pixels per tile",
        device,
        "use backend 'ext', fewer or smaller Gaussians" + (", or torch.no_grad()" if grad else ""),
    )
