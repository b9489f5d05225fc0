"""transforms*.json files (NeRF-synthetic, instant-ngp, nerfstudio): reading, frames, poses, bounds.

A file holds ``frames``, each with ``file_path`` (relative to the folder, with or without extension)
and ``transform_matrix`` (camera-to-world, OpenGL camera axes: x right, y up, z backward), and camera
keys at file level or per frame (see :mod:`gsworkbench.scenes.lens`). Optional: ``train_filenames`` /
``test_filenames`` (nerfstudio's split), ``ply_file_path`` (nerfstudio's point cloud), and
instant-ngp's scene box keys ``aabb_scale``, ``scale``, ``offset`` and ``aabb`` (:func:`json_bounds`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from gsworkbench.scenes.images import find_image, image_size
from gsworkbench.scenes.lens import camera_from_json, number
from gsworkbench.scenes.views import View

# OpenGL camera axes (x right, y up, z backward) -> OpenCV (x right, y down, z forward)
GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])
NGP_DEFAULT_SCALE = 0.33  # instant-ngp's NERF_SCALE: world -> its unit cube
NGP_DEFAULT_OFFSET = 0.5


def read_transforms(path: Path) -> dict[str, Any]:
    """The JSON object of ``path`` with a non-empty ``frames`` list; ValueError naming the file for
    bytes that are not UTF-8, invalid JSON, or no frames."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path} is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}); JSON files must be UTF-8"
        ) from None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(meta, dict) or not isinstance(meta.get("frames"), list) or not meta["frames"]:
        raise ValueError(f"{path} has no frames (expected a non-empty 'frames' list)")
    return meta


def viewmat_of(frame: dict[str, Any], path: Path, index: int) -> np.ndarray:
    """OpenCV world-to-camera [4,4] (float64) of a frame's OpenGL camera-to-world matrix."""
    try:
        c2w = np.asarray(frame["transform_matrix"], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: frame {index} has no valid transform_matrix") from e
    if c2w.shape == (3, 4):
        c2w = np.vstack([c2w, [0.0, 0.0, 0.0, 1.0]])
    if c2w.shape != (4, 4) or not np.isfinite(c2w).all():
        raise ValueError(f"{path}: frame {index} transform_matrix must be a finite 4x4 matrix")
    R = c2w[:3, :3]
    if abs(abs(np.linalg.det(R)) - 1.0) > 1e-3:
        raise ValueError(f"{path}: frame {index} transform_matrix has no rotation part (det {np.linalg.det(R):.4g})")
    return np.linalg.inv(c2w @ GL_TO_CV)


def frame_views(folder: Path, path: Path, meta: dict[str, Any], split: str) -> list[View]:
    """One :class:`View` per frame of ``path`` (cameras built lazily, once the image is known to exist);
    ``split`` ("train" or "test") marks them."""
    views = []
    for i, frame in enumerate(meta["frames"]):
        if not isinstance(frame, dict) or not isinstance(frame.get("file_path"), str):
            raise ValueError(f"{path}: frame {i} has no file_path")
        img = find_image(folder, frame["file_path"])
        where = f"{path}, frame {i} ({frame['file_path']})"

        def camera(frame: dict[str, Any] = frame, img: Path = img, where: str = where) -> Any:
            return camera_from_json(lambda k: frame.get(k, meta.get(k)), lambda: image_size(img), where)

        name = img.relative_to(folder).as_posix() if img.is_relative_to(folder) else img.as_posix()
        views.append(View(img, name, camera, where, viewmat_of(frame, path, i), split == "test"))
    return views


def split_names(meta: dict[str, Any], folder: Path, path: Path) -> set[Path] | None:
    """The test images that nerfstudio's ``test_filenames`` names (resolved like frames), or None."""
    names = meta.get("test_filenames")
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{path}: test_filenames must be a list of file paths")
    return {find_image(folder, n) for n in names}


def json_bounds(meta: dict[str, Any], path: Path) -> np.ndarray | None:
    """The scene box [2,3] (min, max; world units of the file) that instant-ngp's keys state, or None.

    instant-ngp maps a world point p to ``p * scale + offset`` (defaults 0.33 and 0.5 per axis) and
    bounds the scene by a cube of side ``aabb_scale`` centred at 0.5 in that space; ``aabb`` (a world
    box) sets scale and offset so that its longest side spans the unit cube. Without ``aabb_scale`` the
    box is ``aabb`` itself; with neither key there are no bounds.
    """
    a_scale, aabb = meta.get("aabb_scale"), meta.get("aabb")
    if a_scale is None and aabb is None:
        return None
    a = 1.0 if a_scale is None else number(a_scale, "aabb_scale", str(path), positive=True)
    if aabb is not None:
        box = np.asarray(aabb, dtype=np.float64) if isinstance(aabb, list) else None
        if box is None or box.shape != (2, 3) or not np.isfinite(box).all() or (box[0] > box[1]).any():
            raise ValueError(f"{path}: aabb must be [[minx,miny,minz],[maxx,maxy,maxz]], got {aabb!r}")
        if a_scale is None:
            return box
        centre, side = box.mean(0), float((box[1] - box[0]).max())
        return np.stack([centre - 0.5 * a * side, centre + 0.5 * a * side])
    scale = number(meta.get("scale", NGP_DEFAULT_SCALE), "scale", str(path), positive=True)
    off = meta.get("offset", NGP_DEFAULT_OFFSET)
    offset = np.array(
        [number(o, "offset", str(path)) for o in off]
        if isinstance(off, list)
        else [number(off, "offset", str(path))] * 3
    )
    if offset.shape != (3,):
        raise ValueError(f"{path}: offset must be a number or three numbers, got {off!r}")
    lo, hi = (0.5 - 0.5 * a - offset) / scale, (0.5 + 0.5 * a - offset) / scale
    if not (math.isfinite(lo.min()) and math.isfinite(hi.max())):
        raise ValueError(f"{path}: aabb_scale {a} with scale {scale} gives no finite box")
    return np.stack([lo, hi])
