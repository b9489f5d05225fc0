"""Reading a COLMAP sparse model with pycolmap, with errors that name the file.

pycolmap reads ``cameras``, ``images`` and ``points3D`` (and COLMAP 4's ``rigs`` and ``frames``) as
``.bin`` or ``.txt``. Two cases it handles badly are handled here first:

- a missing ``points3D`` file means "no point cloud" (the loader then starts from random points):
  the model is read from a temporary folder holding links to the other files and an empty points file;
- a truncated or garbage binary file: pycolmap allocates what a first count says ("std::bad_alloc",
  "vector::reserve"), or fills a camera's missing parameters with the last one it read and loads
  wrong intrinsics without a word. Each ``.bin`` file's structure is walked first, and a file that
  does not add up is a ValueError naming it:

  - ``cameras.bin``: a uint64 count, then per camera an int32 id, an int32 model id, uint64 width and
    height and as many float64 parameters as the model has;
  - ``images.bin``: a uint64 count, then per image an int32 id, 4 float64 (qw, qx, qy, qz), 3 float64
    (tx, ty, tz), an int32 camera id, a NUL-terminated name, a uint64 count of 2D points and that many
    (float64 x, float64 y, int64 point3D id);
  - ``points3D.bin``: a uint64 count, then per point a uint64 id, 3 float64 xyz, 3 uint8 rgb, a float64
    error, a uint64 track length and that many (uint32 image id, uint32 point2D index) pairs.
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
_CAMERA = struct.Struct("<iiQQ")  # id, model id, width, height: the bytes before a camera's parameters
_IMAGE = struct.Struct("<i4d3di")  # id, qvec, tvec, camera id: the bytes before an image's name
_U64 = struct.Struct("<Q")
MAX_IMAGE_SIDE = 1 << 20  # pixels: a larger width or height is garbage, not a camera


def model_file(sparse: Path, stem: str) -> Path | None:
    """``<stem>.bin`` or ``<stem>.txt`` in ``sparse``, whichever exists (bin first), or None."""
    for ext in ("bin", "txt"):
        if (sparse / f"{stem}.{ext}").is_file():
            return sparse / f"{stem}.{ext}"
    return None


class _BinaryModelFile:
    """One COLMAP ``.bin`` file's bytes, walked from the start; :meth:`bad` is the ValueError naming it."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        self.data = path.read_bytes()
        self.size = len(self.data)

    def bad(self, why: str) -> ValueError:
        return ValueError(
            f"{self.path} is truncated or not a COLMAP {self.kind} ({why}; the file has {self.size} bytes)"
        )

    def count(self, smallest: int, what: str) -> int:
        """The leading uint64 count of ``what`` (each at least ``smallest`` bytes), checked against the size."""
        if self.size < 8:
            raise self.bad(f"no {what} count")
        (n,) = _U64.unpack_from(self.data, 0)
        if n > (self.size - 8) // smallest:
            raise self.bad(f"it says {n} {what}, which need at least {n * smallest + 8} bytes")
        return n

    def unpack(self, fmt: struct.Struct, off: int, what: str) -> tuple[Any, ...]:
        if off + fmt.size > self.size:
            raise self.bad(f"{what} starts at byte {off} and runs past the end")
        return fmt.unpack_from(self.data, off)

    def end(self, off: int, n: int, what: str) -> None:
        if off != self.size:
            raise self.bad(f"{self.size - off} bytes follow the {n} {what}")


def _parameter_count(model_id: int) -> tuple[str, int] | None:
    """The name and parameter count of COLMAP camera model ``model_id``, None for an unknown id."""
    import pycolmap

    known = {int(m): name for name, m in pycolmap.CameraModelId.__members__.items() if int(m) >= 0}
    if model_id not in known:
        return None
    model = pycolmap.CameraModelId(model_id)
    return known[model_id], len(pycolmap.Camera.create_from_model_id(1, model, 1.0, 1, 1).params)


def check_cameras_bin(path: Path) -> int:
    """The number of cameras in a binary cameras file, or a ValueError naming it when its cameras do not
    fit its size or hold an unknown model or an impossible image size."""
    f = _BinaryModelFile(path, "cameras.bin")
    n = f.count(_CAMERA.size, "cameras")
    off = 8
    for i in range(n):
        cid, mid, w, h = f.unpack(_CAMERA, off, f"camera {i} of {n}")
        model = _parameter_count(mid)
        if model is None:
            raise f.bad(f"camera {cid} (at byte {off}) has an unknown camera model id {mid}")
        if not (1 <= w <= MAX_IMAGE_SIDE and 1 <= h <= MAX_IMAGE_SIDE):
            raise f.bad(f"camera {cid} (at byte {off}) is {w}x{h} pixels")
        name, k = model
        off += _CAMERA.size
        if off + 8 * k > f.size:
            raise f.bad(f"camera {cid} ({name}) needs {k} parameters ({8 * k} bytes) from byte {off}, "
                        f"past the end")  # fmt: skip
        off += 8 * k
    f.end(off, n, "cameras")
    return n


def check_images_bin(path: Path) -> int:
    """The number of images in a binary images file, or a ValueError naming it when its images do not
    fit its size."""
    f = _BinaryModelFile(path, "images.bin")
    n = f.count(_IMAGE.size + 1 + 8, "images")
    off = 8
    for i in range(n):
        image_id = f.unpack(_IMAGE, off, f"image {i} of {n}")[0]
        off += _IMAGE.size
        stop = f.data.find(b"\0", off)
        if stop < 0:
            raise f.bad(f"the name of image {image_id} (from byte {off}) has no end")
        off = stop + 1
        (k,) = f.unpack(_U64, off, f"the 2D point count of image {image_id}")
        off += 8 + 24 * k
        if off > f.size:
            raise f.bad(f"image {image_id} has {k} 2D points, which run past the end")
    f.end(off, n, "images")
    return n


def check_points3d_bin(path: Path) -> int:
    """The number of points in a binary points3D file, or a ValueError naming it when its counts do not
    fit its size (truncated, or not a points3D.bin at all)."""
    f = _BinaryModelFile(path, "points3D.bin")
    n = f.count(_POINT_HEAD + 8, "points")
    off = 8
    for i in range(n):
        if off + _POINT_HEAD + 8 > f.size:
            raise f.bad(f"point {i} of {n} starts at byte {off}, past the end")
        (t,) = _U64.unpack_from(f.data, off + _POINT_HEAD)
        off += _POINT_HEAD + 8 + 8 * t
        if off > f.size:
            raise f.bad(f"point {i} has a track of {t} observations that runs past the end")
    f.end(off, n, "points")
    return n


BINARY_CHECKS = {"cameras": check_cameras_bin, "images": check_images_bin, "points3D": check_points3d_bin}


def read_model(sparse: Path) -> tuple[Any, bool]:
    """The ``pycolmap.Reconstruction`` in ``sparse`` and whether it has a points3D file. ValueError
    naming the file or folder for one that pycolmap cannot read (see the module docstring)."""
    import pycolmap

    for stem in ("cameras", "images"):
        if model_file(sparse, stem) is None:
            raise FileNotFoundError(f"the COLMAP model in {sparse} has no {stem}.bin or {stem}.txt")
    for stem, check in BINARY_CHECKS.items():
        found = model_file(sparse, stem)
        if found is not None and found.suffix == ".bin":
            check(found)
    points = model_file(sparse, "points3D")

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
