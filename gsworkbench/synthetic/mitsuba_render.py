"""Ground truth from Mitsuba 3 (``scalar_rgb`` only: its LLVM variants abort on these machines).

Cameras come in as OpenCV world-to-camera matrices and K; Mitsuba's camera frame has x left, y up,
z forward, so its sensor's to_world is our camera-to-world with x and y negated. Mitsuba puts pixel
centres at +0.5 like us. Rendering uses the ``direct`` integrator with hidden emitters, so a pixel's
colour is premultiplied by its coverage (alpha) and the background is transparent.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

MITSUBA_VARIANT = "scalar_rgb"
SAMPLER = "multijitter"  # stratified: far less noise than independent samples at equal spp
CV_TO_MITSUBA = np.diag([-1.0, -1.0, 1.0, 1.0])


def mitsuba_scalar() -> Any:
    try:
        import mitsuba as mi
    except ImportError as e:  # pragma: no cover - a dependency of the package
        raise ImportError("the scene generator needs Mitsuba 3: pip install mitsuba") from e
    if mi.variant() != MITSUBA_VARIANT:
        mi.set_variant(MITSUBA_VARIANT)
    return mi


def load_scene_dict(scene: dict[str, Any]) -> Any:
    """A Mitsuba scene of a description (see :mod:`gsworkbench.synthetic.mitsuba_scenes`), lit directly."""
    mi = mitsuba_scalar()
    return mi.load_dict({**scene, "integrator": {"type": "direct", "hide_emitters": True}})


def _sensor(viewmat: np.ndarray, K: np.ndarray, width: int, height: int, spp: int) -> Any:
    mi = mitsuba_scalar()
    if abs(K[0, 0] - K[1, 1]) > 1e-9 * K[0, 0] or abs(K[0, 2] - width / 2) > 1e-9 or abs(K[1, 2] - height / 2) > 1e-9:
        raise ValueError("the generator renders square-pixel pinholes with a centred principal point only")
    fov_x = float(np.degrees(2 * np.arctan(0.5 * width / K[0, 0])))
    to_world = np.linalg.inv(np.asarray(viewmat, dtype=np.float64)) @ CV_TO_MITSUBA
    return mi.load_dict(
        {
            "type": "perspective",
            "fov": fov_x,
            "fov_axis": "x",
            "to_world": mi.ScalarTransform4f(to_world.tolist()),
            "film": {
                "type": "hdrfilm",
                "width": width,
                "height": height,
                "pixel_format": "rgba",
                "rfilter": {"type": "box"},
            },
            "sampler": {"type": SAMPLER, "sample_count": spp},
        }
    )


def stratified_spp(spp: int) -> int:
    """The samples per pixel actually taken: ``spp`` rounded up to a square (a full jitter grid)."""
    return (math.isqrt(spp - 1) + 1) ** 2 if spp > 1 else 1


def render_views(
    scene: Any, viewmats: torch.Tensor, K: torch.Tensor, width: int, height: int, spp: int, seed: int
) -> Iterator[np.ndarray]:
    """Yields one linear-RGB image per view, [H,W,4] float32: colour premultiplied by alpha (coverage).

    Each pixel takes :func:`stratified_spp` (``spp`` rounded up to a square) jittered samples."""
    mi = mitsuba_scalar()
    spp = stratified_spp(spp)
    for i, vm in enumerate(viewmats.double().numpy()):
        sensor = _sensor(vm, K.double().numpy(), width, height, spp)
        img = np.array(mi.render(scene, sensor=sensor, spp=spp, seed=seed * 100003 + i), dtype=np.float32)
        yield np.nan_to_num(img, nan=0.0, posinf=0.0, neginf=0.0)


def cast_rays(scene: Any, origins: np.ndarray, directions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First surface hits of rays [R,3] (world): hit points [R,3] float64 and a hit mask [R]."""
    mi = mitsuba_scalar()
    pts = np.zeros((len(origins), 3))
    hit = np.zeros(len(origins), dtype=bool)
    for r, (o, d) in enumerate(zip(origins, directions)):
        si = scene.ray_intersect(mi.Ray3f(mi.ScalarPoint3f(*o), mi.ScalarVector3f(*d)))
        if si.is_valid():
            hit[r] = True
            pts[r] = np.array(si.p, dtype=np.float64)
    return pts, hit


def linear_to_srgb(x: np.ndarray) -> np.ndarray:
    """The sRGB transfer function on linear values in [0,1]."""
    x = np.clip(x, 0.0, 1.0)
    return np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)


def to_straight_srgba(img: np.ndarray) -> np.ndarray:
    """Premultiplied linear RGBA [H,W,4] to straight-alpha sRGB RGBA [H,W,4] in [0,1] (PNG's convention)."""
    a = np.clip(img[..., 3:], 0.0, 1.0)
    straight = np.where(a > 1e-6, img[..., :3] / np.maximum(a, 1e-6), 0.0)
    return np.concatenate([linear_to_srgb(straight), a], axis=-1).astype(np.float32)
