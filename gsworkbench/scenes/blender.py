"""Loader of the NeRF-synthetic ("Blender") layout.

A folder with ``transforms_train.json`` and ``transforms_test.json`` (``transforms_val.json`` is
ignored), or a single ``transforms.json``. Each file holds ``camera_angle_x`` (horizontal field of view
in radians; ``fl_x``/``fl_y``/``cx``/``cy`` in pixels are used instead where present) and ``frames``,
each with ``file_path`` (relative to the folder, with or without extension) and ``transform_matrix``,
the camera-to-world matrix in OpenGL axes (x right, y up, z backward).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gsworkbench.scenes.images import (
    check_background,
    check_downsample,
    check_folder_and_split,
    load_images,
    resolve_image_path,
    scale_intrinsics,
)
from gsworkbench.scenes.points import read_points_ply
from gsworkbench.scenes.scene import Scene

POINTS_FILE = "points3D.ply"

# OpenGL camera axes (x right, y up, z backward) -> OpenCV (x right, y down, z forward)
GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])


def _read_transforms(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(meta, dict) or not isinstance(meta.get("frames"), list) or not meta["frames"]:
        raise ValueError(f"{path} has no frames (expected a non-empty 'frames' list)")
    return meta


def _camera(meta: dict[str, Any], frame: dict[str, Any], W: int, H: int, path: Path) -> np.ndarray:
    """K [3,3] (float64, pixels) of one frame at the original image size; frame keys override file keys."""

    def get(key: str) -> Any:
        return frame.get(key, meta.get(key))

    fx, fy = get("fl_x"), get("fl_y")
    if fx is None:
        angle_x = get("camera_angle_x")
        if angle_x is None:
            raise ValueError(f"{path} gives neither camera_angle_x nor fl_x")
        if not 0.0 < float(angle_x) < math.pi:
            raise ValueError(f"{path}: camera_angle_x must be in (0, pi) radians, got {angle_x}")
        fx = 0.5 * W / math.tan(0.5 * float(angle_x))
    if fy is None:
        angle_y = get("camera_angle_y")
        fy = 0.5 * H / math.tan(0.5 * float(angle_y)) if angle_y is not None else fx
    cx, cy = get("cx"), get("cy")
    cx = W / 2 if cx is None else float(cx)
    cy = H / 2 if cy is None else float(cy)
    return np.array([[float(fx), 0.0, cx], [0.0, float(fy), cy], [0.0, 0.0, 1.0]])


def _viewmat(frame: dict[str, Any], path: Path, index: int) -> np.ndarray:
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


def load_blender(
    path: str | os.PathLike[str],
    *,
    background: tuple[float, float, float] = (1.0, 1.0, 1.0),
    downsample: int = 1,
    split_test_every: int | None = None,
) -> Scene:
    """Loads a NeRF-synthetic folder as a :class:`Scene`.

    Views are the train frames, then the test frames, in file order. ``split_test_every=N`` pools them
    and makes every N-th (from the first) a test view instead; a lone ``transforms.json`` needs it
    (default 8 there). RGBA images are composited over ``background``; ``downsample`` box-averages by an
    integer factor. ``points3D.ply`` beside the JSON files, if present, is the initial point cloud.
    """
    folder = Path(path)
    bg = check_background(background)
    d = check_downsample(downsample)
    check_folder_and_split(folder, "split_test_every", split_test_every)
    train_file, test_file, single = (
        folder / f for f in ("transforms_train.json", "transforms_test.json", "transforms.json")
    )
    if train_file.is_file():
        if not test_file.is_file() and split_test_every is None:
            raise FileNotFoundError(f"{test_file} not found (pass split_test_every to split the train frames)")
        files = [train_file] + ([test_file] if test_file.is_file() else [])
    elif single.is_file():
        files = [single]
        split_test_every = split_test_every or 8
    else:
        raise FileNotFoundError(f"no transforms_train.json or transforms.json in {folder}")

    entries = []  # (json path, meta, frame, index in file, image path, split)
    for f in files:
        meta = _read_transforms(f)
        for i, frame in enumerate(meta["frames"]):
            if not isinstance(frame, dict) or not isinstance(frame.get("file_path"), str):
                raise ValueError(f"{f}: frame {i} has no file_path")
            img = resolve_image_path(folder, frame["file_path"])
            entries.append((f, meta, frame, i, img, "test" if f == test_file else "train"))

    images, alphas, (W, H) = load_images([e[4] for e in entries], bg, d)
    Ks = torch.tensor(np.stack([_camera(m, fr, W, H, f) for f, m, fr, _, _, _ in entries]), dtype=torch.float32)
    viewmats = torch.tensor(np.stack([_viewmat(fr, f, i) for f, _, fr, i, _, _ in entries]), dtype=torch.float32)
    if split_test_every is None:
        is_test = torch.tensor([e[5] == "test" for e in entries])
    else:
        is_test = torch.arange(len(entries)) % split_test_every == 0
    points, colors = None, None
    if (folder / POINTS_FILE).is_file():
        points, colors = read_points_ply(folder / POINTS_FILE)
    return Scene.from_views(
        images, viewmats, scale_intrinsics(Ks, d), is_test, points=points, point_colors=colors, background=bg,
        name=folder.name, alphas=alphas, image_names=[e[4].relative_to(folder).as_posix() for e in entries],
    )
