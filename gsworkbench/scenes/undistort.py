"""Undistortion of distorted views to pinholes, with COLMAP's undistorter (pycolmap), cached.

``pycolmap.undistort_image`` is what ``colmap image_undistorter`` runs: it picks the pinhole (same focal
lengths, a size and principal point such that no pixel is blank, scaled within [0.2, 2]) and resamples
bilinearly. So a view undistorted here matches one that COLMAP's undistorter wrote, pixel sizes a few
apart between cameras included.

The undistorter works on 8-bit images: files are read as 8 bits per channel for it (16-bit sources are
rounded). An alpha channel is undistorted as a second, grey image through the same camera.

Results are cached by the content of the inputs (the image file's bytes, the camera model, size and
parameters, this module's version and pycolmap's) in ``<scene cache>/undistorted/`` (the scene cache is
``$GSW_SCENE_CACHE``, default ``~/.cache/gsworkbench/scenes``), one ``.npz`` per view written to a
temporary file and renamed into place, so an interrupted load leaves no entry.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gsworkbench.core.atomic import atomic_writer
from gsworkbench.scenes.cache import scene_cache_dir
from gsworkbench.scenes.lens import make_camera, pinhole_K

UNDISTORT_VERSION = 1


def undistort_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<cache_dir>/undistorted``, the scene cache's by default (see :func:`scene_cache_dir`)."""
    return scene_cache_dir(cache_dir) / "undistorted"


def undistort_array(image: np.ndarray, cam: Any) -> tuple[np.ndarray, Any]:
    """Undistorts ``image`` [H,W,C] float32 in [0,1] (C = 3 or 4, H x W = the camera's size) taken by
    ``cam``: the pinhole image [h,w,C] float32 and its ``PINHOLE`` camera."""
    import pycolmap

    H, W, C = image.shape
    if (W, H) != (cam.width, cam.height):
        raise ValueError(f"image is {W}x{H} but its {cam.model_name} camera is {cam.width}x{cam.height}")
    u8 = np.round(np.clip(image, 0.0, 1.0) * 255.0).astype(np.uint8)
    options = pycolmap.UndistortCameraOptions()
    rgb, pinhole = pycolmap.undistort_image(options, pycolmap.Bitmap.from_array(np.ascontiguousarray(u8[..., :3])), cam)
    planes = [np.asarray(rgb.to_array()).reshape(pinhole.height, pinhole.width, 3)]
    if C == 4:
        alpha, _ = pycolmap.undistort_image(options, pycolmap.Bitmap.from_array(np.ascontiguousarray(u8[..., 3])), cam)
        planes.append(np.asarray(alpha.to_array()).reshape(pinhole.height, pinhole.width, 1))
    out = np.concatenate(planes, axis=2).astype(np.float32) / 255.0
    return out, make_camera("PINHOLE", pinhole.width, pinhole.height, list(pinhole.params))


def cache_key(image_file: Path, cam: Any) -> str:
    """The hash of everything an undistorted view depends on."""
    import pycolmap

    h = hashlib.sha256()
    with open(image_file, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    meta = {
        "model": cam.model_name,
        "size": [int(cam.width), int(cam.height)],
        "params": [float(p).hex() for p in cam.params],
        "version": UNDISTORT_VERSION,
        "pycolmap": pycolmap.__version__,
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()[:32]


def undistorted_view(
    image_file: Path, cam: Any, read: Callable[[], np.ndarray], cache_dir: str | os.PathLike[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The undistorted image [h,w,C] float32 and its K [3,3] float64 (pixels) of the view in
    ``image_file`` taken by ``cam`` (already fitted to the file's size); ``read()`` decodes the file
    (called only when the cache has no entry)."""
    entry = undistort_cache_dir(cache_dir) / f"{cache_key(image_file, cam)}.npz"
    if entry.is_file():
        try:
            with np.load(entry) as z:
                return z["image"].astype(np.float32) / 255.0, z["K"].astype(np.float64)
        except (OSError, KeyError, ValueError, zipfile.BadZipFile):
            pass  # a damaged entry: computed and written again
    image, pinhole = undistort_array(read(), cam)
    K = pinhole_K(pinhole)
    buf = io.BytesIO()
    np.savez_compressed(buf, image=np.round(image * 255.0).astype(np.uint8), K=K)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(entry) as f:
        f.write(buf.getvalue())
    return image, K
