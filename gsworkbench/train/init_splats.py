"""Initial splats for training: from a scene's point cloud, or random points in its extent."""

from __future__ import annotations

import numpy as np
import torch

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet


def knn_mean_distance(points: torch.Tensor, k: int = 3) -> torch.Tensor:
    """Root mean squared distance of each point [P,3] to its k nearest other points, [P]."""
    from scipy.spatial import cKDTree

    pts = points.detach().cpu().double().numpy()
    if len(pts) < 2:
        return torch.ones(len(pts), dtype=points.dtype)
    kk = min(k + 1, len(pts))
    d, _ = cKDTree(pts).query(pts, k=kk)
    d = np.asarray(d).reshape(len(pts), kk)[:, 1:]
    return torch.from_numpy(np.sqrt((d**2).mean(-1))).to(points.dtype)


def init_splats(
    points: torch.Tensor | None,
    colors: torch.Tensor | None,
    *,
    num: int | None,
    random_num: int,
    extent: float,
    opacity: float,
    scale: float,
    sh_degree: int,
    gen: torch.Generator,
) -> SplatSet:
    """Splats at ``points`` [P,3] with ``colors`` [P,3] in [0,1] (``num`` of them drawn without
    replacement when given), or ``random_num`` uniform points in [-extent, extent]^3 with random colours.
    Scales: ``scale`` x the mean distance to the 3 nearest neighbours; quaternions uniform in [0,1]^4
    (gsplat's initialisation); opacity ``opacity``; higher SH zero."""
    if points is None or len(points) == 0:
        n = random_num
        pts = (torch.rand(n, 3, generator=gen) * 2 - 1) * extent
        rgb = torch.rand(n, 3, generator=gen)
    else:
        pts = points.detach().float().cpu()
        rgb = colors.detach().float().cpu() if colors is not None else torch.full_like(pts, 0.5)
        if num is not None and num < len(pts):
            keep = torch.randperm(len(pts), generator=gen)[:num]
            pts, rgb = pts[keep], rgb[keep]
    n = len(pts)
    dist = knn_mean_distance(pts).clamp_min(1e-7)
    log_scales = torch.log(dist * scale)[:, None].repeat(1, 3)
    quats = torch.rand(n, 4, generator=gen)
    opac = gaussians.logit_from_opacity(torch.full((n,), float(opacity)))
    k = gaussians.num_sh_bases(sh_degree) - 1
    return SplatSet(pts, quats, log_scales, opac, gaussians.rgb_to_sh_dc(rgb), torch.zeros(n, k, 3))
