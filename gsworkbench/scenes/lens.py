"""Camera models of the loaders: COLMAP's, and the transforms.json keys of nerfstudio and instant-ngp.

Every camera is a ``pycolmap.Camera`` (model name, width, height, params in COLMAP's order, pixels with
the centre of pixel i at i + 0.5). The models the loaders accept:

- pinholes, used as they are: ``SIMPLE_PINHOLE`` (f, cx, cy), ``PINHOLE`` (fx, fy, cx, cy);
- distorted ones, undistorted to a pinhole once (:mod:`gsworkbench.scenes.undistort`):
  ``SIMPLE_RADIAL`` (f, cx, cy, k), ``RADIAL`` (f, cx, cy, k1, k2), ``OPENCV`` (fx, fy, cx, cy, k1,
  k2, p1, p2), ``FULL_OPENCV`` (+ k3, k4, k5, k6: OpenCV's rational model), ``OPENCV_FISHEYE`` (fx,
  fy, cx, cy, k1..k4: equidistant), and the fisheye ``SIMPLE_RADIAL_FISHEYE`` / ``RADIAL_FISHEYE``.

Any other model is a ValueError naming it and the file it came from.

transforms.json keys (file level, or per frame where a frame overrides them): ``camera_model``
(``OPENCV``, ``OPENCV_FISHEYE``, ``PINHOLE``, ``SIMPLE_PINHOLE``; absent: instant-ngp's rule, a lens
with any non-zero k/p coefficient, fisheye when ``is_fisheye``), ``fl_x``/``fl_y`` in pixels (or
``camera_angle_x``/``camera_angle_y`` in radians), ``cx``/``cy`` (default: the image centre), ``w``/``h``
(the size the intrinsics refer to; default: the image's), ``k1``..``k4``, ``p1``, ``p2``. For OPENCV, k3
is the r^6 radial term (FULL_OPENCV with k4..k6 = 0) and k4 must be 0; for OPENCV_FISHEYE, p1 and p2
must be 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

PINHOLE_MODELS = ("SIMPLE_PINHOLE", "PINHOLE")
DISTORTED_MODELS = (
    "SIMPLE_RADIAL",
    "RADIAL",
    "OPENCV",
    "FULL_OPENCV",
    "OPENCV_FISHEYE",
    "SIMPLE_RADIAL_FISHEYE",
    "RADIAL_FISHEYE",
)
SUPPORTED_MODELS = PINHOLE_MODELS + DISTORTED_MODELS
JSON_MODELS = ("OPENCV", "OPENCV_FISHEYE", "PINHOLE", "SIMPLE_PINHOLE")
UNSUPPORTED_JSON_LENSES = ("ftheta_p0", "latlong", "equirectangular")


def make_camera(model: str, width: int, height: int, params: list[float]) -> Any:
    """A ``pycolmap.Camera`` (params in COLMAP's order for ``model``, pixels)."""
    import pycolmap

    return pycolmap.Camera(model=model, width=int(width), height=int(height), params=[float(p) for p in params])


def copy_camera(cam: Any) -> Any:
    """An independent copy of a ``pycolmap.Camera``."""
    return make_camera(cam.model_name, cam.width, cam.height, list(cam.params))


def check_camera(cam: Any, where: str) -> None:
    """ValueError naming ``where`` (the file, and the camera in it) for a model the loaders do not
    handle, or for non-finite or non-positive focal lengths."""
    if cam.model_name not in SUPPORTED_MODELS:
        raise ValueError(
            f"{where} uses the {cam.model_name} camera model, which the loaders cannot undistort; supported: "
            f"{', '.join(SUPPORTED_MODELS)}"
        )
    params = np.asarray(cam.params, dtype=np.float64)
    if not np.isfinite(params).all():
        raise ValueError(f"{where}: the {cam.model_name} camera has non-finite parameters {params.tolist()}")
    if (params[list(cam.focal_length_idxs())] <= 0).any():
        raise ValueError(f"{where}: the {cam.model_name} camera has a focal length <= 0 ({params.tolist()})")
    if cam.width < 1 or cam.height < 1:
        raise ValueError(f"{where}: the camera size {cam.width}x{cam.height} is not positive")


def fit_to_image(cam: Any, width: int, height: int, image: Path, where: str) -> Any:
    """``cam`` rescaled to an image file of ``width`` x ``height`` pixels (a downsampled copy, e.g. in an
    ``images_2`` folder): focal lengths and principal point scale per axis. ValueError naming the image
    when its aspect ratio differs from the camera's by more than a pixel of rounding."""
    if (width, height) == (cam.width, cam.height):
        return cam
    if abs(width * cam.height - height * cam.width) > max(cam.width, cam.height):
        raise ValueError(
            f"image {image} is {width}x{height}, but {where} gives {cam.width}x{cam.height}: the aspect "
            "ratios differ, so the image is not a rescaled copy of what the camera describes"
        )
    out = copy_camera(cam)
    out.rescale(int(width), int(height))
    return out


def pinhole_K(cam: Any) -> np.ndarray:
    """K [3,3] float64 (pixels) of a SIMPLE_PINHOLE or PINHOLE camera."""
    if cam.model_name not in PINHOLE_MODELS:
        raise ValueError(f"pinhole_K needs a pinhole camera, got {cam.model_name}")
    return np.asarray(cam.calibration_matrix(), dtype=np.float64).copy()


def number(value: Any, key: str, where: str, *, positive: bool = False) -> float:
    """``value`` as a finite float (positive if asked); ValueError naming ``key`` and ``where`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {key} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or (positive and v <= 0):
        raise ValueError(f"{where}: {key} must be a finite{' positive' if positive else ''} number, got {value!r}")
    return v


def camera_from_json(get: Callable[[str], Any], image_size: Callable[[], tuple[int, int]], where: str) -> Any:
    """The camera of one transforms.json frame. ``get(key)`` looks a key up (the frame first, then the
    file), ``image_size()`` gives the image's (W, H) for absent ``w``/``h``; ``where`` names the file
    and frame in errors. See the module docstring for the keys."""
    for key in UNSUPPORTED_JSON_LENSES:
        if get(key) is not None:
            raise ValueError(f"{where}: the {key} lens is not supported (only pinhole, OPENCV and OPENCV_FISHEYE)")
    w, h = get("w"), get("h")
    if w is None or h is None:
        W_img, H_img = image_size()
        w = W_img if w is None else w
        h = H_img if h is None else h
    w = number(w, "w", where, positive=True)
    h = number(h, "h", where, positive=True)
    if w != int(w) or h != int(h):
        raise ValueError(f"{where}: w and h must be whole pixel counts, got {w} x {h}")

    def focal(fl_key: str, angle_key: str, size: float) -> float | None:
        if get(fl_key) is not None:
            return number(get(fl_key), fl_key, where, positive=True)
        if get(angle_key) is None:
            return None
        angle = number(get(angle_key), angle_key, where)
        if not 0.0 < angle < math.pi:
            raise ValueError(f"{where}: {angle_key} must be in (0, pi) radians, got {angle}")
        return 0.5 * size / math.tan(0.5 * angle)

    fx = focal("fl_x", "camera_angle_x", w)
    if fx is None:
        raise ValueError(f"{where} gives neither camera_angle_x nor fl_x")
    fy = focal("fl_y", "camera_angle_y", h) or fx
    cx = w / 2 if get("cx") is None else number(get("cx"), "cx", where)
    cy = h / 2 if get("cy") is None else number(get("cy"), "cy", where)
    d = {k: 0.0 if get(k) is None else number(get(k), k, where) for k in ("k1", "k2", "k3", "k4", "p1", "p2")}
    model = get("camera_model")
    if model is None:
        fisheye = bool(get("is_fisheye"))
        model = "OPENCV_FISHEYE" if fisheye else ("OPENCV" if any(d.values()) else "PINHOLE")
    if model not in JSON_MODELS:
        raise ValueError(f"{where}: camera_model {model!r} is not supported (supported: {', '.join(JSON_MODELS)})")
    if model in PINHOLE_MODELS:
        given = {k: v for k, v in d.items() if v}
        if given:
            raise ValueError(f"{where}: camera_model {model} has no distortion, but the file gives {given}")
        return make_camera("PINHOLE", int(w), int(h), [fx, fy, cx, cy])
    if model == "OPENCV_FISHEYE":
        if d["p1"] or d["p2"]:
            raise ValueError(f"{where}: OPENCV_FISHEYE has no tangential terms, but p1/p2 are non-zero")
        return make_camera(model, int(w), int(h), [fx, fy, cx, cy, d["k1"], d["k2"], d["k3"], d["k4"]])
    if d["k4"]:
        raise ValueError(f"{where}: k4 = {d['k4']} is not supported with camera_model OPENCV (k1, k2, k3, p1, p2 are)")
    base = [fx, fy, cx, cy, d["k1"], d["k2"], d["p1"], d["p2"]]
    if d["k3"]:
        return make_camera("FULL_OPENCV", int(w), int(h), [*base, d["k3"], 0.0, 0.0, 0.0])
    return make_camera("OPENCV", int(w), int(h), base)
