"""An order of points along a space-filling curve (Morton's Z-order), so that points near each other
in space sit near each other in memory.

The rasterizer reads and writes per-Gaussian rows (colours, the backward's per-thread gradient sums) in
the order each tile lists its Gaussians; where neighbouring Gaussians have neighbouring rows those
accesses share cache lines. A trainer's Gaussians start in random order and densification appends
its new ones at the end, so without a reorder a tile's rows are scattered over the whole arrays.

- :func:`morton_codes`: each point's code, ``bits`` bits per axis of its cell in the points' bounding
  box, interleaved (x in bit 0, y in bit 1, z in bit 2, then the next bit of each).
- :func:`morton_order`: the permutation that sorts points by code (ties by index).
"""

from __future__ import annotations

import torch

MAX_BITS = 21  # 3 x 21 = 63 bits: the codes fit int64

# (shift, mask) steps that spread the low 21 bits of a value to every third bit (bit i to bit 3i)
_SPREAD = (
    (32, 0x1F00000000FFFF),
    (16, 0x1F0000FF0000FF),
    (8, 0x100F00F00F00F00F),
    (4, 0x10C30C30C30C30C3),
    (2, 0x1249249249249249),
)


def _spread_bits(v: torch.Tensor) -> torch.Tensor:
    """v [N] int64 in [0, 2^21): bit i moved to bit 3i."""
    v = v & ((1 << MAX_BITS) - 1)
    for shift, mask in _SPREAD:
        v = (v | (v << shift)) & mask
    return v


def morton_codes(points: torch.Tensor, bits: int = 10) -> torch.Tensor:
    """Morton codes [N] int64 of ``points`` [N,3] (any float dtype, any device): each coordinate
    quantised to 2^bits cells over the points' bounding box (a flat axis is all cell 0; non-finite
    coordinates count as the box's low corner), the three cell indices' bits interleaved."""
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"points must have shape [N, 3], got {list(points.shape)}")
    if not 1 <= bits <= MAX_BITS:
        raise ValueError(f"bits must be in [1, {MAX_BITS}], got {bits}")
    if len(points) == 0:
        return torch.zeros(0, dtype=torch.int64, device=points.device)
    p = points.detach().double()
    finite = torch.isfinite(p)
    lo = torch.where(finite, p, torch.inf).amin(0)
    hi = torch.where(finite, p, -torch.inf).amax(0)
    lo = torch.where(torch.isfinite(lo), lo, 0.0)
    extent = torch.where(hi > lo, hi - lo, 1.0)
    cells = (1 << bits) - 1
    q = torch.where(finite, (p - lo) / extent * cells, 0.0).round().clamp(0, cells).long()
    return _spread_bits(q[:, 0]) | (_spread_bits(q[:, 1]) << 1) | (_spread_bits(q[:, 2]) << 2)


def morton_order(points: torch.Tensor, bits: int = 10) -> torch.Tensor:
    """The permutation [N] int64 that lists ``points`` [N,3] in Morton order (stable: equal codes keep
    their order): ``points[morton_order(points)]`` runs along the Z-order curve."""
    return torch.sort(morton_codes(points, bits), stable=True).indices
