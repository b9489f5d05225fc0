"""Reading a COLMAP sparse model with pycolmap, with errors that name the file.

pycolmap reads ``cameras``, ``images`` and ``points3D`` (and COLMAP 4's ``rigs`` and ``frames``) as
``.bin`` or ``.txt``. Two cases it handles badly are handled here first:

- a missing ``points3D`` file means "no point cloud" (the loader then starts from random points):
  the model is read from a temporary folder holding links to the other files and an empty points file;
- a truncated or garbage ``points3D.bin`` made pycolmap allocate what its first count said
  ("std::bad_alloc"): the file's structure is walked first (a uint64 count, then per point a uint64
  id, 3 float64 xyz, 3 uint8 rgb, a float64 error, a uint64 track length and that many
  (uint32 image id, uint32 point2D index) pairs), and a file that does not add up is a ValueError
  naming it.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

MODEL_STEMS = ("cameras", "images", "points3D", "rigs", "frames")
_POINT_HEAD = 8 + 24 + 3 + 8  # id, xyz, rgb, error: the bytes before a point's track length


def model_file(sparse: Path, stem: str) -> Path | None:
    """``<stem>.bin`` or ``<stem>.txt`` in ``sparse``, whichever exists (bin first), or None."""
    for ext in ("bin", "txt"):
        if (sparse / f"{stem}.{ext}").is_file():
            return sparse / f"{stem}.{ext}"
    return None


def check_points3d_bin(path: Path) -> int:
    """The number of points in a binary points3D file, or a ValueError naming it when its counts do not
    fit its size (truncated, or not a points3D.bin at all)."""
    data = path.read_bytes()
    size = len(data)

    def bad(why: str) -> ValueError:
        return ValueError(f"{path} is truncated or not a COLMAP points3D.bin ({why}; the file has {size} bytes)")

    if size < 8:
        raise bad("no point count")
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > (size - 8) // (_POINT_HEAD + 8):
        raise bad(f"it says {n} points, which need at least {n * (_POINT_HEAD + 8) + 8} bytes")
    off = 8
    track_len = struct.Struct("<Q")
    for i in range(n):
        if off + _POINT_HEAD + 8 > size:
            raise bad(f"point {i} of {n} starts at byte {off}, past the end")
        (t,) = track_len.unpack_from(data, off + _POINT_HEAD)
        off += _POINT_HEAD + 8 + 8 * t
        if off > size:
            raise bad(f"point {i} has a track of {t} observations that runs past the end")
    if off != size:
        raise bad(f"{size - off} bytes follow the {n} points")
    return n


def read_model(sparse: Path) -> tuple[Any, bool]:
    """The ``pycolmap.Reconstruction`` in ``sparse`` and whether it has a points3D file. ValueError
    naming the file or folder for one that pycolmap cannot read (see the module docstring)."""
    import pycolmap

    for stem in ("cameras", "images"):
        if model_file(sparse, stem) is None:
            raise FileNotFoundError(f"the COLMAP model in {sparse} has no {stem}.bin or {stem}.txt")
    points = model_file(sparse, "points3D")
    if points is not None and points.suffix == ".bin":
        check_points3d_bin(points)

    def read(folder: Path) -> Any:
        try:
            return pycolmap.Reconstruction(str(folder))
        except Exception as e:  # pycolmap raises ValueError/RuntimeError/MemoryError with C++ text
            raise ValueError(f"cannot read the COLMAP model in {sparse}: {e}") from e

    if points is not None:
        return read(sparse), True
    with tempfile.TemporaryDirectory(prefix="gsw-colmap-") as tmp:
        ext = model_file(sparse, "cameras").suffix  # type: ignore[union-attr]
        for stem in MODEL_STEMS:
            src = model_file(sparse, stem)
            if src is None:
                continue
            try:
                os.symlink(src.resolve(), Path(tmp) / src.name)
            except OSError:  # no symlinks on this file system
                shutil.copyfile(src, Path(tmp) / src.name)
        empty = Path(tmp) / f"points3D{ext}"
        empty.write_bytes(struct.pack("<Q", 0) if ext == ".bin" else b"")
        return read(Path(tmp)), False
