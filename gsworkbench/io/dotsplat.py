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
