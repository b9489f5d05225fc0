"""COLMAP sparse models (binary or text), read and written with pycolmap.

The layout: ``<path>/sparse/0`` (or ``<path>/sparse``) holding cameras, images and (optionally)
points3D files, and the images in ``<path>/images``; ``colmap image_undistorter``'s output folder
(``images/`` and ``sparse/``) is such a folder too. COLMAP's cam_from_world poses use OpenCV axes and
its pixel coordinates put pixel centres at +0.5, the rasterizer's conventions, so poses and K carry over
as they are. Distorted camera models are undistorted (:mod:`gsworkbench.scenes.lens` lists them).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import torch

from gsworkbench.scenes.colmap_model import model_file, read_model
from gsworkbench.scenes.images import check_background, check_downsample, check_folder_and_split
from gsworkbench.scenes.lens import make_camera
from gsworkbench.scenes.scene import Scene
from gsworkbench.scenes.views import View, assemble, check_missing, drop_missing, use_downsampled_folder


def find_sparse_dir(path: Path) -> Path:
    """``path/sparse/0`` or ``path/sparse``, whichever holds a model (FileNotFoundError otherwise)."""
    for cand in (path / "sparse" / "0", path / "sparse"):
        if any((cand / f"cameras.{ext}").is_file() for ext in ("bin", "txt")):
            return cand
    raise FileNotFoundError(
        f"no COLMAP model (cameras.bin or cameras.txt) in {path / 'sparse' / '0'} or {path / 'sparse'}"
    )


def load_colmap(
    path: str | os.PathLike[str],
    *,
    images_dir: str = "images",
    downsample: int = 1,
    test_every: int | None = 8,
    test_names: Collection[str] | None = None,
    background: tuple[float, float, float] = (1.0, 1.0, 1.0),
    missing: str = "skip",
    cache_dir: str | os.PathLike[str] | None = None,
) -> Scene:
    """Loads a COLMAP scene folder as a :class:`Scene`.

    Views are the registered images that have a file, sorted by name; images without a file are
    skipped with one warning (``missing="error"``: a FileNotFoundError). Every ``test_every``-th of them
    (from the first: the Inria/gsplat convention; None: no test views) is a test view, unless
    ``test_names`` lists the test images by name. Distorted cameras are undistorted (cached under
    ``cache_dir``, default the scene cache); views of different sizes (one camera per image, as after
    ``colmap image_undistorter``) are cropped to a common size and their principal points moved
    (:mod:`gsworkbench.scenes.views`). Where an image file's size differs from its camera's, the camera
    is rescaled to the file. ``downsample=d`` uses ``<images_dir>_d`` where it holds every image, else
    box-averages by d. Images with alpha are composited over ``background``. The model's points3D
    with their colours are the initial point cloud (None without a points3D file or points), and their
    robust box (:func:`points_bounds`) is the scene's ``bounds``.
    """
    folder = Path(path)
    bg = check_background(background)
    d = check_downsample(downsample)
    how = check_missing(missing)
    check_folder_and_split(folder, "test_every", test_every)
    sparse = find_sparse_dir(folder)
    rec, _ = read_model(sparse)
    cameras_file = model_file(sparse, "cameras")
    registered = sorted((im for im in rec.images.values() if im.has_pose), key=lambda im: im.name)
    if not registered:
        raise ValueError(f"{model_file(sparse, 'images')} has no registered images")
    img_root = folder / images_dir
    if not img_root.is_dir():
        raise FileNotFoundError(f"image folder not found: {img_root}")
    if test_names is not None:
        unknown = set(test_names) - {im.name for im in registered}
        if unknown:
            raise ValueError(f"test_names not among the images of {sparse}: {sorted(unknown)[:5]}")

    listed = []
    for im in registered:
        vm = np.eye(4)
        vm[:3, :] = np.asarray(im.cam_from_world().matrix(), dtype=np.float64)
        where = f"{cameras_file}: camera {im.camera_id}"
        listed.append(View(img_root / im.name, f"{images_dir}/{im.name}", rec.cameras[im.camera_id], where, vm))
    views = drop_missing(listed, how, model_file(sparse, "images"))
    names = [v.image.relative_to(img_root).as_posix() for v in views]
    test = set(test_names or ())
    for i, (v, n) in enumerate(zip(views, names)):
        v.is_test = (n in test) if test_names is not None else (test_every is not None and i % test_every == 0)
    views, box = use_downsampled_folder(
        views, d, lambda v: [folder / f"{images_dir}_{d}" / v.image.relative_to(img_root)], folder
    )
    rgb, alphas, Ks = assemble(views, bg, box, cache_dir)
    viewmats = torch.tensor(np.stack([v.viewmat for v in views]), dtype=torch.float32)

    points = colors = bounds = None
    if rec.num_points3D():
        pts = [p for _, p in sorted(rec.points3D.items(), key=lambda kv: kv[0])]  # by id: a stable order
        with np.errstate(over="ignore"):  # beyond float32's range becomes inf, refused below
            xyz = np.stack([p.xyz for p in pts]).astype(np.float32)
        bad = ~np.isfinite(xyz).all(axis=1)  # NaN, inf, or beyond float32's range
        if bad.any():
            ids = [pid for pid, b in zip(sorted(rec.points3D), bad) if b]
            raise ValueError(f"{model_file(sparse, 'points3D')}: {len(ids)} of {len(pts)} points have non-finite "
                             f"coordinates (point ids {ids[:5]}{' ...' if len(ids) > 5 else ''})")  # fmt: skip
        points = torch.from_numpy(xyz)
        colors = torch.tensor(np.stack([p.color for p in pts]), dtype=torch.float32) / 255.0
        bounds = points_bounds(points)
    return Scene.from_views(
        rgb, viewmats, Ks, torch.tensor([v.is_test for v in views]), points=points, point_colors=colors,
        background=bg, name=folder.name, alphas=alphas, image_names=[v.name for v in views],
        bounds=bounds, source={"folder": str(folder.resolve())},
    )  # fmt: skip


BOUNDS_PERCENTILE = 1.0  # the box drops this percent of the points on each side of each axis (SfM outliers)
BOUNDS_MARGIN = 0.1  # and then grows by this share of its size on each side
BOUNDS_MIN_POINTS = 20


def points_bounds(points: torch.Tensor) -> torch.Tensor | None:
    """The box [2,3] (min corner, max corner) of a sparse cloud [P,3], robust to its stray points: the
    :data:`BOUNDS_PERCENTILE` and 100 - that percentiles per axis, widened by :data:`BOUNDS_MARGIN` of the
    size on each side. None for fewer than :data:`BOUNDS_MIN_POINTS` points or a flat box."""
    if len(points) < BOUNDS_MIN_POINTS:
        return None
    q = torch.tensor([BOUNDS_PERCENTILE / 100.0, 1.0 - BOUNDS_PERCENTILE / 100.0], dtype=torch.float64)
    lo, hi = torch.quantile(points.double(), q, dim=0)
    size = hi - lo
    if not bool((size > 0).all()):
        return None
    return torch.stack([lo - BOUNDS_MARGIN * size, hi + BOUNDS_MARGIN * size]).float()


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
    cam = make_camera("PINHOLE", width, height, [K[0, 0], K[1, 1], K[0, 2], K[1, 2]])
    return write_colmap_model(sparse_dir, names, viewmats, [cam], [0] * len(names), points, colors, binary=binary)


def write_colmap_model(
    sparse_dir: str | os.PathLike[str],
    names: Sequence[str],
    viewmats: np.ndarray,
    cameras: Sequence[object],
    camera_of_image: Sequence[int],
    points: np.ndarray,
    colors: np.ndarray,
    *,
    binary: bool = True,
) -> Path:
    """Writes a COLMAP model: the ``pycolmap.Camera`` s ``cameras`` (ids 1, 2, ...), one image per name
    with its OpenCV world-to-camera pose (viewmats [V,4,4]) taken by ``cameras[camera_of_image[i]]``,
    and points [P,3] with colours [P,3] in [0,1] (no tracks)."""
    import pycolmap

    out = Path(sparse_dir)
    out.mkdir(parents=True, exist_ok=True)
    rec = pycolmap.Reconstruction()
    for c, cam in enumerate(cameras):
        rec.add_camera_with_trivial_rig(
            pycolmap.Camera(
                model=cam.model_name, width=cam.width, height=cam.height, params=cam.params, camera_id=c + 1
            )
        )
    for i, (name, vm, c) in enumerate(zip(names, np.asarray(viewmats, dtype=np.float64), camera_of_image)):
        pose = pycolmap.Rigid3d(pycolmap.Rotation3d(vm[:3, :3]), vm[:3, 3].copy())
        rec.add_image_with_trivial_frame(pycolmap.Image(name=name, camera_id=c + 1, image_id=i + 1), pose)
    rgb = np.clip(np.round(np.asarray(colors) * 255.0), 0, 255).astype(np.uint8)
    for p, c in zip(np.asarray(points, dtype=np.float64), rgb):
        rec.add_point3D(p, pycolmap.Track(), c)
    (rec.write_binary if binary else rec.write_text)(str(out))
    return out
