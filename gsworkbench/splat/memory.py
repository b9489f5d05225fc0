"""What :func:`gsworkbench.splat.rasterize` will allocate, estimated before it allocates.

The estimates count the large buffers only, so they err low: a call they refuse could never have
run (see :func:`gsworkbench.memory.check_fits`), and a call they pass may still need some more.

- Per pixel, both backends: the output colours [C,H,W,D] and alphas [C,H,W,1]; with ``backgrounds``
  the composite's two colour-sized temporaries; with autograd, the gradients of both outputs.
- ``ext``: the last contributing index per pixel (int32).
- ``torch`` (the reference): per-tile colour and alpha blocks over the image padded to whole tiles,
  copied twice more by the concatenation and the tile-to-row reordering, plus two float64 maps of the
  final transmittance. With autograd it keeps about :data:`TORCH_BYTES_PER_PAIR` bytes for every
  (intersection, tile pixel) pair until the backward; that part is checked once the intersections are
  known (:func:`check_torch_pairs`).
"""

from __future__ import annotations

import torch

from gsworkbench.memory import check_fits

TORCH_BYTES_PER_PAIR = 96  # ~15 saved [M,P] tensors, float32 and float64 (dx, dy, sigma, alpha, log T, ...)


def rasterize_bytes(
    C: int, width: int, height: int, D: int, itemsize: int, backend: str, tile_size: int,
    backgrounds: bool, grad: bool,
) -> int:  # fmt: skip
    """Lower estimate of the bytes rasterize allocates per call (before the torch backend's pairs)."""
    px = C * width * height
    per_px = (D + 1) * itemsize + (2 * D * itemsize if backgrounds else 0) + ((D + 1) * itemsize if grad else 0)
    total = px * per_px
    if backend == "ext":
        return total + px * 4
    padded = C * (-(-width // tile_size) * tile_size) * (-(-height // tile_size) * tile_size)
    return total + padded * (3 * (D + 1) * itemsize + 16)


def check_rasterize_memory(
    C: int, width: int, height: int, D: int, dtype: torch.dtype, device: torch.device, backend: str,
    tile_size: int, backgrounds: bool, grad: bool,
) -> None:  # fmt: skip
    """MemoryBudgetError when the estimate exceeds the memory available on ``device``."""
    need = rasterize_bytes(C, width, height, D, dtype.itemsize, backend, tile_size, backgrounds, grad)
    check_fits(
        need,
        f"rasterize ({backend}) of {C} camera(s) at {width}x{height} px with {D} channel(s)",
        device,
        "render fewer cameras at a time or a smaller image",
    )


def check_torch_pairs(M: int, P: int, device: torch.device) -> None:
    """The torch reference with autograd keeps per-pair tensors of all M intersections x P tile pixels."""
    check_fits(
        M * P * TORCH_BYTES_PER_PAIR,
        f"rasterize (torch) with autograd over {M} tile intersections x {P} pixels per tile",
        device,
        "use backend 'ext', fewer or smaller Gaussians, or torch.no_grad()",
    )
