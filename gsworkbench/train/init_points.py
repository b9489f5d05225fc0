"""Where training starts: the scene's point cloud, or random points where the cameras look.

The init rules (``TrainConfig.init_rule``):

- ``"points"``: the scene's point cloud (``init_num`` of its points drawn when given);
- ``"sfm"``: points triangulated from the train views with their poses and intrinsics held fixed
  (:func:`gsworkbench.sfm.triangulate.triangulate_views`: SIFT, matching, COLMAP's triangulator),
  for posed captures that come without a cloud; ``"frustum"`` when fewer than
  :data:`SFM_MIN_POINTS` points come out;
- ``"hull"``: uniform random points inside the visual hull that the train views' alpha masks carve:
  a point is kept when at least half of the train views see it (in front of the camera, inside the
  image) and none of them sees it outside its mask (alpha > 0.1, dilated by one pixel);
- ``"frustum"``: uniform random points inside the cameras' shared view volume: points that every
  train view sees (the fraction ``init_view_fraction``; halved until some volume is found);
- ``"cube"``: the rule before issue 20 (gsplat's random init): uniform in the cube of half-side
  ``init_extent`` x scene scale around the world origin, whether a camera looks there or not.

``"auto"`` (the default) picks ``"points"`` when the scene has a cloud, else ``"hull"`` when the train
views' alpha masks carve something (an RGBA object scene: some train pixels are transparent), else
``"sfm"`` for photos (RGB, no alpha, at least 3 train views; ``TrainConfig.init_triangulate``), else
``"frustum"`` (opaque renders, unbounded captures). ``"hull"`` falls back to ``"frustum"``
when the masks leave nothing, and ``"frustum"`` to ``"cube"`` when no two views share a volume.

``"hull"`` and ``"frustum"`` search the cube of half-side ``init_extent`` x scene scale around the
camera centroid (the scene's ``bounds`` [2,3] instead, where a loader gives them), so ``init_extent``
bounds how far from the cameras points may lie, and no point lies where no camera looks. Only the
train views are used: the test views' masks must not shape the start. Random points get uniform
random colours in [0,1] (gsplat's random init).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from gsworkbench.core.splats import SplatSet
from gsworkbench.sfm.triangulate import triangulate_views
from gsworkbench.train.init_background import background_points
from gsworkbench.train.init_splats import init_splats
from gsworkbench.train.train_views import HULL_ALPHA, TrainViews

INIT_RULES = ("auto", "points", "sfm", "hull", "frustum", "cube")
SFM_MIN_POINTS = 100  # fewer triangulated points than this: "sfm" falls back to "frustum"
SFM_MIN_VIEWS = 3
HULL_VIEW_FRACTION = 0.5  # hull points are seen by at least this fraction of the train views
FRUSTUM_VIEW_FRACTION = 1.0  # default share of the train views that see a "frustum" point
CARVING_MIN_TRANSPARENT = 0.01  # "auto" picks "hull" when at least this share of train pixels is transparent
BATCH = 32_768  # candidate points per projection batch
SHRINK_MIN_KEPT = 256  # candidates kept before the search box is shrunk around them
SHRINK_MARGIN = 0.2  # the shrunk box reaches this share of the kept candidates' extent beyond them
SHRINK_MAX_BATCHES = 32  # batches drawn at most per shrinking round
MAX_CANDIDATES = 8_000_000  # candidates drawn at most while rejection sampling


def masks_carve(scene: Any) -> bool:
    """Whether the train views' alpha masks can carve a hull: the scene has alphas and at least
    :data:`CARVING_MIN_TRANSPARENT` of the train pixels are transparent (alpha <= :data:`HULL_ALPHA`)."""
    if scene.alphas is None or len(scene.train_ids) == 0:
        return False
    a = scene.alphas[scene.train_ids.to(scene.alphas.device)]
    return float((a <= HULL_ALPHA).float().mean()) >= CARVING_MIN_TRANSPARENT


def pick_rule(scene: Any, requested: str, triangulate: bool = True) -> str:
    """The rule ``"auto"`` resolves to for ``scene`` (other rules are returned as they are);
    ``triangulate=False`` leaves out ``"sfm"``."""
    if requested not in INIT_RULES:
        raise ValueError(f"init_rule must be one of {INIT_RULES}, got {requested!r}")
    if requested != "auto":
        return requested
    if scene.points is not None and len(scene.points):
        return "points"
    if masks_carve(scene):
        return "hull"
    if triangulate and scene.alphas is None and len(scene.train_ids) >= SFM_MIN_VIEWS:
        return "sfm"
    return "frustum"


def sfm_points(scene: Any) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """Points [P,3] and colours [P,3] triangulated from ``scene``'s train views (cached), and the record."""
    ids = scene.train_ids.cpu()
    return triangulate_views(scene.images[ids.to(scene.images.device)], scene.viewmats[ids.to(scene.viewmats.device)],
                             scene.Ks[ids.to(scene.Ks.device)])  # fmt: skip


def search_box(scene: Any, extent: float) -> tuple[torch.Tensor, torch.Tensor, str]:
    """The outer box [3], [3] that ``hull`` and ``frustum`` search, and where it comes from: the
    scene's ``bounds`` [2,3] (lo, hi) when it has them, else the cube of half-side ``extent`` (world
    units) around the camera centroid."""
    bounds = getattr(scene, "bounds", None)
    if bounds is not None:
        b = torch.as_tensor(bounds, dtype=torch.float32).cpu()
        if b.shape == (2, 3) and bool(torch.isfinite(b).all()) and bool((b[1] > b[0]).all()):
            return b[0], b[1], "scene bounds"
    centre = scene.camera_centers().detach().cpu().float().mean(0)
    return centre - extent, centre + extent, "camera centroid +- init_extent x scene scale"


def _uniform(lo: torch.Tensor, hi: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
    return lo + torch.rand(n, 3, generator=gen) * (hi - lo)


def shrink_box(
    keep: Callable[[torch.Tensor], torch.Tensor], lo: torch.Tensor, hi: torch.Tensor, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """The box lo..hi [3] shrunk around the region ``keep(points [P,3]) -> [P] bool``: a few rounds of
    uniform candidates (until :data:`SHRINK_MIN_KEPT` are kept), each setting the box to the kept
    ones' bounds widened by :data:`SHRINK_MARGIN` of their extent (at least two sampling cells), so
    that parts of the region that the candidates missed stay inside. Unchanged when nothing is kept."""
    for _ in range(6):
        found, tried = [], 0
        while sum(len(f) for f in found) < SHRINK_MIN_KEPT and tried < SHRINK_MAX_BATCHES * BATCH:
            cand = _uniform(lo, hi, BATCH, gen)
            found.append(cand[keep(cand)])
            tried += BATCH
        kept = torch.cat(found)
        if len(kept) < 2:
            break
        k_lo, k_hi = kept.min(0).values, kept.max(0).values
        pad = torch.maximum(2.0 * (hi - lo) / tried ** (1 / 3), SHRINK_MARGIN * (k_hi - k_lo))
        new_lo, new_hi = torch.maximum(lo, k_lo - pad), torch.minimum(hi, k_hi + pad)
        shrink = float(torch.prod(new_hi - new_lo) / torch.prod(hi - lo))
        lo, hi = new_lo, new_hi
        if shrink > 0.8:
            break
    return lo, hi


def sample_region(
    keep: Callable[[torch.Tensor], torch.Tensor],
    lo: torch.Tensor,
    hi: torch.Tensor,
    num: int,
    gen: torch.Generator,
    coarse: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Up to ``num`` points [N,3] uniform in the region ``keep(points [P,3]) -> [P] bool`` inside the
    box lo..hi [3]: the box is shrunk around ``coarse`` (a region that holds ``keep``'s, larger and
    easier to find) and then around ``keep`` (:func:`shrink_box`), then candidates are drawn in it
    until ``num`` are kept or :data:`MAX_CANDIDATES` were tried. Returns the points and {box,
    acceptance, candidates}."""
    if coarse is not None:
        lo, hi = shrink_box(coarse, lo, hi, gen)
    lo, hi = shrink_box(keep, lo, hi, gen)
    out, tried, count = [], 0, 0
    while count < num and tried < MAX_CANDIDATES:
        cand = _uniform(lo, hi, BATCH, gen)
        tried += BATCH
        kept = cand[keep(cand)]
        out.append(kept)
        count += len(kept)
    pts = torch.cat(out)[:num] if out else torch.zeros(0, 3)
    info = {
        "box_lo": [round(float(v), 4) for v in lo],
        "box_hi": [round(float(v), 4) for v in hi],
        "acceptance": count / max(tried, 1),
        "candidates": tried,
    }
    return pts, info


def random_points(
    scene: Any,
    rule: str,
    num: int,
    extent: float,
    gen: torch.Generator,
    view_fraction: float | None = None,
    near: float = 0.01,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """``num`` random points [N,3] (world) by ``rule`` ("hull", "frustum" or "cube", see the module
    docstring; ``extent`` in world units) and what was done: {rule, num, box, acceptance, ...}, with
    ``fallback`` naming a rule that found no volume. Fewer than ``num`` points only when the region
    is so thin that :data:`MAX_CANDIDATES` candidates kept fewer."""
    info: dict[str, Any] = {"rule": rule}
    if rule == "cube":
        pts = (torch.rand(num, 3, generator=gen) * 2 - 1) * extent
        info.update(box_lo=[-extent] * 3, box_hi=[extent] * 3, acceptance=1.0, num=num, box_from="world origin")
        return pts, info
    lo, hi, box_from = search_box(scene, extent)
    info["box_from"] = box_from
    if rule == "hull":
        views = TrainViews.of(scene, masks=True)
        if views.masks is None:
            raise ValueError("init_rule 'hull' needs a scene with alpha masks (an RGBA source); use 'frustum'")
        frac = HULL_VIEW_FRACTION if view_fraction is None else view_fraction
        need = max(1, math.ceil(frac * len(views)))

        def in_hull(p: torch.Tensor) -> torch.Tensor:
            n, carved = views.hull_stats(p, near)
            return (n >= need) & ~carved

        seen_enough = lambda p: views.views_seeing(p, near) >= need  # noqa: E731  (holds the hull)
        pts, found = sample_region(in_hull, lo, hi, num, gen, coarse=seen_enough)
        info.update(found, min_views=need, num=len(pts))
        if len(pts):
            return pts, info
        info = {"rule": "frustum", "fallback": "hull: the alpha masks left no volume", "box_from": box_from}
    views = TrainViews.of(scene)
    frac = FRUSTUM_VIEW_FRACTION if view_fraction is None else view_fraction
    need = max(1, math.ceil(frac * len(views)))
    while True:
        pts, found = sample_region(lambda p, k=need: views.views_seeing(p, near) >= k, lo, hi, num, gen)
        if len(pts) or need == 1:
            break
        need = max(1, need // 2)
    info.update(found, rule="frustum", min_views=need, num=len(pts))
    if len(pts):
        return pts, info
    pts, cube = random_points(scene, "cube", num, extent, gen)
    return pts, {**cube, "fallback": "frustum: no camera sees the search box"}


def initial_points(
    scene: Any, cfg: Any, gen: torch.Generator
) -> tuple[torch.Tensor | None, torch.Tensor | None, dict[str, Any]]:
    """The points [N,3] and colours [N,3] in [0,1] that training starts from, by ``cfg.init_rule``
    (a :class:`~gsworkbench.train.config.TrainConfig`), and the record of the rule used:
    {requested, rule, num, ...}. ``"points"``: the scene's cloud (None, None when it has none)."""
    rule = pick_rule(scene, cfg.init_rule, getattr(cfg, "init_triangulate", True))
    fallback: dict[str, Any] = {}
    if rule == "sfm":
        pts, colors, record = sfm_points(scene)
        if len(pts) >= SFM_MIN_POINTS:
            n = len(pts) if cfg.init_num is None else min(cfg.init_num, len(pts))
            return pts, colors, {"requested": cfg.init_rule, "rule": "sfm", **record, "num": n}
        rule = "frustum"
        fallback = {"fallback": f"sfm: {len(pts)} points triangulated (< {SFM_MIN_POINTS})"}
    if rule == "points":
        if scene.points is None or len(scene.points) == 0:
            raise ValueError("init_rule 'points' needs a scene with a point cloud; use 'auto', 'hull' or 'frustum'")
        n = len(scene.points) if cfg.init_num is None else min(cfg.init_num, len(scene.points))
        return scene.points, scene.point_colors, {"requested": cfg.init_rule, "rule": "points", "num": n}
    extent = cfg.init_extent * float(scene.scene_scale)
    pts, info = random_points(scene, rule, cfg.init_random_num, extent, gen, cfg.init_view_fraction, cfg.near_plane)
    if len(pts) == 0:
        raise ValueError(f"init_rule {rule!r} found no place for random points in scene {scene.name!r}")
    colors = torch.rand(len(pts), 3, generator=gen)
    return pts, colors, {"requested": cfg.init_rule, **info, **fallback}


def sparse_cloud(scene: Any, init_info: dict[str, Any]) -> torch.Tensor | None:
    """The sparse cloud [P,3] that a view's background is measured against: the scene's, else the one
    triangulated for a start by rule ``"sfm"`` (cached), else None (a random start has none)."""
    if scene.points is not None and len(scene.points):
        return scene.points
    if init_info.get("rule") == "sfm":
        return sfm_points(scene)[0]
    return None


def initial_splats(scene: Any, cfg: Any, gen: torch.Generator) -> tuple[Any, dict[str, Any]]:
    """The splats training starts from (:func:`gsworkbench.train.init_splats.init_splats` at
    :func:`initial_points`, then at the far shell and fill points that ``cfg.init_shell`` and
    ``cfg.init_fill`` add, :func:`gsworkbench.train.init_background.background_points`) and the record
    of the init rule used, with ``"shell"`` / ``"fill"`` records of what was added."""
    pts, rgb, info = initial_points(scene, cfg, gen)
    common = dict(random_num=cfg.init_random_num, extent=cfg.init_extent * float(scene.scene_scale),
                  opacity=cfg.init_opacity, scale=cfg.init_scale, sh_degree=cfg.sh_degree, gen=gen)  # fmt: skip
    splats = init_splats(pts, rgb, num=cfg.init_num if info["rule"] in ("points", "sfm") else None, **common)
    extra, extra_rgb, added = background_points(scene, cfg, sparse_cloud(scene, info), gen)
    if len(extra):
        splats = SplatSet.concat([splats, init_splats(extra, extra_rgb, num=None, **common)])
    return splats, {**info, **added}
