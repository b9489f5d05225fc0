"""The splat sets of the ``train`` and ``render`` suites' real-size cases, on the built-in object scene.

Six kinds (:data:`KINDS`), built with a fixed seed: four from the scene's point cloud (surface points,
3,000 by default), one from its first train view's camera, and one trained; lengths in world units (the
object is about 1.5 wide, the cameras about 2.8 away):

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
  initialisation (:func:`gsworkbench.train.init_splats.init_splats` with ``TrainConfig``'s ``init_opacity``
  and ``init_scale``: 3-NN scales, 0.1 opacity). 100k points in this box give 3-NN scales of about
  1.5% of the object's width, as 100k points in lego's box do (median 0.04 for 2.6 wide). Large,
  overlapping splats touch many tiles.
- ``"volumetric"``: splats filling the object's bounding box rather than sitting on its surfaces, as at
  the start of a random-init run or in a hazy scene: uniform random centres, per-axis scales
  log-uniform in 0.5-3.5% of the box's largest side, random rotations, one opacity for all (0.5),
  random colours with small higher SH bands. Every pixel's ray meets many translucent splats, so
  early termination ends few of them.
- ``"cloud"``: translucent splats filling the whole view, as early in training, in fog or foliage, or
  from inside a room: the frustum of the scene's first train view (the camera the kind renders from,
  :func:`kind_camera`) between :data:`CLOUD_DEPTHS` of the camera's distance to the object box's centre,
  wide enough for a :data:`CLOUD_ASPECT` image at the view's vertical field of view (1920x1080 from an
  800x800 scene). Centres are uniform in image coordinates and depth, sizes grow with depth so every
  splat covers about the same share of the image, and that share is set so each pixel lies inside the
  3-sigma ellipses of about :data:`CLOUD_OVERLAP` splats at any count (fewer splats are larger);
  per-axis scales carry log-normal noise (sigma 0.2), rotations are random, one opacity for all
  (:data:`CLOUD_OPACITY`), random colours with small higher SH bands. At that opacity a pixel's
  transmittance reaches 1e-4 only after about 200 of the splats over it: every pixel is covered and
  blends over a hundred of them (about 175 at the median, 100k splats at 800x800 or 1920x1080) before
  the rasterizer stops, the rasterizer's hardest case at a given count. Other views see the frustum
  from the side, so the kind is for renders from its own camera.
- ``"trained"``: the splats of a real run of the workbench's trainer (:data:`TRAINED_RUNS`), grown to the
  count asked for: it starts from ``num // 2`` points and densifies to a budget of ``num``
  (:attr:`~gsworkbench.train.strategy.DefaultStrategy.budget`, the highest gradients first, capped by
  ``max_gaussians`` = ``cap_max`` = ``num``). For a scene wider or taller than 128 px: the
  ``nerf_synthetic_800`` preset on its 800 px scene (100 + 10 views, no point cloud, random start in the
  visual hull), 4,000 steps (the first half of its schedule: minutes to build); for a
  smaller one: the ``smoke`` preset's 64x64 scene, 300 steps from its point cloud (seconds). The count is
  what the run ended with, never padded: ``num`` unless too few Gaussians were seen to grow. Runs
  are cached as 3DGS PLY files (:func:`trained_path`) beside the scene that was asked for, keyed by
  everything that decides them; the first 100k build at 800 px takes minutes and shows a progress bar.
  Rendered from a held-out view of the run's scene (:func:`kind_camera`), not a view it trained on.

:func:`view_camera` gives one train (or test) view of the scene at any image size: the same pose, with the
vertical field of view kept (so 1920x1080 sees the object 1.35x larger than 800x800, with more
background left and right).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet

KINDS = ("surface", "dense", "random-init", "volumetric", "cloud", "trained")
VOLUMETRIC_SCALES = (0.005, 0.035)  # splat scales as fractions of the object box's largest side
VOLUMETRIC_OPACITY = 0.5
CLOUD_OVERLAP = 300  # splats whose 3-sigma ellipse covers a pixel, on average
CLOUD_OPACITY = 0.2
CLOUD_DEPTHS = (0.5, 1.5)  # the cloud's depth range, as fractions of the camera's distance to the object
CLOUD_ASPECT = 16 / 9  # the widest image (width / height) the cloud covers at the view's vertical fov


@functools.lru_cache(maxsize=2)
def object_scene(width: int, height: int) -> Any:
    """The built-in object scene at ``width`` x ``height`` with 4 train views and 1 test view (cached)."""
    # each builder imports what it runs (synthetic, train) when it builds: the suites import this module
    # when they register
    from gsworkbench.synthetic import builtin_scene

    return builtin_scene("object", width=width, height=height, n_train=4, n_test=1)


def surface_splats(scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """``num`` splats on the scene's surfaces, initialised as the trainer would (see the module doc)."""
    from gsworkbench.train.init_splats import init_splats

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
    from gsworkbench.train.init_splats import knn_mean_distance

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
    views' alpha masks carve (:func:`gsworkbench.train.init_points.random_points`)."""
    if scene.points is not None and len(scene.points):
        pts = scene.points
    else:
        from gsworkbench.train.init_points import random_points

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
    from gsworkbench.train.init_splats import init_splats

    gen = torch.Generator().manual_seed(seed)
    lo, hi = object_box(scene, gen)
    pts = lo + (hi - lo) * torch.rand(num, 3, generator=gen)
    rgb = torch.rand(num, 3, generator=gen)
    cfg = TrainConfig()
    return init_splats(pts, rgb, num=None, random_num=num, extent=1.0, opacity=cfg.init_opacity,
                       scale=cfg.init_scale if init_scale is None else init_scale, sh_degree=sh_degree,
                       gen=gen)  # fmt: skip


def _translucent(means: torch.Tensor, log_scales: torch.Tensor, opacity: float, sh_degree: int,
                 gen: torch.Generator) -> SplatSet:  # fmt: skip
    """Splats at ``means`` [N,3] with ``log_scales`` [N,3], random orientations and colours (a little
    view dependence in the higher SH bands), all of one ``opacity``; drawn from ``gen`` in that order."""
    num = len(means)
    quats = torch.nn.functional.normalize(torch.randn(num, 4, generator=gen), dim=-1)
    k = gaussians.num_sh_bases(sh_degree) - 1
    return SplatSet(
        means,
        quats,
        log_scales,
        gaussians.logit_from_opacity(torch.full((num,), opacity)),
        gaussians.rgb_to_sh_dc(torch.rand(num, 3, generator=gen)),
        0.03 * torch.randn(num, k, 3, generator=gen),
    )


def volumetric_splats(scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """``num`` translucent splats filling the object's bounding box (:func:`object_box`; module doc)."""
    gen = torch.Generator().manual_seed(seed)
    lo, hi = object_box(scene, gen)
    means = lo + (hi - lo) * torch.rand(num, 3, generator=gen)
    size = float((hi - lo).max())
    a, b = (math.log(f * size) for f in VOLUMETRIC_SCALES)
    log_scales = a + (b - a) * torch.rand(num, 3, generator=gen)
    return _translucent(means, log_scales, VOLUMETRIC_OPACITY, sh_degree, gen)


def cloud_radius(num: int, half_width: float, half_height: float, overlap: float = CLOUD_OVERLAP) -> float:
    """The 3-sigma radius r (in the units of the half sizes: tangents of the view's angles) at which
    ``num`` discs with centres uniform over the view grown by r on every side cover each point of the
    view ``overlap`` times on average: num pi r^2 = overlap (2 w + 2 r)(2 h + 2 r). ``overlap`` is capped
    at num pi / 8 (half of what infinitely large discs would give), so a small count gets large splats."""
    k = min(float(overlap), num * math.pi / 8)
    a, b, c = num * math.pi - 4 * k, 4 * k * (half_width + half_height), 4 * k * half_width * half_height
    return (b + math.sqrt(b * b + 4 * a * c)) / (2 * a)


def cloud_splats(scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """``num`` translucent splats filling the frustum of the scene's first train view (module doc)."""
    gen = torch.Generator().manual_seed(seed)
    vm, Ks = view_camera(scene, int(scene.width), int(scene.height))
    lo, hi = object_box(scene, gen)
    R, t = vm[0, :3, :3].double(), vm[0, :3, 3].double()
    distance = float((R @ ((lo + hi) / 2).double() + t)[2])  # the object's depth in this view
    K = Ks[0].double()
    half_h = float(scene.height) / 2 / float(K[1, 1])
    half_w = max(float(scene.width) / 2 / float(K[0, 0]), CLOUD_ASPECT * half_h)
    r = cloud_radius(num, half_w, half_h)
    half = torch.tensor([half_w + r, half_h + r], dtype=torch.float64)  # the view grown by r: edges covered too
    uv = (2 * torch.rand(num, 2, generator=gen, dtype=torch.float64) - 1) * half
    near, far = (f * distance for f in CLOUD_DEPTHS)
    z = near + (far - near) * torch.rand(num, 1, generator=gen, dtype=torch.float64)
    means = ((torch.cat([uv * z, z], dim=1) - t) @ R).float()  # camera -> world: R^T (p - t)
    log_scales = torch.log(z * r / 3) + 0.2 * torch.randn(num, 3, generator=gen, dtype=torch.float64)
    return _translucent(means, log_scales.float(), CLOUD_OPACITY, sh_degree, gen)


@dataclass(frozen=True)
class TrainedRun:
    """A training run of the ``trained`` kind: the preset (its built-in scene and config), overrides
    beside the count's budget, caps and start (``budget``, ``max_gaussians``, ``cap_max``, ``init_num``
    and ``init_random_num``, set from the count asked for), and whether it shows a progress bar."""

    preset: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    progress: bool = False

    def scene_keywords(self) -> dict[str, Any]:
        """The :func:`gsworkbench.synthetic.builtin_scene` keywords of the run's scene."""
        from gsworkbench.train import preset_scene

        return preset_scene(self.preset)

    def config(self, num: int, seed: int) -> Any:
        """The :class:`gsworkbench.train.TrainConfig` of ``num`` Gaussians at most, seeded with ``seed``."""
        from gsworkbench.train import preset

        start = max(num // 2, 1)
        return preset(self.preset, **{**self.overrides, "seed": seed, "budget": num, "max_gaussians": num,
                                      "cap_max": num, "init_num": start, "init_random_num": start})  # fmt: skip


TRAINED_RUNS: Mapping[str, TrainedRun] = MappingProxyType({
    # the preset on its 800 px scene, grown to the count asked for, over the first half of its schedule
    # (a trained object within minutes of building)
    "800": TrainedRun("nerf_synthetic_800", MappingProxyType({"iterations": 4000, "refine_stop": 2000}),
                      progress=True),
    # seconds: 300 steps on the smoke scene from its cloud, densifying every 30 steps up to step 250, all
    # SH bands in use from step 150
    "tiny": TrainedRun("smoke", MappingProxyType({"iterations": 300, "refine_stop": 250, "sh_degree_interval": 50})),
})  # fmt: skip
TRAINED_SMALL_SIDE = 128  # scenes up to this size (both sides, px) get the tiny run
TRAINED_FORMAT = 1  # the cache layout; a change re-trains
_GENERATOR_KEYWORDS = ("name", "width", "height", "n_train", "n_test", "spp", "seed", "n_points")


def trained_run(scene: Any) -> TrainedRun:
    """The run of the ``trained`` kind for ``scene``: ``tiny`` for scenes within
    :data:`TRAINED_SMALL_SIDE` px, else ``800``."""
    small = max(int(scene.width), int(scene.height)) <= TRAINED_SMALL_SIDE
    return TRAINED_RUNS["tiny" if small else "800"]


def trained_cache_dir(scene: Any) -> Path:
    """The scene cache that ``scene`` came from (a built-in scene's folder's parent), else the default
    (:func:`gsworkbench.scenes.scene_cache_dir`): the trained splats are cached beside their scene."""
    from gsworkbench.scenes import scene_cache_dir

    source = getattr(scene, "source", None) or {}
    if source.get("builtin") and source.get("folder"):
        return Path(source["folder"]).parent
    return scene_cache_dir()


def _run_scene(run: TrainedRun, cache_dir: Path) -> Any:
    from gsworkbench.synthetic import builtin_scene

    return builtin_scene(**run.scene_keywords(), cache_dir=cache_dir)


def trained_key(run: TrainedRun, num: int, seed: int, cache_dir: Path) -> dict[str, Any]:
    """Everything that decides a trained run's splats: the scene (its keywords and the generator's key,
    which names the generator version), the preset and the full config after overrides, the count,
    the seed, the package version and :data:`TRAINED_FORMAT`. Generates the scene if it is not cached."""
    import gsworkbench
    from gsworkbench.synthetic import generate_scene

    keywords = run.scene_keywords()
    folder = generate_scene(**{k: v for k, v in keywords.items() if k in _GENERATOR_KEYWORDS}, cache_dir=cache_dir)
    return {
        "format": TRAINED_FORMAT,
        "package_version": gsworkbench.__version__,
        "scene": keywords,
        "generator_key": folder.name.rsplit("-", 1)[-1],
        "preset": run.preset,
        "config": run.config(num, seed).to_dict(),
        "num": num,
        "seed": seed,
    }


def trained_path(run: TrainedRun, num: int, seed: int, cache_dir: str | os.PathLike[str]) -> Path:
    """The PLY file of a trained run: ``cache_dir/trained/<preset>-n<num>-s<seed>-<hash of its key>.ply``,
    a JSON of its key and result (Gaussians, steps, test PSNR) beside it."""
    key = trained_key(run, num, seed, Path(cache_dir))
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir) / "trained" / f"{run.preset}-n{num}-s{seed}-{digest}.ply"


def trained_splats(scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """The splats of a trainer run of at most ``num`` Gaussians (:func:`trained_run` for ``scene``;
    module doc), read from the cache or trained now and cached; SH cut to ``sh_degree`` (trained at 3).
    A cache file that does not read back is trained again, with a warning naming it."""
    from gsworkbench.core.atomic import write_json
    from gsworkbench.io import read_ply, write_ply

    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise ValueError(f"num must be an int >= 1, got {num!r}")
    run, cache_dir = trained_run(scene), trained_cache_dir(scene)
    path = trained_path(run, num, seed, cache_dir)
    splats = None
    if path.is_file():
        try:
            splats = read_ply(path)
        except ValueError as err:
            warnings.warn(f"trained splats cache {path} does not read back ({err}); training them again", stacklevel=2)
    if splats is None:
        splats, info = _train(run, num, seed, cache_dir, path)
        write_json(path.with_suffix(".json"), {**trained_key(run, num, seed, cache_dir), **info})
        write_ply(path, splats)
    k = gaussians.num_sh_bases(sh_degree) - 1
    if k > splats.sh_rest.shape[1]:
        raise ValueError(f"sh_degree {sh_degree} is above the trained splats' degree {splats.sh_degree}")
    return SplatSet(splats.means, splats.quats, splats.log_scales, splats.opacity_logits, splats.sh_dc,
                    splats.sh_rest[:, :k].contiguous())  # fmt: skip


def _train(run: TrainedRun, num: int, seed: int, cache_dir: Path, path: Path) -> tuple[SplatSet, dict[str, Any]]:
    """Trains the run; returns its splats and what to record of it (Gaussians, steps, test PSNR)."""
    from dataclasses import replace

    from gsworkbench.train import Trainer

    cfg = replace(run.config(num, seed), progress=run.progress)
    if run.progress:
        print(f"training the 'trained' splats ({run.preset}, at most {num:,} Gaussians, {cfg.iterations} steps; "
              f"cached as {path})", file=sys.stderr, flush=True)  # fmt: skip
    trainer = Trainer(_run_scene(run, cache_dir), cfg)
    trainer.run()
    metrics, _ = trainer.evaluate()
    out = trainer.splats().to("cpu", torch.float32)
    info = {"gaussians": len(out), "steps": trainer.step_index, "test_psnr_db": float(metrics["psnr_db"].mean())}
    return out, info


@functools.lru_cache(maxsize=4)
def _test_camera(preset: str, cache_dir: Path, width: int, height: int) -> tuple[torch.Tensor, torch.Tensor]:
    return view_camera(_run_scene(TrainedRun(preset), cache_dir), width, height, 0, split="test")


def kind_camera(kind: str, scene: Any, width: int, height: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The camera a case of ``kind`` renders from at ``width`` x ``height`` (:func:`view_camera`): for
    ``trained``, the first held-out view of its run's scene (one the run never trained on); for the other
    kinds, the first train view of ``scene``."""
    if kind == "trained":
        vm, Ks = _test_camera(trained_run(scene).preset, trained_cache_dir(scene), width, height)
        return vm.clone(), Ks.clone()
    return view_camera(scene, width, height)


def scene_splats(kind: str, scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> SplatSet:
    """The splats of ``kind`` (:data:`KINDS`) for ``scene``."""
    makers = {"surface": surface_splats, "dense": dense_splats, "random-init": random_init_splats,
              "volumetric": volumetric_splats, "cloud": cloud_splats, "trained": trained_splats}  # fmt: skip
    if kind not in makers:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return makers[kind](scene, num, sh_degree, seed)


def view_camera(
    scene: Any, width: int, height: int, view: int = 0, split: str = "train"
) -> tuple[torch.Tensor, torch.Tensor]:
    """viewmats [1,4,4] and Ks [1,3,3] (pixels) of view ``view`` of ``split`` ("train" or "test": an index
    into the scene's train or test views) at ``width`` x ``height``: the same pose and vertical field of
    view, the principal point at the image centre."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    ids = scene.train_ids if split == "train" else scene.test_ids
    if not -len(ids) <= view < len(ids):
        raise ValueError(f"view {view} is out of range: scene {scene.name!r} has {len(ids)} {split} views")
    i = int(ids[view])
    K = scene.Ks[i].detach().double().cpu()
    fov_y = 2 * math.atan(scene.height / 2 / float(K[1, 1]))
    f = height / 2 / math.tan(fov_y / 2)
    Ks = torch.tensor([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]], dtype=torch.float32)
    return scene.viewmats[i : i + 1].detach().float().cpu(), Ks[None]
