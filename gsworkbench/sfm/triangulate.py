"""A sparse point cloud for a posed scene that has none: SIFT features of its views, matched, and
triangulated by COLMAP with the poses and intrinsics held fixed (pycolmap's ``triangulate_points``,
what ``colmap point_triangulator`` runs).

For captures with poses but no points (instant-ngp's form, phone AR captures): training from random
points leaves them blurry, training from such a cloud does not. Only the views given are used (the
trainer passes its train views: held-out views must not shape the start). Results are cached by the
content of the images, the poses and the intrinsics in ``<scene cache>/triangulated/<key>.npz``.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gsworkbench.core.atomic import atomic_write_bytes
from gsworkbench.scenes.cache import scene_cache_dir
from gsworkbench.sfm.colmap_run import cancellable, colmap_log_level

TRIANGULATE_VERSION = 1
EXHAUSTIVE_MAX = 60  # views matched exhaustively up to this count; beyond, each with its NEIGHBOURS nearest
NEIGHBOURS = 12
MAX_REPROJ_PX = 2.0  # points whose mean reprojection error is larger are dropped


def _key(images: torch.Tensor, viewmats: torch.Tensor, Ks: torch.Tensor) -> str:
    import pycolmap

    h = hashlib.sha256(f"v{TRIANGULATE_VERSION} pycolmap {pycolmap.__version__}".encode())
    for t in (images, viewmats, Ks):
        h.update(np.ascontiguousarray(t.detach().cpu().numpy()).tobytes())
    return h.hexdigest()[:24]


def _u8(images: torch.Tensor) -> torch.Tensor:
    return (images.detach().cpu().clamp(0, 1) * 255).round().to(torch.uint8)


def _pairs(viewmats: np.ndarray, k: int) -> list[tuple[int, int]]:
    """Each view with its k nearest views by camera centre (the pairs once each)."""
    c = -np.einsum("nji,nj->ni", viewmats[:, :3, :3], viewmats[:, :3, 3])
    d = np.linalg.norm(c[:, None] - c[None], axis=-1)
    pairs = set()
    for i in range(len(c)):
        for j in np.argsort(d[i])[1 : k + 1]:
            pairs.add((min(i, int(j)), max(i, int(j))))
    return sorted(pairs)


def triangulate_views(
    images: torch.Tensor,
    viewmats: torch.Tensor,
    Ks: torch.Tensor,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """Points [P,3] (world) and colours [P,3] in [0,1] triangulated from ``images`` [V,H,W,3] in [0,1]
    seen by ``viewmats`` [V,4,4] (world-to-camera, OpenCV axes) and ``Ks`` [V,3,3] (pinhole, pixels),
    and a record {num, views, pairs, cached}. Cached (see the module docstring)."""
    if len(images) < 2:
        raise ValueError(f"triangulation needs at least 2 views, got {len(images)}")
    u8 = _u8(images)
    vm = viewmats.detach().cpu().double()
    K = Ks.detach().cpu().double()
    key = _key(u8, vm, K)
    cache = scene_cache_dir(cache_dir) / "triangulated" / f"{key}.npz"
    if cache.is_file():
        with np.load(cache) as z:
            pts, cols = torch.from_numpy(z["points"]), torch.from_numpy(z["colors"])
        return pts, cols, {"num": len(pts), "views": len(images), "cached": True}
    with colmap_log_level(2), tempfile.TemporaryDirectory(prefix="gsw-triangulate-") as tmp:
        pts, cols, pairs = _triangulate(Path(tmp), u8, vm.numpy(), K.numpy())
    buf = io.BytesIO()
    np.savez(buf, points=pts.numpy(), colors=cols.numpy())
    atomic_write_bytes(cache, buf.getvalue())
    return pts, cols, {"num": len(pts), "views": len(images), "pairs": pairs, "cached": False}


def _triangulate(tmp: Path, u8: torch.Tensor, vm: np.ndarray, K: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, int]:
    import pycolmap
    from PIL import Image

    img_dir, db = tmp / "images", tmp / "database.db"
    img_dir.mkdir()
    names = [f"view_{i:05d}.png" for i in range(len(u8))]
    for name, img in zip(names, u8.numpy()):
        Image.fromarray(img).save(img_dir / name)
    V, H, W = u8.shape[:3]
    reader = pycolmap.ImageReaderOptions()
    reader.camera_model = "PINHOLE"
    extraction = pycolmap.FeatureExtractionOptions()
    extraction.max_image_size = max(H, W)
    cancellable(pycolmap.extract_features, str(db), str(img_dir), image_names=names,
                camera_mode=pycolmap.CameraMode.PER_IMAGE, reader_options=reader, extraction_options=extraction,
                device=pycolmap.Device.cpu)  # fmt: skip
    # the database's cameras take the known intrinsics; the model uses the database's ids
    rec = pycolmap.Reconstruction()
    with pycolmap.Database.open(str(db)) as d:
        by_name = {im.name: im for im in d.read_all_images()}
        for i, name in enumerate(names):
            im = by_name[name]
            cam = d.read_camera(im.camera_id)
            cam.model = pycolmap.CameraModelId.PINHOLE
            cam.params = [K[i, 0, 0], K[i, 1, 1], K[i, 0, 2], K[i, 1, 2]]
            d.update_camera(cam)
            rec.add_camera_with_trivial_rig(cam)
            pose = pycolmap.Rigid3d(pycolmap.Rotation3d(vm[i, :3, :3]), vm[i, :3, 3].copy())
            rec.add_image_with_trivial_frame(pycolmap.Image(name=name, camera_id=im.camera_id,
                                                            image_id=im.image_id), pose)  # fmt: skip
    matching = pycolmap.FeatureMatchingOptions()
    if V <= EXHAUSTIVE_MAX:
        cancellable(pycolmap.match_exhaustive, str(db), matching_options=matching, device=pycolmap.Device.cpu)
        n_pairs = V * (V - 1) // 2
    else:
        pairs = _pairs(vm, NEIGHBOURS)
        listing = tmp / "pairs.txt"
        listing.write_text("".join(f"{names[a]} {names[b]}\n" for a, b in pairs))
        pairing = pycolmap.ImportedPairingOptions()
        pairing.match_list_path = listing
        cancellable(pycolmap.match_image_pairs, str(db), matching_options=matching, pairing_options=pairing,
                    device=pycolmap.Device.cpu)  # fmt: skip
        n_pairs = len(pairs)
    out = tmp / "model"
    out.mkdir()
    tri = cancellable(pycolmap.triangulate_points, rec, str(db), str(img_dir), str(out))
    tri.extract_colors_for_all_images(str(img_dir))
    pts, cols = [], []
    for p in tri.points3D.values():
        if p.error <= MAX_REPROJ_PX and np.all(np.isfinite(p.xyz)):
            pts.append(p.xyz)
            cols.append(p.color)
    shutil.rmtree(img_dir, ignore_errors=True)
    points = torch.tensor(np.array(pts, dtype=np.float32).reshape(-1, 3))
    colors = torch.tensor(np.array(cols, dtype=np.float32).reshape(-1, 3) / 255.0)
    return points, colors, n_pairs
