"""Surface points of a Mitsuba scene as the generators sample them (rays cast through covered pixels of
the train views), and the generators' stage timings. Shared by the built-in scenes' writers
(:mod:`gsworkbench.synthetic.generate`, :mod:`gsworkbench.synthetic.simulated_capture`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from gsworkbench.synthetic.mitsuba_render import cast_rays


def sample_surface_points(
    mi_scene: Any,
    viewmats: torch.Tensor,
    K: torch.Tensor,
    images: list[np.ndarray],
    n_points: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """n_points surface points seen by the given views (spread evenly over them) and the straight sRGB
    colour of the pixel each was seen through: [P,3] world points, [P,3] colours in [0,1]."""
    pts, cols = [], []
    K_inv = np.linalg.inv(K.double().numpy())
    quotas = np.diff(np.round(np.linspace(0, n_points, len(images) + 1)).astype(int))
    for vm, img, quota in zip(viewmats.double().numpy(), images, quotas):
        H, W = img.shape[:2]
        R, t = vm[:3, :3], vm[:3, 3]
        centre = -R.T @ t
        found = 0
        for _ in range(8):  # rounds of candidate rays until the quota is met
            if found >= quota:
                break
            uv = rng.uniform(0, 1, size=(4 * (quota - found) + 16, 2)) * [W, H]
            px = np.minimum(uv.astype(int), [W - 1, H - 1])
            covered = img[px[:, 1], px[:, 0], 3] > 0.5
            uv, px = uv[covered], px[covered]
            dirs = (np.c_[uv, np.ones(len(uv))] @ K_inv.T) @ R  # (R^T d_cam) per row
            dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
            hits, ok = cast_rays(mi_scene, np.broadcast_to(centre, dirs.shape), dirs)
            take = np.flatnonzero(ok)[: quota - found]
            pts.append(hits[take])
            cols.append(img[px[take, 1], px[take, 0], :3])
            found += len(take)
    if not pts:
        return np.zeros((0, 3)), np.zeros((0, 3))
    return np.concatenate(pts), np.concatenate(cols)


def stage_seconds(t0: float, t_load: float, t_render: float, t_points: float) -> dict[str, float]:
    """The manifest's timings (seconds) of a generation that started at ``t0`` (``time.perf_counter``)."""
    return {"scene_load": t_load - t0, "render": t_render - t_load, "points": t_points - t_render,
            "total": time.perf_counter() - t0}  # fmt: skip
