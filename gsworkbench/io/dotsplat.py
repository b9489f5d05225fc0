"""The ``.splat`` format of antimatter15's WebGL viewer, read by most web splat viewers:
``write_splat(path, splats)`` and ``encode_splat(splats) -> bytes``.

32 bytes a splat, little-endian, no header, no spherical harmonics beyond the DC term::

    position  float32 x 3   world units, the world's own axes (as in the Inria PLY)
    scale     float32 x 3   linear (activated) scales
    colour    uint8 x 4     RGBA: round(255 * clip(0.5 + SH_C0 * sh_dc, 0, 1)), alpha round(255 * sigmoid(opacity))
    rotation  uint8 x 4     wxyz of the normalised quaternion: clip(round(128 * q + 128), 0, 255)

Quantisation, what a reader gets back: positions and scales are float32 (exact for float32 splats);
the DC colour 0.5 + SH_C0 * sh_dc to within 0.5/255 where it lies in [0, 1] (clipped outside; sh_dc
to within 0.0070); opacity to within 0.5/255; each component of the normalised quaternion to within
0.5/128 (1/128 for a component of exactly +1, clipped to 127/128). View-dependent colour (sh_rest)
is dropped.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from gsworkbench.core import gaussians
from gsworkbench.core.atomic import atomic_write_bytes
from gsworkbench.core.splats import SplatSet
from gsworkbench.io.input_file import check_input_file

SPLAT_DTYPE = np.dtype([("position", "<f4", 3), ("scale", "<f4", 3), ("rgba", "u1", 4), ("rotation", "u1", 4)])


def _unit_bytes(x: np.ndarray, scale: float, offset: float) -> np.ndarray:
    return np.clip(np.rint(x * scale + offset), 0, 255).astype(np.uint8)


def encode_splat(splats: SplatSet) -> bytes:
    """The ``.splat`` bytes of ``splats`` (32 bytes a splat; see the module docstring)."""
    if not isinstance(splats, SplatSet):
        raise ValueError(f"splats must be a SplatSet, got {type(splats).__name__}")
    s = SplatSet(*(t.detach().to("cpu", torch.float64) for t in
                   (splats.means, splats.quats, splats.log_scales, splats.opacity_logits, splats.sh_dc,
                    splats.sh_rest)))  # fmt: skip
    out = np.empty(len(s), dtype=SPLAT_DTYPE)
    out["position"] = s.means.numpy()
    out["scale"] = s.scales.numpy()
    rgb = (0.5 + gaussians.SH_C0 * s.sh_dc).clamp(0.0, 1.0).numpy()
    out["rgba"][:, :3] = _unit_bytes(rgb, 255.0, 0.0)
    out["rgba"][:, 3] = _unit_bytes(s.opacities.numpy(), 255.0, 0.0)
    out["rotation"] = _unit_bytes(gaussians.quat_normalize(s.quats).numpy(), 128.0, 128.0)
    return out.tobytes()


def write_splat(path: str | os.PathLike[str], splats: SplatSet) -> Path:
    """Writes ``splats`` as a ``.splat`` file (atomically); returns the path."""
    return atomic_write_bytes(path, encode_splat(splats))


def read_splat(path: str | os.PathLike[str], dtype: torch.dtype = torch.float32) -> SplatSet:
    """Reads a ``.splat`` file into a SplatSet of ``dtype`` (SH degree 0; the quantisation of the module
    docstring: an alpha of 0 or 255 is read as 0.5/255 or 254.5/255, so its logit is finite).
    FileNotFoundError / IsADirectoryError, or ValueError when the size is not a whole number of records."""
    path = check_input_file(path)
    raw = path.read_bytes()
    if len(raw) % SPLAT_DTYPE.itemsize:
        raise ValueError(f"{path}: not a .splat file ({len(raw)} bytes is not a whole number of "
                         f"{SPLAT_DTYPE.itemsize}-byte splats)")  # fmt: skip
    rec = np.frombuffer(raw, dtype=SPLAT_DTYPE)
    pos = torch.from_numpy(rec["position"].astype(np.float64))
    scale = torch.from_numpy(rec["scale"].astype(np.float64))
    if not (torch.isfinite(pos).all() and torch.isfinite(scale).all() and (scale > 0).all()):
        raise ValueError(f"{path}: not a .splat file (positions must be finite and scales positive)")
    rgba = torch.from_numpy(rec["rgba"].astype(np.float64)) / 255.0
    alpha = rgba[:, 3].clamp(0.5 / 255.0, 254.5 / 255.0)
    quats = (torch.from_numpy(rec["rotation"].astype(np.float64)) - 128.0) / 128.0
    quats[quats.norm(dim=-1) == 0] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    sh_dc = (rgba[:, :3] - 0.5) / gaussians.SH_C0
    no_rest = torch.zeros(len(rec), 0, 3, dtype=torch.float64)
    return SplatSet(pos, gaussians.quat_normalize(quats), scale.log(), torch.logit(alpha), sh_dc, no_rest).to(dtype)
