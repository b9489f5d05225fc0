"""Inria 3DGS PLY files: ``read_ply(path) -> SplatSet`` and ``write_ply(path, splats)``.

Layout (binary little-endian float32, one ``vertex`` element, one row per splat)::

    x y z nx ny nz f_dc_0 f_dc_1 f_dc_2 f_rest_0 .. f_rest_{3K-1} opacity scale_0..2 rot_0..3

- ``f_rest`` is channel-major: ``f_rest_{c*K + k}`` is channel c of SH coefficient k+1, i.e.
  ``sh_rest[n, k, c]``; K = (d+1)^2 - 1 for SH degree d (0, 3, 8 or 15 coefficients);
- ``opacity`` is the logit, ``scale_i`` the log-scales, ``rot_0..3`` the quaternion wxyz (as stored,
  not normalised); normals are written as zeros and ignored on read.

Reading accepts files other tools wrote: extra properties, no normals, float64 properties (cast to
float32), any property order. Everything a 3DGS file needs must be present; otherwise, and for
truncated or corrupt files, ValueError says what is wrong. A float32 round trip is bit-exact.
Writing goes to a temporary file in the same folder and is renamed into place, so an interrupted
write never leaves a half-written file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import torch
from plyfile import PlyData, PlyElement

from gsworkbench import gaussians
from gsworkbench.results import atomic_writer
from gsworkbench.splats import SplatSet

_REQUIRED = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
             "rot_0", "rot_1", "rot_2", "rot_3"]  # fmt: skip
_REST = re.compile(r"^f_rest_(\d+)$")


def _columns(vertex: np.ndarray, names: list[str]) -> np.ndarray:
    """[N, len(names)] float32 array of the named fields of a structured array."""
    out = np.empty((vertex.shape[0], len(names)), dtype=np.float32)
    for i, name in enumerate(names):
        out[:, i] = vertex[name]
    return out


def read_ply(path: str | os.PathLike[str]) -> SplatSet:
    """Reads an Inria 3DGS PLY file into a float32 :class:`SplatSet` (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            ply = PlyData.read(f)
            names = [e.name for e in ply.elements]
            if "vertex" not in names:
                raise ValueError(
                    f"{path}: no 'vertex' element (elements: {', '.join(names) or 'none'}); "
                    "not a 3D Gaussian splatting PLY"
                )
            vertex = ply["vertex"].data
            vertex = np.asarray(vertex)
    except ValueError as err:
        if str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: truncated or corrupt PLY file ({err})") from err
    except Exception as err:  # plyfile raises several types for malformed headers / short data
        raise ValueError(f"{path}: truncated or corrupt PLY file ({type(err).__name__}: {err})") from err
    fields = list(vertex.dtype.names or ())
    missing = [p for p in _REQUIRED if p not in fields]
    if missing:
        raise ValueError(
            f"{path}: missing 3DGS vertex properties {', '.join(missing)} (has: {', '.join(fields)}); "
            "not a 3D Gaussian splatting PLY"
        )
    rest_idx = sorted(int(m.group(1)) for f in fields if (m := _REST.match(f)))
    if rest_idx != list(range(len(rest_idx))):
        raise ValueError(
            f"{path}: f_rest_* properties must be numbered 0..M-1 without gaps, got {rest_idx[:8]}..."
        )
    m = len(rest_idx)
    if m % 3 or m // 3 + 1 not in (1, 4, 9, 16):
        raise ValueError(f"{path}: {m} f_rest_* properties; a 3DGS file has 0, 9, 24 or 45 (3 channels x K)")
    k = m // 3
    n = vertex.shape[0]
    rest = _columns(vertex, [f"f_rest_{i}" for i in range(m)]).reshape(n, 3, k).transpose(0, 2, 1)
    try:
        return SplatSet(
            torch.from_numpy(_columns(vertex, ["x", "y", "z"])),
            torch.from_numpy(_columns(vertex, ["rot_0", "rot_1", "rot_2", "rot_3"])),
            torch.from_numpy(_columns(vertex, ["scale_0", "scale_1", "scale_2"])),
            torch.from_numpy(_columns(vertex, ["opacity"])[:, 0].copy()),
            torch.from_numpy(_columns(vertex, ["f_dc_0", "f_dc_1", "f_dc_2"])),
            torch.from_numpy(np.ascontiguousarray(rest)),
        )
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err


def ply_properties(sh_degree: int) -> list[str]:
    """The property names, in file order, of a 3DGS PLY of SH degree ``sh_degree``."""
    k = gaussians.num_sh_bases(sh_degree) - 1
    return (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
            + [f"f_rest_{i}" for i in range(3 * k)]
            + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])  # fmt: skip


def write_ply(path: str | os.PathLike[str], splats: SplatSet) -> Path:
    """Writes ``splats`` as a binary little-endian float32 Inria 3DGS PLY (atomically); returns the path."""
    if not isinstance(splats, SplatSet):
        raise ValueError(f"splats must be a SplatSet, got {type(splats).__name__}")
    path = Path(path)
    n, k = len(splats), splats.sh_rest.shape[1]

    def f32(t: torch.Tensor) -> np.ndarray:
        return t.detach().to("cpu", torch.float32).numpy()

    names = ply_properties(splats.sh_degree)
    cols = np.empty((n, len(names)), dtype=np.float32)
    cols[:, 0:3] = f32(splats.means)
    cols[:, 3:6] = 0.0
    cols[:, 6:9] = f32(splats.sh_dc)
    cols[:, 9 : 9 + 3 * k] = f32(splats.sh_rest).transpose(0, 2, 1).reshape(n, 3 * k)
    o = 9 + 3 * k
    cols[:, o] = f32(splats.opacity_logits)
    cols[:, o + 1 : o + 4] = f32(splats.log_scales)
    cols[:, o + 4 : o + 8] = f32(splats.quats)
    vertex = cols.view(np.dtype([(name, "<f4") for name in names])).reshape(n)
    data = PlyData([PlyElement.describe(vertex, "vertex")], text=False, byte_order="<")
    with atomic_writer(path) as f:
        data.write(f)
    return path
