"""What the widget and the standalone page share: the inputs they accept, the bytes they send to the
browser, the cameras, and the browser bundle.

Cameras are the rasterizer's: a world-to-camera ``viewmat`` [4,4] in OpenCV axes (x right, y down,
z forward) and a pinhole ``K`` [3,3] in pixels for a ``width`` x ``height`` image; the browser maps
them exactly onto its three.js camera (``js/viewer.js``). On the wire a camera is a dict of
row-major lists: ``{"viewmat": 16 numbers, "K": 9 numbers, "width": int, "height": int}``.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from gsworkbench.core.cameras import intrinsics_from_fov, look_at
from gsworkbench.core.splats import SplatSet
from gsworkbench.io.dotsplat import encode_splat
from gsworkbench.io.ply import write_ply
from gsworkbench.io.read import read_splats
from gsworkbench.io.spz import encode_spz

BUNDLE = Path(__file__).resolve().parent / "static" / "viewer.js"
BUNDLE_MISSING = (
    "gsworkbench viewer: its browser bundle was not built (Node.js was missing at set-up); "
    "install Node.js 20+ and run `make setup`"
)
# "ply": float32, lossless, 248 bytes a splat at SH degree 3; "spz": about a sixth of that at SH degree 3
# (about 40 bytes a splat for a trained scene: docs/viewer.md), quantised (gsworkbench.io.spz states how
# finely); "splat": 32 bytes a splat, no view-dependent colour
ENCODINGS = ("ply", "spz", "splat")
DEFAULT_SIZE = (960, 540)


def bundle_built() -> bool:
    """Whether the browser bundle was built (``make setup`` with Node.js); without it the widget shows a
    one-line notice and :func:`~gsworkbench.viewer.save_viewer_html` raises RuntimeError."""
    return BUNDLE.is_file()


def bundle_source() -> str | None:
    """The browser bundle (one ES module: the renderer and the viewer), or None when it was not built."""
    return BUNDLE.read_text(encoding="utf-8") if BUNDLE.is_file() else None


def as_splats(source: Any) -> SplatSet:
    """A SplatSet from a SplatSet, a splat file (``.ply``, ``.spz``, ``.splat``; a run folder: its
    ``splats.ply``), or a training result (anything with ``splats``: a TrainResult's SplatSet, or a
    Trainer's ``splats()`` method). A file with no splats is refused (ValueError naming it): there is
    nothing to show."""
    if isinstance(source, SplatSet):
        return source
    if isinstance(source, (str, os.PathLike)):
        splats = read_splats(source)
        if len(splats) == 0:
            raise ValueError(f"{source}: holds no splats (0 vertices), nothing to show")
        return splats
    splats = getattr(source, "splats", None)
    if callable(splats):
        splats = splats()
    if isinstance(splats, SplatSet):
        return splats
    raise ValueError(
        f"expected a SplatSet, a PLY path or a training result (with .splats), got {type(source).__name__}"
    )


def encode_splats(splats: SplatSet, encoding: str = "ply") -> bytes:
    """The bytes the browser loads: an Inria PLY (``"ply"``), a ``.spz`` or a ``.splat`` file."""
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    if encoding == "spz":
        return encode_spz(splats)
    if encoding == "splat":
        return encode_splat(splats)
    with tempfile.TemporaryDirectory(prefix="gsw-view-") as tmp:
        path = write_ply(Path(tmp) / "splats.ply", splats.to(torch.float32))
        return path.read_bytes()


def scene_center(splats: SplatSet) -> list[float]:
    """The median of the splats' means [3] (an orbit centre robust to far-away floaters)."""
    if len(splats) == 0:
        return [0.0, 0.0, 0.0]
    return splats.means.detach().to("cpu", torch.float64).median(dim=0).values.tolist()


def camera_dict(viewmat: Any, K: Any, width: int, height: int) -> dict[str, Any]:
    """The wire form of a camera, checked: viewmat [4,4] rigid (last row 0 0 0 1), K [3,3] with
    positive focal lengths, width and height positive pixels."""
    v = torch.as_tensor(viewmat, dtype=torch.float64).detach().cpu()
    k = torch.as_tensor(K, dtype=torch.float64).detach().cpu()
    if v.shape != (4, 4) or k.shape != (3, 3):
        raise ValueError(f"viewmat must be [4,4] and K [3,3], got {list(v.shape)} and {list(k.shape)}")
    if not (torch.isfinite(v).all() and torch.isfinite(k).all()):
        raise ValueError("viewmat and K must be finite")
    R = v[:3, :3]
    if not torch.allclose(v[3], torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64), atol=1e-6) or not (
        torch.allclose(R @ R.T, torch.eye(3, dtype=torch.float64), atol=1e-4) and torch.det(R) > 0
    ):
        raise ValueError("viewmat must be a rigid world-to-camera transform (rotation and translation)")
    if not (k[0, 0] > 0 and k[1, 1] > 0) or not torch.equal(k[2], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)):
        raise ValueError(f"K must be a pinhole [[fx, s, cx], [0, fy, cy], [0, 0, 1]] with fx, fy > 0, got {k.tolist()}")
    if int(width) <= 0 or int(height) <= 0:
        raise ValueError(f"width and height must be positive pixels, got {width}x{height}")
    return {"viewmat": v.reshape(-1).tolist(), "K": k.reshape(-1).tolist(), "width": int(width), "height": int(height)}


def camera_tensors(camera: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """(viewmat [4,4], K [3,3]) float32 tensors of a wire camera, as ``rasterize`` takes them (one view)."""
    viewmat = torch.tensor(camera["viewmat"], dtype=torch.float64).reshape(4, 4)
    K = torch.tensor(camera["K"], dtype=torch.float64).reshape(3, 3)
    return viewmat.to(torch.float32), K.to(torch.float32)


def default_camera(
    splats: SplatSet, width: int, height: int, fov_x_deg: float = 60.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """A view of the whole set: from the centre's -z side, tilted down, far enough that the middle 90%
    of the splats fit the field of view (z up, as the built-in scenes)."""
    center = torch.tensor(scene_center(splats), dtype=torch.float64)
    if len(splats):
        d = (splats.means.detach().to("cpu", torch.float64) - center).norm(dim=-1)
        radius = float(torch.quantile(d[: 1 << 20], 0.9)) or 1.0
    else:
        radius = 1.0
    distance = radius / math.tan(math.radians(fov_x_deg) / 2 * min(1.0, height / width)) + radius
    eye = center + distance * torch.tensor([0.0, -math.cos(0.35), math.sin(0.35)], dtype=torch.float64)
    return look_at(eye, center), intrinsics_from_fov(width, height, fov_x_deg)


def checked_rgb(background: Any) -> list[float]:
    """``background`` as 3 floats in [0, 1]; ValueError otherwise."""
    rgb = [float(c) for c in background]
    if len(rgb) != 3 or not all(0.0 <= c <= 1.0 for c in rgb):
        raise ValueError(f"background must be 3 numbers in [0, 1], got {background}")
    return rgb


def checked_up(up: Any) -> list[float]:
    """``up`` as a unit 3-vector (the orbit's axis); ValueError for another shape, or a zero or
    non-finite vector."""
    v = torch.as_tensor(up, dtype=torch.float64).detach().cpu().reshape(-1)
    if v.shape != (3,) or not torch.isfinite(v).all() or float(v.norm()) == 0.0:
        raise ValueError(f"up must be a nonzero finite 3-vector, got {up}")
    return (v / v.norm()).tolist()


def camera_up(viewmat: Any) -> list[float]:
    """A camera's up direction in world coordinates [3]: its -y axis (OpenCV axes: y points down)."""
    v = torch.as_tensor(viewmat, dtype=torch.float64).detach().cpu()
    return (-v[1, :3]).tolist()


def scene_up(scene: Any) -> list[float]:
    """The scene's up axis [3] (unit length, world coordinates), the orbit's axis. People hold cameras
    upright (and the built-in scenes' cameras are upright about +z), so each camera's x axis is
    horizontal however it tilts: the up axis is the direction closest to perpendicular to all of them
    (least squares), on the side of the cameras' mean up. Where the x axes leave that direction open
    (one camera, or all facing one way), the mean of the cameras' up directions."""
    v = torch.as_tensor(scene.viewmats, dtype=torch.float64).detach().cpu()
    mean_up = (-v[:, 1, :3]).mean(dim=0)
    right = v[:, 0, :3]
    values, vectors = torch.linalg.eigh(right.T @ right / len(right))
    if float(values[1] - values[0]) > 0.1 * float(values[2]):
        up = vectors[:, 0] * (1.0 if float(vectors[:, 0] @ mean_up) >= 0 else -1.0)
    elif float(mean_up.norm()) > 1e-3:
        up = mean_up
    else:
        up = -v[0, 1, :3]
    return (up / up.norm()).tolist()


def scene_views(scene: Any) -> list[dict[str, Any]]:
    """The wire cameras of a Scene's views with their ``index`` and ``name`` (``train 3`` / ``test 0:
    image name``), train views first."""
    names = list(getattr(scene, "image_names", []) or [])
    out = []
    for split in ("train", "test"):
        for i in getattr(scene, f"{split}_ids").tolist():
            label = f"{split} {i}" + (f": {names[i]}" if i < len(names) else "")
            out.append(
                {"name": label, "index": i, **camera_dict(scene.viewmats[i], scene.Ks[i], scene.width, scene.height)}
            )
    return out
