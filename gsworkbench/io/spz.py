"""Niantic's ``.spz`` format (gzip-compressed, with spherical harmonics): ``write_spz(path, splats)``
and ``encode_spz(splats) -> bytes``, written by gsply's SPZ writer (version 3).

The file is one gzip stream of a 16-byte header (magic ``NGSP``, version 3, number of splats, SH
degree, fractional bits 12, flags, reserved) and the sections positions, alphas, colours, scales,
rotations, SH, each splat after splat. The format stores RUB axes (three.js's: x right, y up, z
backward); the workbench's worlds, like the Inria PLY, are stored turned by 180 degrees about x
into them: positions (x, -y, -z), each splat's rotation preceded by that half turn (quaternion
(0, 1, 0, 0) * q), and the SH coefficients rotated alike (a sign per coefficient). A reader that turns
RUB back (or renders in three.js and turns the mesh back, as the viewer does) gets the scene in its own axes.

Quantisation, what a reader gets back:
- positions: 24-bit signed fixed point with 12 fractional bits, to within 2^-13 (1.2e-4) world
  units, for coordinates within +-2048;
- opacity: round(255 * sigmoid(logit)), to within 0.5/255;
- DC colour: round(sh_dc * 0.15 * 255 + 127.5), sh_dc to within 0.5/38.25 (0.0131), for sh_dc in
  [-3.33, 3.33];
- scales: round(16 * (log_scale + 10)), log-scales to within 1/32, for log-scales in [-10, 5.9];
- rotations: the normalised quaternion as its index of largest component and the other three as
  9-bit magnitudes of at most 1/sqrt(2) with signs: each component to within 7.0e-4;
- SH rest: round(128 * sh + 128), each coefficient to within 1/256, for coefficients in [-1, 0.99].
Values outside those ranges are clipped.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from gsworkbench.core.atomic import atomic_write_bytes
from gsworkbench.core.splats import SplatSet
from gsworkbench.io.input_file import check_input_file

# the workbench's axes to SPZ's RUB: a half turn about x (a proper rotation, so SH rotate exactly)
TO_RUB = np.diag([1.0, -1.0, -1.0])
SPZ_VERSION = 3
FRACTIONAL_BITS = 12


def to_rub(splats: SplatSet) -> SplatSet:
    """The splats turned into SPZ's axes (see the module docstring); float64 on the CPU, detached."""
    from gsworkbench.transforms import transform  # numba-backed: imported when a file is written

    s = SplatSet(*(t.detach().to("cpu", torch.float64) for t in
                   (splats.means, splats.quats, splats.log_scales, splats.opacity_logits, splats.sh_dc,
                    splats.sh_rest)))  # fmt: skip
    return transform(s, rotation=TO_RUB, backend="numpy")


def encode_spz(splats: SplatSet) -> bytes:
    """The ``.spz`` bytes of ``splats`` (version 3, gzip; see the module docstring)."""
    from gsply import GSData
    from gsply import write_spz as gsply_write_spz

    if not isinstance(splats, SplatSet):
        raise ValueError(f"splats must be a SplatSet, got {type(splats).__name__}")
    s = to_rub(splats)

    def f32(t: torch.Tensor) -> np.ndarray:
        return np.ascontiguousarray(t.numpy(), dtype=np.float32)

    data = GSData(means=f32(s.means), scales=f32(s.log_scales), quats=f32(s.quats),
                  opacities=f32(s.opacity_logits), sh0=f32(s.sh_dc), shN=f32(s.sh_rest))  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="gsw-spz-") as tmp:
        out = Path(tmp) / "splats.spz"
        gsply_write_spz(out, data, version=SPZ_VERSION, fractional_bits=FRACTIONAL_BITS)
        raw = bytearray(out.read_bytes())
    # the same splats give the same bytes: gzip's MTIME field (bytes 4-7) set to 0, "no time stamp"
    # (RFC 1952), where it held the second the stream was written; no header CRC covers it (FLG bit 1)
    if raw[:2] == b"\x1f\x8b" and not raw[3] & 0x02:
        raw[4:8] = bytes(4)
    return bytes(raw)


def write_spz(path: str | os.PathLike[str], splats: SplatSet) -> Path:
    """Writes ``splats`` as a ``.spz`` file (atomically); returns the path."""
    return atomic_write_bytes(path, encode_spz(splats))


def read_spz(path: str | os.PathLike[str], dtype: torch.dtype = torch.float32) -> SplatSet:
    """Reads a ``.spz`` file (gsply's reader: versions 1 to 3, and 4 where zstandard is installed) into a
    SplatSet of ``dtype`` in the workbench's axes (the half turn of :func:`to_rub` undone), with the
    quantisation of the module docstring. FileNotFoundError / IsADirectoryError, or ValueError for a
    file that is not SPZ, each naming the file."""
    from gsply import read_spz as gsply_read_spz

    path = check_input_file(path)
    try:
        data = gsply_read_spz(path)
    except Exception as err:  # gzip, struct and gsply's own errors for a file that is not SPZ
        raise ValueError(f"{path}: not a readable .spz file ({type(err).__name__}: {err})") from err
    sh_rest = np.asarray(data.shN, dtype=np.float64) if data.shN is not None else np.zeros((len(data.means), 0, 3))
    rub = SplatSet(*(torch.from_numpy(np.array(a, dtype=np.float64)) for a in
                     (data.means, data.quats, data.scales, data.opacities, data.sh0, sh_rest)))  # fmt: skip
    return to_rub(rub).to(dtype)  # the half turn about x is its own inverse
