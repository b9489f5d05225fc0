"""Small datasets for the loader tests: bright dots at the distorted projections of known 3D points.

The lens models are written out here from their published equations (COLMAP's camera models and
OpenCV's), independently of pycolmap, which the loaders use to undo them: a dot drawn where this
module's forward model puts a point must land, after the loader's undistortion, where the loaded K
and pose project it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SIGMA = 1.0  # dot radius (Gaussian sigma) in pixels


def distort(model: str, params: list[float], xy: np.ndarray) -> np.ndarray:
    """Pixel coordinates [N,2] (pixel centres at +0.5) of normalized image-plane points [N,2]."""
    x, y = xy[:, 0], xy[:, 1]
    p = list(params)
    if model in ("SIMPLE_PINHOLE", "SIMPLE_RADIAL", "RADIAL", "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE"):
        f, cx, cy, *k = p
        fx = fy = f
    else:
        fx, fy, cx, cy, *k = p
    r2 = x * x + y * y
    if model.endswith("FISHEYE"):
        r = np.sqrt(r2)
        th = np.arctan(r)
        ks = (k + [0.0] * 4)[:4]
        th_d = th * (1 + ks[0] * th**2 + ks[1] * th**4 + ks[2] * th**6 + ks[3] * th**8)
        s = np.where(r > 1e-12, th_d / np.maximum(r, 1e-12), 1.0)
        xd, yd = x * s, y * s
    elif model in ("SIMPLE_PINHOLE", "PINHOLE"):
        xd, yd = x, y
    elif model in ("SIMPLE_RADIAL", "RADIAL"):
        ks = (k + [0.0])[:2]
        s = 1 + ks[0] * r2 + ks[1] * r2 * r2
        xd, yd = x * s, y * s
    else:  # OPENCV, FULL_OPENCV: k1, k2, p1, p2[, k3, k4, k5, k6]
        k1, k2, p1, p2, k3, k4, k5, k6 = (k + [0.0] * 8)[:8]
        radial = (1 + k1 * r2 + k2 * r2**2 + k3 * r2**3) / (1 + k4 * r2 + k5 * r2**2 + k6 * r2**3)
        xd = x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
        yd = y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
    return np.stack([fx * xd + cx, fy * yd + cy], axis=1)


def draw_dots(width: int, height: int, uv: np.ndarray) -> np.ndarray:
    """A [H,W,3] uint8 image: dark grey with a white Gaussian dot at each pixel position of uv [N,2]."""
    v, u = np.mgrid[0:height, 0:width] + 0.5
    img = np.zeros((height, width))
    for pu, pv in uv:
        img += np.exp(-((u - pu) ** 2 + (v - pv) ** 2) / (2 * SIGMA**2))
    img = 0.1 + 0.85 * np.clip(img, 0, 1)
    return np.repeat(np.round(img * 255).astype(np.uint8)[..., None], 3, axis=2)


def dot_centroid(image: np.ndarray, near: np.ndarray, radius: int = 4) -> np.ndarray:
    """The brightness centroid (pixel coordinates, centres at +0.5) of the dot near ``near`` [2] in
    image [H,W,C] float (background level removed)."""
    g = image[..., :3].mean(-1)
    H, W = g.shape
    c = np.round(near - 0.5).astype(int)
    y0, y1 = max(c[1] - radius, 0), min(c[1] + radius + 1, H)
    x0, x1 = max(c[0] - radius, 0), min(c[0] + radius + 1, W)
    win = np.clip(g[y0:y1, x0:x1] - 0.1, 0, None)
    v, u = np.mgrid[y0:y1, x0:x1] + 0.5
    return np.array([(win * u).sum() / win.sum(), (win * v).sum() / win.sum()])


def look_at_pose(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """OpenCV world-to-camera [4,4] (x right, y down, z forward) at ``eye`` looking at ``target``,
    world z up."""
    z = target - eye
    z = z / np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    R = np.stack([x, y, z])
    vm = np.eye(4)
    vm[:3, :3], vm[:3, 3] = R, -R @ eye
    return vm


def scene_points() -> np.ndarray:
    """A 4 x 3 grid of world points around the origin (in the plane x = 0)."""
    g = np.stack(np.meshgrid(np.linspace(-1.35, 1.35, 4), np.linspace(-0.8, 0.8, 3)), -1).reshape(-1, 2)
    return np.c_[np.zeros(len(g)), g]


POSES = [look_at_pose(np.array([3.0, 0.0, 0.0]), np.zeros(3)), look_at_pose(np.array([2.9, 0.6, 0.3]), np.zeros(3))]


def project_normalized(points: np.ndarray, viewmat: np.ndarray) -> np.ndarray:
    cam = points @ viewmat[:3, :3].T + viewmat[:3, 3]
    return cam[:, :2] / cam[:, 2:]


def write_dot_images(folder: Path, cams: list[tuple[str, int, int, list[float]]], sub: str = "images") -> list[str]:
    """One dot image per (model, width, height, params) camera, seen from :data:`POSES` in turn; the
    file names (relative to ``folder / sub``)."""
    (folder / sub).mkdir(parents=True, exist_ok=True)
    from PIL import Image

    names = []
    for i, (model, w, h, params) in enumerate(cams):
        uv = distort(model, params, project_normalized(scene_points(), POSES[i % len(POSES)]))
        name = f"view_{i:02d}.png"
        Image.fromarray(draw_dots(w, h, uv)).save(folder / sub / name)
        names.append(name)
    return names


def write_colmap_dots(folder: Path, cams: list[tuple[str, int, int, list[float]]]) -> Path:
    """A COLMAP scene folder (``sparse/0``, ``images/``) with one camera per image."""
    from gsworkbench.scenes.colmap import write_colmap_model
    from gsworkbench.scenes.lens import make_camera

    names = write_dot_images(folder, cams)
    cameras = [make_camera(m, w, h, p) for m, w, h, p in cams]
    viewmats = np.stack([POSES[i % len(POSES)] for i in range(len(cams))])
    write_colmap_model(
        folder / "sparse" / "0", names, viewmats, cameras, list(range(len(cams))), np.zeros((0, 3)), np.zeros((0, 3))
    )
    return folder


GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])


def write_json_dots(
    folder: Path, file_keys: dict, frame_keys: list[dict], cams: list[tuple[str, int, int, list[float]]], **extra
) -> Path:
    """A transforms.json folder: the dot images of ``cams`` (the forward models drawn), and the JSON with
    ``file_keys`` at file level and ``frame_keys[i]`` in frame i."""
    names = write_dot_images(folder, cams)
    frames = []
    for i, (name, keys) in enumerate(zip(names, frame_keys)):
        c2w = np.linalg.inv(POSES[i % len(POSES)]) @ GL_TO_CV
        frames.append({"file_path": f"images/{name}", "transform_matrix": c2w.tolist(), **keys})
    (folder / "transforms.json").write_text(json.dumps({**file_keys, "frames": frames, **extra}))
    return folder
