"""Inria 3DGS PLY files: ``read_ply(path) -> SplatSet`` and ``write_ply(path, splats)``.

Layout (binary little-endian float32, one ``vertex`` element, one row per splat)::

    x y z nx ny nz f_dc_0 f_dc_1 f_dc_2 f_rest_0 .. f_rest_{3K-1} opacity scale_0..2 rot_0..3

- ``f_rest`` is channel-major: ``f_rest_{c*K + k}`` is channel c of SH coefficient k+1, i.e.
  ``sh_rest[n, k, c]``; K = (d+1)^2 - 1 for SH degree d (0, 3, 8 or 15 coefficients);
- ``opacity`` is the logit, ``scale_i`` the log-scales, ``rot_0..3`` the quaternion wxyz (as stored,
  not normalised); normals are written as zeros and ignored on read.

Reading accepts files other tools wrote: extra properties, no normals, float64 properties (cast
to float32 unless ``dtype=torch.float64``), any property order. Everything a 3DGS file needs must
be present; otherwise, and for truncated or corrupt files, ValueError says what is wrong. A file
with more data after its header than the header declares is read as declared, with a warning.
A float32 round trip is bit-exact. Writing float64 splats warns that they are stored as float32
(the Inria layout), unless ``dtype=torch.float64`` asks for double properties (read back bit-exact
with ``dtype=torch.float64``; other 3DGS tools may expect float32).
Writing goes to a temporary file in the same folder and is renamed into place, so an interrupted
write never leaves a half-written file.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np
import torch
from plyfile import PlyData, PlyElement

from gsworkbench.core import gaussians
from gsworkbench.core.atomic import atomic_writer
from gsworkbench.core.splats import SplatSet
from gsworkbench.io.input_file import check_input_file

_REQUIRED = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
             "rot_0", "rot_1", "rot_2", "rot_3"]  # fmt: skip
_REST = re.compile(r"^f_rest_(\d+)$")


def _columns(vertex: np.ndarray, names: list[str], dtype: type = np.float32) -> np.ndarray:
    """[N, len(names)] array (float32 by default) of the named fields of a structured array."""
    out = np.empty((vertex.shape[0], len(names)), dtype=dtype)
    with np.errstate(over="ignore"):  # float64 values beyond float32 become inf, which SplatSet rejects
        for i, name in enumerate(names):
            out[:, i] = vertex[name]
    return out


def _numpy_dtype(dtype: torch.dtype | str | None) -> type:
    if dtype in (None, torch.float32, "float32"):
        return np.float32
    if dtype in (torch.float64, "float64"):
        return np.float64
    raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")


def read_ply(path: str | os.PathLike[str], dtype: torch.dtype | str = torch.float32) -> SplatSet:
    """Reads an Inria 3DGS PLY file into a :class:`SplatSet` of ``dtype`` (float32 or float64; see the
    module docstring). A missing file raises FileNotFoundError, a folder IsADirectoryError, and any
    unreadable input ValueError, each naming the file."""
    np_dtype = _numpy_dtype(dtype)
    path = Path(path)
    check_input_file(path)
    try:
        return _read(path, np_dtype)
    except ValueError as err:
        if str(err).startswith(f"{path}: "):
            raise
        raise ValueError(f"{path}: truncated or corrupt PLY file ({err})") from err
    except MemoryError:
        raise ValueError(f"{path}: too large to read into memory") from None
    except Exception as err:  # plyfile and numpy raise several types for malformed headers / data
        raise ValueError(f"{path}: truncated or corrupt PLY file ({type(err).__name__}: {err})") from err


_PLY_SIZES = {"char": 1, "uchar": 1, "int8": 1, "uint8": 1, "short": 2, "ushort": 2, "int16": 2, "uint16": 2,
              "int": 4, "uint": 4, "int32": 4, "uint32": 4, "float": 4, "float32": 4, "double": 8, "float64": 8}


class PlyExtraDataWarning(UserWarning):
    """A PLY file holds more data after its header than the header's element counts describe."""


def check_element_sizes(path: str | os.PathLike[str], stacklevel: int = 2) -> None:
    """Refuses a header whose element counts the file cannot hold, before anything is allocated for
    them: each element needs at least 2 bytes per property as ASCII ("0 "), or its item size as binary.
    Warns (:class:`PlyExtraDataWarning`) when the body holds more than the header declares (binary
    elements of fixed size, or more ASCII lines than elements): PLY readers read the declared count and
    ignore the rest without a word. ``stacklevel`` is the warning's, as for :func:`warnings.warn`."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    end = head.find(b"end_header")
    if end < 0:
        return  # plyfile reports the malformed header
    start = head.find(b"\n", end) + 1
    body = path.stat().st_size - start
    ascii_format, fixed, elements = False, True, []  # elements: [name, count, bytes per item]
    for line in head[:end].decode("ascii", "replace").splitlines():
        words = line.split()
        if words[:2] == ["format", "ascii"]:
            ascii_format = True
        elif len(words) == 3 and words[0] == "element" and words[2].isdigit():
            elements.append([words[1], int(words[2]), 0])
        elif len(words) >= 3 and words[0] == "property" and elements:
            fixed = fixed and words[1] != "list" and words[1] in _PLY_SIZES
            elements[-1][2] += 2 if ascii_format or words[1] == "list" else _PLY_SIZES.get(words[1], 1)
    need = sum(count * size for _, count, size in elements)
    if need > body:
        name, count, _ = max(elements, key=lambda e: e[1] * e[2])
        raise ValueError(
            f"{path}: truncated or corrupt PLY file: the header declares {count} {name} elements, which "
            f"need at least {need} bytes, but the file holds {body} bytes after the header"
        )
    if not elements:
        return
    name, count, size = elements[-1]  # what follows the declared data would be more of the last element
    declared = ", ".join(f"{c} {n}" for n, c, _ in elements)
    if ascii_format:
        with open(path, "rb") as f:
            f.seek(start)
            lines = sum(1 for ln in f if ln.strip())
        extra = lines - sum(c for _, c, _ in elements)
        if extra > 0:
            warnings.warn(f"{path}: the header declares {declared} elements, but {extra} more lines follow "
                          f"them; they are ignored", PlyExtraDataWarning, stacklevel=stacklevel)  # fmt: skip
    elif fixed and body > need:
        whole = (body - need) // size if size else 0
        more = f" (about {whole} more {name} elements)" if whole else ""
        warnings.warn(f"{path}: the header declares {declared} elements ({need} bytes), but {body} bytes "
                      f"follow it; the last {body - need}{more} are ignored", PlyExtraDataWarning,
                      stacklevel=stacklevel)  # fmt: skip


def _read(path: Path, np_dtype: type) -> SplatSet:
    check_element_sizes(path, stacklevel=4)  # the warning points at read_ply's caller
    with open(path, "rb") as f:
        ply = PlyData.read(f)
    names = [e.name for e in ply.elements]
    if "vertex" not in names:
        raise ValueError(
            f"{path}: no 'vertex' element (elements: {', '.join(names) or 'none'}); "
            "not a 3D Gaussian splatting PLY"
        )
    vertex = np.asarray(ply["vertex"].data)
    fields = list(vertex.dtype.names or ())
    missing = [p for p in _REQUIRED if p not in fields]
    if missing:
        raise ValueError(
            f"{path}: missing 3DGS vertex properties {', '.join(missing)} (has: {', '.join(fields)}); "
            "not a 3D Gaussian splatting PLY"
        )
    listed = [p for p in fields if (p in _REQUIRED or _REST.match(p)) and vertex.dtype[p].kind not in "fiu"]
    if listed:
        raise ValueError(f"{path}: 3DGS vertex properties {', '.join(listed)} must be numbers (scalar properties)")
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

    def cols(names: list[str]) -> torch.Tensor:
        return torch.from_numpy(_columns(vertex, names, np_dtype))

    rest = cols([f"f_rest_{i}" for i in range(m)]).reshape(n, 3, k).transpose(1, 2).contiguous()
    try:
        return SplatSet(cols(["x", "y", "z"]), cols(["rot_0", "rot_1", "rot_2", "rot_3"]),
                        cols(["scale_0", "scale_1", "scale_2"]), cols(["opacity"])[:, 0].contiguous(),
                        cols(["f_dc_0", "f_dc_1", "f_dc_2"]), rest)  # fmt: skip
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err


def ply_properties(sh_degree: int) -> list[str]:
    """The property names, in file order, of a 3DGS PLY of SH degree ``sh_degree``."""
    k = gaussians.num_sh_bases(sh_degree) - 1
    return (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
            + [f"f_rest_{i}" for i in range(3 * k)]
            + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])  # fmt: skip


def write_ply(path: str | os.PathLike[str], splats: SplatSet, dtype: torch.dtype | str | None = None) -> Path:
    """Writes ``splats`` as a binary little-endian Inria 3DGS PLY (atomically); returns the path.

    ``dtype``: float32 (the Inria layout; the default) or float64 (double properties). Float64 splats
    written without a ``dtype`` are stored as float32 with a warning, since that loses precision.
    """
    if not isinstance(splats, SplatSet):
        raise ValueError(f"splats must be a SplatSet, got {type(splats).__name__}")
    np_dtype = _numpy_dtype(dtype)
    if dtype is None and splats.means.dtype == torch.float64:
        warnings.warn(
            f"write_ply({str(path)!r}): float64 splats are stored as float32 (the Inria 3DGS layout); "
            "pass dtype=torch.float64 to keep double precision, or convert with splats.to(torch.float32)",
            UserWarning,
            stacklevel=2,
        )
    path = Path(path)
    n, k = len(splats), splats.sh_rest.shape[1]
    torch_dtype = torch.float64 if np_dtype is np.float64 else torch.float32

    def as_np(t: torch.Tensor) -> np.ndarray:
        return t.detach().to("cpu", torch_dtype).numpy()

    names = ply_properties(splats.sh_degree)
    cols = np.empty((n, len(names)), dtype=np_dtype)
    cols[:, 0:3] = as_np(splats.means)
    cols[:, 3:6] = 0.0
    cols[:, 6:9] = as_np(splats.sh_dc)
    cols[:, 9 : 9 + 3 * k] = as_np(splats.sh_rest).transpose(0, 2, 1).reshape(n, 3 * k)
    o = 9 + 3 * k
    cols[:, o] = as_np(splats.opacity_logits)
    cols[:, o + 1 : o + 4] = as_np(splats.log_scales)
    cols[:, o + 4 : o + 8] = as_np(splats.quats)
    code = "<f8" if np_dtype is np.float64 else "<f4"
    vertex = cols.view(np.dtype([(name, code) for name in names])).reshape(n)
    data = PlyData([PlyElement.describe(vertex, "vertex")], text=False, byte_order="<")
    with atomic_writer(path) as f:
        data.write(f)
    return path
