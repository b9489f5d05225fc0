"""Reconstructed poses against known ones: a similarity alignment, then per-image errors.

A reconstruction fixes poses only up to a similarity (rotation, translation, scale). Centres: the
recovered camera centres are aligned to the true ones by the least-squares similarity of Umeyama
(1991), and each centre's error is its distance after alignment as a fraction of the true cameras'
extent (the largest distance of a true centre from their mean). Orientations: the world rotation that
best maps the recovered orientations onto the true ones (the chordal L2 mean of R_est_i^T R_true_i,
projected onto SO(3)) is taken out, and each image's rotation error is the angle left (degrees). Taking
the world rotation from the orientations themselves keeps small errors of the centres (which for
cameras on an arc pin the rotation loosely) out of the rotation errors. Focal lengths are compared in
percent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


def umeyama(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The similarity (s, R [3,3], t [3]) minimising sum |s R src_i + t - dst_i|^2 over points [N,3]
    (N >= 3, not collinear)."""
    src, dst = np.asarray(src, dtype=np.float64), np.asarray(dst, dtype=np.float64)
    if src.shape != dst.shape or src.ndim != 2 or src.shape[1] != 3 or len(src) < 3:
        raise ValueError(f"umeyama needs two [N,3] point sets with N >= 3, got {src.shape} and {dst.shape}")
    mu_s, mu_d = src.mean(0), dst.mean(0)
    xs, xd = src - mu_s, dst - mu_d
    cov = xd.T @ xs / len(src)
    U, S, Vt = np.linalg.svd(cov)
    D = np.eye(3)
    if np.linalg.det(U) * np.linalg.det(Vt) < 0:
        D[2, 2] = -1.0
    R = U @ D @ Vt
    var_s = (xs**2).sum() / len(src)
    s = float(np.trace(np.diag(S) @ D) / var_s) if var_s > 0 else 1.0
    return s, R, mu_d - s * R @ mu_s


def rotation_angle_deg(R: np.ndarray) -> np.ndarray:
    """The rotation angle (degrees) of each rotation matrix R [...,3,3], as atan2(sin, cos) (arccos of
    the trace alone loses small angles to rounding)."""
    cos = (np.trace(R, axis1=-2, axis2=-1) - 1.0) / 2.0
    skew = R - np.swapaxes(R, -1, -2)
    sin = np.linalg.norm(skew.reshape(*skew.shape[:-2], 9), axis=-1) / (2.0 * np.sqrt(2.0))
    return np.degrees(np.arctan2(sin, cos))


@dataclass(frozen=True)
class PoseErrors:
    """Per-image errors of the images both sets name: ``names``, ``rotation_deg`` [N], ``centre``
    [N] (fraction of the true extent), and the alignment's scale."""

    names: list[str]
    rotation_deg: np.ndarray
    centre: np.ndarray
    scale: float

    def summary(self) -> dict[str, float]:
        return {
            "images_compared": len(self.names),
            "rotation_median_deg": float(np.median(self.rotation_deg)),
            "rotation_max_deg": float(np.max(self.rotation_deg)),
            "centre_median_pct": 100.0 * float(np.median(self.centre)),
            "centre_max_pct": 100.0 * float(np.max(self.centre)),
        }


def pose_errors(estimated: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray]) -> PoseErrors:
    """Errors of the world-to-camera matrices ``estimated`` [4,4] (or [3,4]) against ``truth``, both by
    image name, after aligning the estimated centres to the true ones (see the module docstring)."""
    names = sorted(set(estimated) & set(truth))
    if len(names) < 3:
        raise ValueError(f"pose errors need at least 3 images in both sets, got {len(names)} in common")
    Re = np.stack([np.asarray(estimated[n], dtype=np.float64)[:3, :3] for n in names])
    te = np.stack([np.asarray(estimated[n], dtype=np.float64)[:3, 3] for n in names])
    Rt = np.stack([np.asarray(truth[n], dtype=np.float64)[:3, :3] for n in names])
    tt = np.stack([np.asarray(truth[n], dtype=np.float64)[:3, 3] for n in names])
    ce = -np.einsum("nji,nj->ni", Re, te)  # centres: -R^T t
    ct = -np.einsum("nji,nj->ni", Rt, tt)
    s, R, t = umeyama(ce, ct)
    aligned = s * ce @ R.T + t
    extent = float(np.linalg.norm(ct - ct.mean(0), axis=1).max())
    # Rt_i = Re_i W for the world rotation W that maps true-world to estimate-world directions
    U, _, Vt = np.linalg.svd(np.einsum("nji,njk->ik", Re, Rt))
    W = U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt
    rot = rotation_angle_deg(Rt @ np.transpose(Re @ W, (0, 2, 1)))
    centre = np.linalg.norm(aligned - ct, axis=1) / max(extent, 1e-12)
    return PoseErrors(names, rot, centre, s)


def model_poses(rec: Any) -> dict[str, np.ndarray]:
    """The world-to-camera matrices [3,4] of a ``pycolmap.Reconstruction``'s registered images by name."""
    return {
        im.name: np.asarray(im.cam_from_world().matrix(), dtype=np.float64) for im in rec.images.values() if im.has_pose
    }


def focal_error_pct(estimated: Any, truth: Any) -> float:
    """The error (percent) of a camera's mean focal length against the true camera's (pycolmap Cameras,
    the estimate rescaled to the true width)."""
    fe = float(np.mean([estimated.focal_length_x, estimated.focal_length_y])) * truth.width / estimated.width
    ft = float(np.mean([truth.focal_length_x, truth.focal_length_y]))
    return 100.0 * (fe - ft) / ft
