"""The splat sets of the ``train`` and ``render`` suites' real-size cases, on the built-in object scene.

Three kinds (:data:`KINDS`), each built from the scene's point cloud (surface points, 3,000 by default)
with a fixed seed; lengths in world units (the object is about 1.5 wide, the cameras about 2.8 away):

- ``"surface"``: splats on the surfaces, initialised as the trainer would. The cloud is drawn with
  replacement and jittered by 1% of the scene scale; scales are the RMS distance to the 3 nearest
  neighbours (isotropic), opacity 0.5, random quaternions. These are the train suite's original cases.
- ``"dense"``: a stand-in for a *trained* NeRF-synthetic object, with many small, overlapping,
  mostly opaque splats. They are flat discs in the local tangent plane (a PCA of the 16 nearest
  cloud points) around each cloud point, spread over its neighbourhood. Tangential scales are the
  3-NN distance of the final set (neighbours overlap), normal scales a tenth of that, both with
  log-normal noise (sigma 0.3). Opacity is bimodal, as trained opacities are: 80% in [0.85, 0.99] and
  20% in [0.02, 0.4]. Colours are the cloud's, with small higher SH bands.
- ``"random-init"``: the start of a NeRF-synthetic run from random initialisation: uniform random
  points in the bounding box of the object (its cloud; without one, its visual hull), random colours, and the trainer's
  initialisation (:func:`gsworkbench.train.init.init_splats` with ``TrainConfig``'s ``init_opacity``
  and ``init_scale``: 3-NN scales, 0.1 opacity). 100k points in this box give 3-NN scales of about
  1.5% of the object's width, as 100k points in lego's box do (median 0.04 for 2.6 wide). Large,
  overlapping splats touch many tiles.
- ``"volumetric"``: splats filling the object's bounding box rather than sitting on its surfaces, as at
  the start of a random-init run or in a hazy scene: uniform random centres, per-axis scales
  log-uniform in 0.5-3.5% of the box's largest side, random rotations, one opacity for all (0.5),
  random colours with small higher SH bands. Every pixel's ray meets many translucent splats, so
  early termination ends few of them: the rasterizer's hardest case at a given count.

:func:`view_camera` gives one train view of the scene at any image size: the same pose, with the
vertical field of view kept (so 1920x1080 sees the object 1.35x larger than 800x800, with more
background left and right).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch

from gsworkbench import gaussians
from gsworkbench.splats import SplatSet

KINDS = ("surface", "dense", "random-init", "volumetric")
VOLUMETRIC_SCALES = (0.005, 0.035)  # splat scales as fractions of the object box's largest side
VOLUMETRIC_OPACITY = 0.5


@functools.lru_cache(maxsize=2)
def object_scene(width: int, height: int) -> Any:
    """The built-in object scene at ``width`` x ``height`` with 4 train views and 1 test view (cached)."""
    from gsworkbench.scenes import builtin_scene

    return builtin_scene("object", width=width, height=height, n_train=4, n_test=1)


def surface_splats(scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """``num`` splats on the scene's surfaces, initialised as the trainer would (see the module doc)."""
    from gsworkbench.train.init import init_splats

    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(scene.points), (num,), generator=gen)
    pts = scene.points[idx] + 0.01 * scene.scene_scale * torch.randn(num, 3, generator=gen)
    rgb = scene.point_colors[idx] if scene.point_colors is not None else None
    return init_splats(pts, rgb, num=None, random_num=num, extent=scene.scene_scale, opacity=0.5, scale=1.0,
                       sh_degree=sh_degree, gen=gen)  # fmt: skip


def _tangent_frames(points: np.ndarray, k: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Per point [P,3]: a right-handed frame [P,3,3] (columns: two tangents, the normal) from a PCA of its
    k nearest points, and the RMS distance [P] to its 6 nearest other points."""
    from scipy.spatial import cKDTree

    kk = min(k, len(points))
    d, nn = cKDTree(points).query(points, k=kk)
    nb = points[np.asarray(nn).reshape(len(points), kk)] - points[:, None, :]
    _, vecs = np.linalg.eigh(np.einsum("pki,pkj->pij", nb, nb))  # ascending: the normal first
    frames = vecs[:, :, ::-1].copy()  # [t1, t2, n]
    frames[np.linalg.det(frames) < 0, :, 2] *= -1
    spread = np.sqrt((np.asarray(d).reshape(len(points), kk)[:, 1:7] ** 2).mean(-1))
    return frames, spread


def dense_splats(scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """``num`` flat, mostly opaque splats on the scene's surfaces, like a trained scene (see the module doc)."""
    from gsworkbench.train.init import knn_mean_distance

    gen = torch.Generator().manual_seed(seed)
    cloud = scene.points.detach().double().cpu().numpy()
    frames, spread = _tangent_frames(cloud)
    idx = torch.randint(len(cloud), (num,), generator=gen).numpy()
    R = torch.from_numpy(frames[idx])  # [num,3,3] float64
    uv = torch.randn(num, 2, generator=gen, dtype=torch.float64) * 0.5 * torch.from_numpy(spread[idx])[:, None]
    offset = R[:, :, 0] * uv[:, :1] + R[:, :, 1] * uv[:, 1:]
    offset += R[:, :, 2] * 0.002 * scene.scene_scale * torch.randn(num, 1, generator=gen, dtype=torch.float64)
    means = (torch.from_numpy(cloud[idx]) + offset).float()
    tangent = knn_mean_distance(means).clamp_min(1e-6).double()
    log_scales = torch.log(tangent)[:, None] + torch.log(torch.tensor([1.0, 1.0, 0.1], dtype=torch.float64))
    log_scales += 0.3 * torch.randn(num, 3, generator=gen, dtype=torch.float64)
    opaque = torch.rand(num, generator=gen) < 0.8
    u = torch.rand(num, generator=gen)
    opacity = torch.where(opaque, 0.85 + 0.14 * u, 0.02 + 0.38 * u)
    colors = scene.point_colors
    rgb = colors[torch.from_numpy(idx)].float() if colors is not None else torch.full((num, 3), 0.5)
    rgb = (rgb + 0.03 * torch.randn(num, 3, generator=gen)).clamp(0, 1)
    k = gaussians.num_sh_bases(sh_degree) - 1
    return SplatSet(
        means,
        gaussians.rotmat_to_quat(R).float(),
        log_scales.float(),
        gaussians.logit_from_opacity(opacity),
        gaussians.rgb_to_sh_dc(rgb),
        0.03 * torch.randn(num, k, 3, generator=gen),
    )


def object_box(scene: Any, gen: torch.Generator, probes: int = 20_000) -> tuple[torch.Tensor, torch.Tensor]:
    """The object's bounding box lo, hi [3] (world units): of the scene's point cloud, or, for a scene
    without one (a NeRF-synthetic layout), of ``probes`` random points in the visual hull that its train
    views' alpha masks carve (:func:`gsworkbench.train.init_region.random_points`)."""
    if scene.points is not None and len(scene.points):
        pts = scene.points
    else:
        from gsworkbench.train.init_region import random_points

        if scene.alphas is None:
            raise ValueError(f"scene {scene.name!r} has neither a point cloud nor alpha masks to bound its object")
        pts, _ = random_points(scene, "hull", probes, 3.0 * float(scene.scene_scale), gen)
    return pts.min(0).values.float().cpu(), pts.max(0).values.float().cpu()


def random_init_splats(
    scene: Any, num: int, sh_degree: int = 3, seed: int = 0, init_scale: float | None = None
) -> SplatSet:
    """``num`` random points in the object's bounding box (:func:`object_box`), initialised as the
    trainer would (module doc); ``init_scale`` (default: the trainer's, 1) multiplies the 3-NN scales."""
    from gsworkbench.train.config import TrainConfig
    from gsworkbench.train.init import init_splats

    gen = torch.Generator().manual_seed(seed)
    lo, hi = object_box(scene, gen)
    pts = lo + (hi - lo) * torch.rand(num, 3, generator=gen)
    rgb = torch.rand(num, 3, generator=gen)
    cfg = TrainConfig()
    return init_splats(pts, rgb, num=None, random_num=num, extent=1.0, opacity=cfg.init_opacity,
                       scale=cfg.init_scale if init_scale is None else init_scale, sh_degree=sh_degree,
                       gen=gen)  # fmt: skip


def volumetric_splats(scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """``num`` translucent splats filling the object's bounding box (:func:`object_box`; module doc)."""
    gen = torch.Generator().manual_seed(seed)
    lo, hi = object_box(scene, gen)
    means = lo + (hi - lo) * torch.rand(num, 3, generator=gen)
    size = float((hi - lo).max())
    a, b = (math.log(f * size) for f in VOLUMETRIC_SCALES)
    log_scales = a + (b - a) * torch.rand(num, 3, generator=gen)
    quats = torch.nn.functional.normalize(torch.randn(num, 4, generator=gen), dim=-1)
    opacity = torch.full((num,), VOLUMETRIC_OPACITY)
    k = gaussians.num_sh_bases(sh_degree) - 1
    return SplatSet(
        means,
        quats,
        log_scales,
        gaussians.logit_from_opacity(opacity),
        gaussians.rgb_to_sh_dc(torch.rand(num, 3, generator=gen)),
        0.03 * torch.randn(num, k, 3, generator=gen),
    )


def scene_splats(kind: str, scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """The splats of ``kind`` (:data:`KINDS`) for ``scene``."""
    makers = {"surface": surface_splats, "dense": dense_splats, "random-init": random_init_splats,
              "volumetric": volumetric_splats}  # fmt: skip
    if kind not in makers:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return makers[kind](scene, num, sh_degree, seed)


def view_camera(scene: Any, width: int, height: int, view: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """viewmats [1,4,4] and Ks [1,3,3] (pixels) of train view ``view`` at ``width`` x ``height``: the same
    pose and vertical field of view, the principal point at the image centre."""
    i = int(scene.train_ids[view])
    K = scene.Ks[i].detach().double().cpu()
    fov_y = 2 * math.atan(scene.height / 2 / float(K[1, 1]))
    f = height / 2 / math.tan(fov_y / 2)
    Ks = torch.tensor([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]], dtype=torch.float32)
    return scene.viewmats[i : i + 1].detach().float().cpu(), Ks[None]
