"""COLMAP sparse models (binary or text), read and written with pycolmap.

The layout: ``<path>/sparse/0`` (or ``<path>/sparse``) holding cameras, images and points3D files,
and the images in ``<path>/images``. COLMAP's cam_from_world poses use OpenCV axes and its pixel
coordinates put pixel centres at +0.5, the rasterizer's conventions, so poses and K carry over as they are.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import torch

from gsworkbench.scenes.images import (
    check_background,
    check_downsample,
    check_folder_and_split,
    load_images,
    scale_intrinsics,
)
from gsworkbench.scenes.scene import Scene

SUPPORTED_MODELS = ("PINHOLE", "SIMPLE_PINHOLE")


def find_sparse_dir(path: Path) -> Path:
    """``path/sparse/0`` or ``path/sparse``, whichever holds a model (FileNotFoundError otherwise)."""
    for cand in (path / "sparse" / "0", path / "sparse"):
        if any((cand / f"cameras.{ext}").is_file() for ext in ("bin", "txt")):
            return cand
    raise FileNotFoundError(
        f"no COLMAP model (cameras.bin or cameras.txt) in {path / 'sparse' / '0'} or {path / 'sparse'}"
    )


def _model_file(sparse: Path, stem: str) -> Path:
    return sparse / f"{stem}.bin" if (sparse / f"{stem}.bin").is_file() else sparse / f"{stem}.txt"


def load_colmap(
    path: str | os.PathLike[str],
    *,
    images_dir: str = "images",
    downsample: int = 1,
    test_every: int | None = 8,
    test_names: Collection[str] | None = None,
    background: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> Scene:
    """Loads a COLMAP scene folder as a :class:`Scene`.

    Views are the registered images sorted by name. Every ``test_every``-th of them (from the first:
    the Inria/gsplat convention; None: no test views) is a test view, unless ``test_names`` lists the
    test images by name. Cameras must be PINHOLE or SIMPLE_PINHOLE (undistorted). Images with alpha are
    composited over ``background``; ``downsample`` box-averages by an integer factor and scales K.
    Where the image files' size differs from the model's camera size, K is scaled to the files.
    The model's points3D with their colours are the initial point cloud (None if it has none).
    """
    import pycolmap

    folder = Path(path)
    bg = check_background(background)
    d = check_downsample(downsample)
    check_folder_and_split(folder, "test_every", test_every)
    sparse = find_sparse_dir(folder)
    try:
        rec = pycolmap.Reconstruction(str(sparse))
    except Exception as e:  # pycolmap raises ValueError/RuntimeError with a C++ location prefix
        raise ValueError(f"cannot read the COLMAP model in {sparse}: {e}") from e
    for cam_id, cam in rec.cameras.items():
        if cam.model_name not in SUPPORTED_MODELS:
            raise ValueError(
                f"{_model_file(sparse, 'cameras')}: camera {cam_id} uses the {cam.model_name} model; only "
                f"{' and '.join(SUPPORTED_MODELS)} are supported "
                "(undistort the images first, e.g. with colmap image_undistorter)"
            )
    images = sorted((im for im in rec.images.values() if im.has_pose), key=lambda im: im.name)
    if not images:
        raise ValueError(f"{_model_file(sparse, 'images')} has no registered images")
    img_root = folder / images_dir
    if not img_root.is_dir():
        raise FileNotFoundError(f"image folder not found: {img_root}")
    rgb, alphas, (W, H) = load_images([img_root / im.name for im in images], bg, d)

    Ks, viewmats = [], []
    for im in images:
        cam = rec.cameras[im.camera_id]
        K = np.asarray(cam.calibration_matrix(), dtype=np.float64).copy()
        K[0] *= W / cam.width
        K[1] *= H / cam.height
        Ks.append(K)
        vm = np.eye(4)
        vm[:3, :] = np.asarray(im.cam_from_world().matrix(), dtype=np.float64)
        viewmats.append(vm)
    Ks_t = scale_intrinsics(torch.tensor(np.stack(Ks), dtype=torch.float32), d)
    viewmats_t = torch.tensor(np.stack(viewmats), dtype=torch.float32)

    names = [im.name for im in images]
    if test_names is not None:
        missing = set(test_names) - set(names)
        if missing:
            raise ValueError(f"test_names not among the images of {sparse}: {sorted(missing)[:5]}")
        is_test = torch.tensor([n in set(test_names) for n in names])
    elif test_every is None:
        is_test = torch.zeros(len(names), dtype=torch.bool)
    else:
        is_test = torch.arange(len(names)) % test_every == 0

    points = colors = None
    if rec.num_points3D():
        pts = [p for _, p in sorted(rec.points3D.items(), key=lambda kv: kv[0])]  # by id: a stable order
        points = torch.tensor(np.stack([p.xyz for p in pts]), dtype=torch.float32)
        colors = torch.tensor(np.stack([p.color for p in pts]), dtype=torch.float32) / 255.0
    return Scene.from_views(
        rgb, viewmats_t, Ks_t, is_test, points=points, point_colors=colors, background=bg, name=folder.name,
        alphas=alphas, image_names=[f"{images_dir}/{n}" for n in names],
    )


def write_colmap(
    sparse_dir: str | os.PathLike[str],
    names: Sequence[str],
    viewmats: np.ndarray,
    K: np.ndarray,
    width: int,
    height: int,
    points: np.ndarray,
    colors: np.ndarray,
    *,
    binary: bool = True,
) -> Path:
    """Writes a COLMAP model: one PINHOLE camera (K [3,3], pixels), one image per name with its OpenCV
    world-to-camera pose (viewmats [V,4,4]), and points [P,3] with colours [P,3] in [0,1] (no tracks)."""
    import pycolmap

    out = Path(sparse_dir)
    out.mkdir(parents=True, exist_ok=True)
    rec = pycolmap.Reconstruction()
    cam = pycolmap.Camera(
        model="PINHOLE", width=int(width), height=int(height), params=[K[0, 0], K[1, 1], K[0, 2], K[1, 2]], camera_id=1
    )
    rec.add_camera_with_trivial_rig(cam)
    for i, (name, vm) in enumerate(zip(names, np.asarray(viewmats, dtype=np.float64))):
        pose = pycolmap.Rigid3d(pycolmap.Rotation3d(vm[:3, :3]), vm[:3, 3].copy())
        rec.add_image_with_trivial_frame(pycolmap.Image(name=name, camera_id=1, image_id=i + 1), pose)
    rgb = np.clip(np.round(np.asarray(colors) * 255.0), 0, 255).astype(np.uint8)
    for p, c in zip(np.asarray(points, dtype=np.float64), rgb):
        rec.add_point3D(p, pycolmap.Track(), c)
    (rec.write_binary if binary else rec.write_text)(str(out))
    return out
