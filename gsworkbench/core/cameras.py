"""Pinhole camera helpers: world-to-camera matrices and intrinsics in the gsplat / OpenCV convention.

Camera space: x right, y down, z forward (the viewing direction); a viewmat [4,4] maps world points
to camera space (``p_cam = R p_world + t``); K = [[fx,0,cx],[0,fy,cy],[0,0,1]] in pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def look_at(
    eye: Sequence[float] | torch.Tensor,
    target: Sequence[float] | torch.Tensor = (0.0, 0.0, 0.0),
    up: Sequence[float] | torch.Tensor = (0.0, 0.0, 1.0),
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """World-to-camera matrix [4,4] of a camera at ``eye`` looking at ``target`` (world ``up``), on
    ``device`` (default: ``eye``'s device when it is a tensor, else the CPU)."""
    dev = eye.device if isinstance(eye, torch.Tensor) else None
    eye_t = torch.as_tensor(eye, dtype=torch.float64, device=dev)
    fwd = torch.as_tensor(target, dtype=torch.float64, device=dev) - eye_t
    if float(fwd.norm()) < 1e-12:
        raise ValueError("look_at: eye and target coincide")
    fwd = fwd / fwd.norm()
    up_t = torch.as_tensor(up, dtype=torch.float64, device=dev)
    right = torch.linalg.cross(fwd, up_t)
    if float(right.norm()) < 1e-9:  # looking along up: pick another up
        right = torch.linalg.cross(fwd, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64, device=dev))
    right = right / right.norm()
    down = torch.linalg.cross(fwd, right)
    R = torch.stack([right, down, fwd])  # rows: camera axes in world coordinates
    out = torch.eye(4, dtype=torch.float64, device=dev)
    out[:3, :3] = R
    out[:3, 3] = -R @ eye_t
    return out.to(device=device if device is not None else dev, dtype=dtype)


def intrinsics_from_fov(
    width: int,
    height: int,
    fov_x_deg: float = 60.0,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """K [3,3] on ``device`` (default CPU) with horizontal field of view ``fov_x_deg``, square pixels,
    centred principal point."""
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if not 0.0 < fov_x_deg < 180.0:
        raise ValueError(f"fov_x_deg must be in (0, 180), got {fov_x_deg}")
    f = 0.5 * width / math.tan(math.radians(fov_x_deg) / 2)
    return torch.tensor([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]], dtype=dtype, device=device)


def orbit_eye(azimuth_deg: float, elevation_deg: float, distance: float) -> tuple[float, float, float]:
    """Position on a sphere around the origin (z up): azimuth from +x, elevation from the xy plane."""
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    return (
        distance * math.cos(el) * math.cos(az),
        distance * math.cos(el) * math.sin(az),
        distance * math.sin(el),
    )


def orbit_cameras(
    num: int,
    width: int,
    height: int,
    *,
    distance: float = 3.0,
    elevation_deg: float = 20.0,
    fov_x_deg: float = 60.0,
    target: Sequence[float] = (0.0, 0.0, 0.0),
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``num`` cameras evenly spaced in azimuth around ``target``: viewmats [num,4,4], Ks [num,3,3], on
    ``device`` (default CPU)."""
    if num <= 0:
        raise ValueError(f"num must be positive, got {num}")
    views = []
    for i in range(num):
        ex, ey, ez = orbit_eye(360.0 * i / num, elevation_deg, distance)
        views.append(look_at((ex + target[0], ey + target[1], ez + target[2]), target, dtype=dtype, device=device))
    K = intrinsics_from_fov(width, height, fov_x_deg, dtype=dtype, device=device)
    return torch.stack(views), K.expand(num, 3, 3).clone()


def camera_points(points: torch.Tensor, viewmats: torch.Tensor) -> torch.Tensor:
    """World points [P,3] in each camera's space, [C,P,3] (``R p + t`` of viewmats [C,4,4]; in the
    points' dtype)."""
    R, t = viewmats[:, :3, :3].to(points.dtype), viewmats[:, :3, 3].to(points.dtype)
    return torch.einsum("cij,pj->cpi", R, points) + t[:, None, :]


def pixel_coordinates(cam: torch.Tensor, Ks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel coordinates x, y [C,P] of camera-space points [C,P,3] through intrinsics Ks [C,3,3] (pixel
    i covers [i, i+1)); points at or behind the camera's plane get finite values to be masked out."""
    K = Ks.to(cam.dtype)
    z = cam[..., 2].clamp_min(1e-12)
    x = K[:, 0, 0, None] * cam[..., 0] / z + K[:, 0, 2, None]
    y = K[:, 1, 1, None] * cam[..., 1] / z + K[:, 1, 2, None]
    return x, y
