"""Points for what the sparse cloud misses, added to whatever the init rule started from
(:mod:`gsworkbench.train.init_points`):

- a **far shell** (``TrainConfig.init_shell``): ``init_shell_num`` points uniform on the part of the
  sphere of radius ``init_shell_radius`` x scene scale around the camera centroid that some train view
  sees. Scene scale is 1.1 x the largest distance of a camera from the centroid, and the radius factor
  is above 1, so the shell lies beyond every camera: sky and distant surroundings, which SfM leaves
  empty, get splats at a distance where parallax between the views is small. Each point takes the
  median colour of the pixels it lands on in the views that see it; its scale comes from its
  neighbours on the shell (:func:`~gsworkbench.train.init_splats.init_splats`), so neighbours overlap.
- **fill** points (``TrainConfig.init_fill``): where the photos overlap but the cloud has no point. Rays
  through the train views' background pixels (:func:`~gsworkbench.train.evaluate.sfm_background_mask`
  of the cloud: no point projects near them) are swept over :data:`FILL_DEPTHS` depths (uniform in
  inverse depth over the cloud's depths seen from the train views). At each depth the other train
  views that see the point vote: a view agrees when the pixel it sees there is within
  :data:`FILL_TOLERANCE` (mean absolute difference per channel) of the ray's pixel. A ray keeps the
  depth with the most agreeing views (ties: the smaller median difference) when at least
  :data:`FILL_MIN_VIEWS` agree and they are at least half of the views that see it; the point takes the
  ray's pixel colour. Plain regions agree at many depths, so there the depth is a guess that training
  corrects; what the fill adds is splats of the right colour where the photos show something.

Neither touches the random generator unless it is asked for, so a run without them starts exactly as
before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gsworkbench.core.cameras import camera_points
from gsworkbench.train.evaluate import sfm_background_mask
from gsworkbench.train.train_views import TrainViews

SHELL_BATCH = 65_536  # candidate directions per batch
SHELL_MAX_CANDIDATES = 4_000_000  # directions drawn at most (a shell no view sees keeps fewer points)
FILL_DEPTHS = 32  # depths tried along each ray
FILL_TOLERANCE = 0.05  # a view agrees with a ray's pixel within this mean absolute difference per channel
FILL_MIN_VIEWS = 3  # other views that must agree at the chosen depth
FILL_RAYS_PER_POINT = 2  # rays tried per fill point asked for
FILL_RAY_BATCH = 256  # rays swept at once
FILL_DEPTH_QUANTILES = (0.02, 0.98)  # the sweep's depth range: these quantiles of the cloud's depths


def shell_points(
    views: TrainViews, centre: torch.Tensor, radius: float, num: int, gen: torch.Generator, near: float
) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """``num`` points [N,3] uniform on the sphere of ``radius`` (world units) around ``centre`` [3] where
    at least one of ``views`` sees them, their colours [N,3] (median over the views that see each) and
    {num, radius, views_median} (views seeing a point, median). Fewer than ``num`` only when the views
    see so little of the sphere that :data:`SHELL_MAX_CANDIDATES` directions kept fewer."""
    out, count, tried = [], 0, 0
    while count < num and tried < SHELL_MAX_CANDIDATES:
        d = torch.randn(SHELL_BATCH, 3, generator=gen)
        p = centre + radius * d / d.norm(dim=1, keepdim=True).clamp_min(1e-12)
        p = p[views.views_seeing(p, near) > 0]
        out.append(p)
        count += len(p)
        tried += SHELL_BATCH
    pts = torch.cat(out)[:num] if out else torch.zeros(0, 3)
    rgb, seen = views.colors_at(pts, near)
    colors = rgb.nanmedian(dim=0).values if len(pts) else torch.zeros(0, 3)
    n_views = seen.sum(0).float()
    info = {"num": len(pts), "radius": round(radius, 4),
            "views_median": float(n_views.median()) if len(pts) else 0.0}  # fmt: skip
    return pts, colors, info


def background_masks(views: TrainViews, cloud: torch.Tensor) -> torch.Tensor:
    """Each train view's background [V,H,W] bool: the pixels no point of ``cloud`` [P,3] projects near
    (:func:`~gsworkbench.train.evaluate.sfm_background_mask`)."""
    masks = [sfm_background_mask(cloud, views.viewmats[v], views.Ks[v], views.width, views.height)
             for v in range(len(views))]  # fmt: skip
    return torch.from_numpy(np.stack(masks))


def sweep_depths(views: TrainViews, cloud: torch.Tensor, near: float) -> torch.Tensor:
    """:data:`FILL_DEPTHS` depths [D] (camera z, world units), uniform in inverse depth between the
    :data:`FILL_DEPTH_QUANTILES` of the depths of ``cloud`` [P,3] in the train views that see it."""
    z = camera_points(cloud, views.viewmats)[..., 2][views.project(cloud, near)[2]]
    lo, hi = (float(torch.quantile(z, q)) for q in FILL_DEPTH_QUANTILES)
    lo = max(lo, near)
    hi = max(hi, lo * 1.001)
    return 1.0 / torch.linspace(1.0 / lo, 1.0 / hi, FILL_DEPTHS)


def _ray_points(views: TrainViews, view: torch.Tensor, u: torch.Tensor, v: torch.Tensor, depths: torch.Tensor
                ) -> torch.Tensor:  # fmt: skip
    """World points [B,D,3] at camera depths ``depths`` [D] along the rays of pixels (u, v) [B] (pixel
    centres) of train views ``view`` [B]."""
    K = views.Ks[view]  # [B,3,3]
    x = (u.float() + 0.5 - K[:, 0, 2]) / K[:, 0, 0]
    y = (v.float() + 0.5 - K[:, 1, 2]) / K[:, 1, 1]
    cam = torch.stack([x, y, torch.ones_like(x)], -1)[:, None, :] * depths[None, :, None]  # [B,D,3]
    R, t = views.viewmats[view, :3, :3], views.viewmats[view, :3, 3]  # world-to-camera
    return torch.einsum("bji,bdj->bdi", R, cam - t[:, None, :])


def fill_points(
    views: TrainViews, cloud: torch.Tensor, num: int, gen: torch.Generator, near: float
) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """Up to ``num`` points [N,3] on rays through the train views' background pixels (those no point of
    ``cloud`` [P,3] projects near) at the depth where the most other views agree with the ray's
    colour (see the module docstring), their colours [N,3] (the rays' pixels) and {num, rays,
    background_share}."""
    masks = background_masks(views, cloud)
    share = float(masks.float().mean())
    pixels = masks.reshape(-1).nonzero().squeeze(1)  # flat indices of the background pixels, [M]
    seen_cloud = bool(views.project(cloud, near)[2].any())
    if len(pixels) == 0 or num == 0 or not seen_cloud:
        return torch.zeros(0, 3), torch.zeros(0, 3), {"num": 0, "rays": 0, "background_share": round(share, 4)}
    flat = pixels[torch.randperm(len(pixels), generator=gen)[: FILL_RAYS_PER_POINT * num]]
    H, W = views.height, views.width
    rays = torch.stack([flat // (H * W), flat // W % H, flat % W], 1)  # view, row, column
    depths = sweep_depths(views, cloud, near)
    D = len(depths)
    kept_pts, kept_rgb = [], []
    for batch in rays.split(FILL_RAY_BATCH):
        view, v, u = batch.unbind(1)
        ref = views.images[view, v, u]  # [B,3]
        pts = _ray_points(views, view, u, v, depths)  # [B,D,3]
        rgb, seen = views.colors_at(pts.reshape(-1, 3), near)  # [V,B*D,3], [V,B*D]
        B = len(batch)
        rgb, seen = rgb.reshape(len(views), B, D, 3), seen.reshape(len(views), B, D)
        seen[view, torch.arange(B)] = False  # the ray's own view does not vote
        diff = (rgb - ref[None, :, None, :]).abs().mean(-1)  # [V,B,D], NaN where unseen
        agree = (seen & (diff < FILL_TOLERANCE)).sum(0)  # [B,D]
        n_seen = seen.sum(0)
        median = diff.masked_fill(~seen, float("nan")).nanmedian(dim=0).values.nan_to_num(1.0)
        score = agree.float() - median.clamp(0, 1) * 0.5  # most agreeing views, then closest colours
        best = score.argmax(1)  # [B]
        b = torch.arange(B)
        ok = (agree[b, best] >= FILL_MIN_VIEWS) & (2 * agree[b, best] >= n_seen[b, best])
        kept_pts.append(pts[b, best][ok])
        kept_rgb.append(ref[ok])
    pts, rgb = torch.cat(kept_pts)[:num], torch.cat(kept_rgb)[:num]
    return pts, rgb, {"num": len(pts), "rays": len(rays), "background_share": round(share, 4)}


def background_points(
    scene: Any, cfg: Any, cloud: torch.Tensor | None, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """The points [N,3] and colours [N,3] that ``cfg`` (a :class:`~gsworkbench.train.config.TrainConfig`)
    adds for what the sparse ``cloud`` [P,3] (None for a random start) misses: the far shell
    (``init_shell``) and fill points (``init_fill``; none without a cloud), and the record
    {"shell": {...}, "fill": {...}} of those asked for."""
    pts, rgb, info = [torch.zeros(0, 3)], [torch.zeros(0, 3)], {}
    if not (cfg.init_shell or cfg.init_fill):
        return pts[0], rgb[0], info
    views = TrainViews.of(scene, images=True)
    if cfg.init_shell:
        centre = scene.camera_centers().detach().cpu().float()[scene.train_ids.cpu()].mean(0)
        radius = cfg.init_shell_radius * float(scene.scene_scale)
        p, c, info["shell"] = shell_points(views, centre, radius, cfg.init_shell_num, gen, cfg.near_plane)
        pts.append(p)
        rgb.append(c)
    if cfg.init_fill:
        if cloud is None or len(cloud) == 0:
            info["fill"] = {"num": 0, "skipped": "no sparse cloud: the random start has no background"}
        else:
            p, c, info["fill"] = fill_points(views, cloud.detach().cpu().float(), cfg.init_fill_num, gen,
                                             cfg.near_plane)  # fmt: skip
            pts.append(p)
            rgb.append(c)
    return torch.cat(pts), torch.cat(rgb), info
