"""Initial point clouds as PLY files: vertices x, y, z (float32) and red, green, blue (uint8)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import torch

from gsworkbench.core.atomic import atomic_write_bytes
from gsworkbench.io.ply import check_element_sizes


def write_points_ply(path: str | os.PathLike[str], points: np.ndarray, colors: np.ndarray) -> Path:
    """Writes points [P,3] (world) with colours [P,3] in [0,1] (stored as uint8) atomically."""
    from plyfile import PlyData, PlyElement

    pts = np.asarray(points, dtype=np.float32)
    rgb = np.clip(np.round(np.asarray(colors, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
    vertex = np.empty(len(pts), dtype=[(c, "f4") for c in "xyz"] + [(c, "u1") for c in ("red", "green", "blue")])
    for i, c in enumerate("xyz"):
        vertex[c] = pts[:, i]
    for i, c in enumerate(("red", "green", "blue")):
        vertex[c] = rgb[:, i]
    buf = io.BytesIO()
    PlyData([PlyElement.describe(vertex, "vertex")]).write(buf)
    return atomic_write_bytes(path, buf.getvalue())


def read_points_ply(path: str | os.PathLike[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Points [P,3] float32 and colours [P,3] float32 in [0,1] (grey where the file has none)."""
    from plyfile import PlyData

    try:
        check_element_sizes(path, stacklevel=3)  # too little data: refused; more: a warning
        vertex = PlyData.read(str(path))["vertex"]
        pts = np.stack([np.asarray(vertex[c], dtype=np.float32) for c in "xyz"], axis=1)
    except Exception as e:  # plyfile raises assorted errors on malformed files
        raise ValueError(f"cannot read a point cloud from {path}: {e}") from e
    names = vertex.data.dtype.names or ()
    if all(c in names for c in ("red", "green", "blue")):
        rgb = np.stack([np.asarray(vertex[c], dtype=np.float32) for c in ("red", "green", "blue")], axis=1) / 255.0
    else:
        rgb = np.full_like(pts, 0.5)
    if not np.isfinite(pts).all():
        raise ValueError(f"{path} holds non-finite point coordinates")
    return torch.from_numpy(pts), torch.from_numpy(rgb.astype(np.float32))
