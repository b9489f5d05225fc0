"""The quality table: named training runs on the built-in scenes, one row each, for claims such as
"random init reaches 30 dB" (issue 20's targets). ``gsworkbench quality NAME ...`` runs them.

Each row: the run, the scene's layout, views (train + test), image size, init rule and scale, steps,
minutes, final Gaussians, test PSNR / SSIM (LPIPS where computed), the same over the background alone
(the pixels no sparse point projects near: the scene's cloud, or the one triangulated for an "sfm"
start; empty for a random start) and the scene's fingerprint; a run with ``zooms`` adds the test PSNR /
SSIM at each other image size (``psnr_x2_db``, ``ssim_x0.25``, ...: :func:`zoom_references`). Each run
keeps its results folder (history, checkpoint, splats, test images) beside the table. Minutes are wall
time on the machine that ran it: compare them only within one table.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from gsworkbench.core.atomic import write_table
from gsworkbench.core.provenance import short_commit
from gsworkbench.core.runs import new_run_dir, write_metadata

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class QualityRun:
    """A preset (and its built-in scene) with overrides; ``scene`` builds another scene instead."""

    preset: str
    overrides: dict[str, Any] = field(default_factory=dict)
    scene_overrides: dict[str, Any] = field(default_factory=dict)
    scene: Callable[[], Any] | None = None
    layout: str = "NeRF-synthetic"
    reconstructed: bool = False  # the scene is the capture's photos through reconstruct (in the run's folder)
    # the held-out views scored again at these multiples of the image size (same field of view): zoom in
    # (> 1, a capture scene only: rendered again at that size) and out (1 / an integer: box-averaged)
    zooms: tuple[float, ...] = ()


CAPTURE_SIZE = dict(width=256, height=192, n_train=40, n_test=8)


def _capture(twin: bool, cloud: bool = True) -> Callable[[], Any]:
    """The capture scene (distorted JPEGs, loaded through transforms.json and undistorted), or its
    pinhole twin: the same cameras rendered without a lens
    (:func:`gsworkbench.synthetic.simulated_capture.pinhole_twin`).
    ``cloud=False``: without its point cloud (a posed capture as instant-ngp's form or a phone's AR
    tracker gives it)."""

    def build() -> Any:
        # a run imports what it needs when it runs: the command line reads RUNS to build its parser
        from gsworkbench.scenes import load_scene
        from gsworkbench.synthetic.generate import generate_scene, read_manifest
        from gsworkbench.synthetic.simulated_capture import pinhole_twin

        folder = generate_scene("capture", **CAPTURE_SIZE)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the capture's listed frames without images: by design
            scene = load_scene(folder)
        scene.name = "capture"
        if not cloud:
            scene.points = scene.point_colors = None
        return pinhole_twin(scene, spp=read_manifest(folder)["samples_per_pixel"]) if twin else scene

    return build


def _capture_exposure() -> Any:
    """The capture scene as a phone would take it with auto-exposure: each photo (held-out ones too) at
    its own gain (x0.55 to x1) and white balance (each channel x0.85 to x1), fixed by a seed; darker
    only, so that nothing clips."""

    def build() -> Any:
        import numpy as np
        import torch

        scene = _capture(False)()
        g = np.random.default_rng(7)
        factors = g.uniform(0.55, 1.0, (len(scene.images), 1)) * g.uniform(0.85, 1.0, (len(scene.images), 3))
        scene.images = scene.images * torch.tensor(factors, dtype=scene.images.dtype)[:, None, None, :]
        scene.name = "capture (exposure varies)"
        return scene

    return build


def _reconstructed_capture(out: Path) -> Any:
    """The capture scene's photos alone through :func:`gsworkbench.sfm.reconstruct`, loaded with the
    capture's own test photos held out; ``scene.source["reconstruction"]`` holds the pose accuracy
    against the true poses (the quality row's extra columns)."""
    from gsworkbench.scenes import load_scene
    from gsworkbench.sfm import reconstruct
    from gsworkbench.studies.suites.reconstruct import accuracy_row, capture_truth
    from gsworkbench.synthetic.generate import read_manifest

    photos, truth, focal = capture_truth(**CAPTURE_SIZE)
    folder = reconstruct(photos, out, progress=False, log=None)
    test = [n.removeprefix("images/") for n in read_manifest(photos.parent)["test_images"]]
    scene = load_scene(folder, test_names=[n for n in test if (folder / "images" / n).is_file()])
    scene.name = "capture (reconstructed)"
    row = accuracy_row(folder, truth, focal)
    scene.source["reconstruction"] = {k: row[k] for k in ("registered", "rotation_median_deg", "centre_median_pct",
                                                          "focal_error_pct", "minutes_total")}  # fmt: skip
    return scene


ZOOM_SPP = 16  # samples per canvas pixel of a zoomed-in reference (x 4 canvas pixels per pixel: 64, as the photos)
_zoomed: dict[tuple[str, int, int], torch.Tensor] = {}  # zoomed-in references, rendered once per process


def zoom_references(scene: Any, zoom: float) -> dict[int, torch.Tensor]:
    """The capture ``scene``'s held-out views at ``zoom`` x its image size, {view: [h,w,3] in [0,1]}:
    zoom 1 / k (k an integer) is the area average of the test photos to 1/k of each side, rounded
    (:func:`~gsworkbench.train.resolution.downsample`; Mip-Splatting's multi-scale protocol); zoom > 1
    renders the views again at that size (:func:`~gsworkbench.synthetic.simulated_capture.pinhole_views`:
    the truth a camera with more pixels would see, without the photos' lens resampling and JPEG), cached
    per process."""
    from gsworkbench.synthetic.simulated_capture import pinhole_views
    from gsworkbench.train.fingerprint import scene_fingerprint
    from gsworkbench.train.resolution import downsample, reduced_size

    if zoom < 1 and abs(round(1 / zoom) * zoom - 1) > 1e-9:
        raise ValueError(f"zoom {zoom}: zooming out needs 1/zoom an integer")
    ids = scene.test_ids.tolist()
    if zoom < 1:
        k = round(1 / zoom)
        w, h = reduced_size(scene.width, scene.height, k)
        return {v: downsample(scene.images[v], w, h) for v in ids}
    w, h = round(scene.width * zoom), round(scene.height * zoom)
    key = (scene_fingerprint(scene)["sha256"], w, h)
    if key not in _zoomed:
        _zoomed[key] = pinhole_views(scene, ids, w, h, spp=ZOOM_SPP)
    return dict(zip(ids, _zoomed[key]))


def zoom_scores(name: str, folder: Path, scene: Any, zooms: tuple[float, ...]) -> dict[str, float]:
    """Mean test PSNR (dB) and SSIM at each of ``zooms`` (:func:`zoom_references`) of the run trained in
    ``folder`` (its final checkpoint: the splats, filter and appearance as training left them)."""
    from gsworkbench.train import Trainer

    if not zooms:
        return {}
    trainer = Trainer.from_checkpoint(folder / "checkpoint.pt", scene)
    out: dict[str, float] = {}
    for zoom in zooms:
        table, _ = trainer.evaluate(references=zoom_references(scene, zoom))
        out[f"psnr_x{zoom:g}_db"] = round(float(table["psnr_db"].mean()), 2)
        out[f"ssim_x{zoom:g}"] = round(float(table["ssim"].mean()), 4)
    return out


CAPTURE = dict(iterations=3000, refine_start=300, refine_stop=2500, reset_every=1000, sh_degree_interval=500)
# the room seen from inside (walls, floor, objects; no point cloud): a scene the presets were not tuned on
ROOM = dict(name="room", n_train=40, n_test=8, n_points=0)
INSIDE = "NeRF-synthetic (inside a room)"
BRICKS = "NeRF-synthetic (the bricks scene)"
BRICKS_400 = dict(width=400, height=400, downsample=1)
HALF = {"init_scale": 0.5}  # initial scales at half the 3-NN distance (3DGS: the whole distance)
EXPOSURE = "nerfstudio OPENCV, exposure and white balance per photo"
RECONSTRUCTED = "photos only (reconstruct)"
ALIGNED = {"eval_pose_steps": 100}  # test-time alignment of each held-out photo's pose (lr_eval_pose)
POSE_OPT = {"pose_opt": True, "intrinsics_opt": True, "lr_pose": 3e-4}
ZOOMS = (2.0, 0.25)
ZOOM_LAYOUT = "nerfstudio OPENCV (distorted JPEG), scored at 2x and 1/4 too"
RUNS: dict[str, QualityRun] = {
    "nerf_synthetic": QualityRun("nerf_synthetic"),
    "nerf_synthetic_cloud": QualityRun("nerf_synthetic", scene_overrides={"n_points": 3000}),
    "nerf_synthetic_cube": QualityRun("nerf_synthetic", {"init_rule": "cube"}),
    "nerf_synthetic_init_half": QualityRun("nerf_synthetic", HALF),
    "nerf_synthetic_400": QualityRun("nerf_synthetic_400"),
    "nerf_synthetic_800": QualityRun("nerf_synthetic_800"),
    # the bricks scene (studs, thin rods, glossy and printed parts) under lego's protocols (how it compares
    # with lego: docs/performance.md). Rendered at 400 px (64 samples over each pixel: the footprint and box
    # filter of the preset's 2x downsample of 800 px renders), which costs a quarter of the 800 px render.
    "bricks_400": QualityRun("nerf_synthetic_400", scene_overrides={"name": "bricks", **BRICKS_400}, layout=BRICKS),
    "bricks_800": QualityRun("nerf_synthetic_800", scene_overrides={"name": "bricks"}, layout=BRICKS),
    "room": QualityRun("nerf_synthetic", scene_overrides=ROOM, layout="NeRF-synthetic (inside a room)"),
    "room_init_half": QualityRun("nerf_synthetic", HALF, ROOM, layout="NeRF-synthetic (inside a room)"),
    "room_frustum": QualityRun("nerf_synthetic", {"init_rule": "frustum"}, ROOM, layout=INSIDE),
    "room_cloud": QualityRun("nerf_synthetic", scene_overrides={**ROOM, "n_points": 3000},
                             layout="NeRF-synthetic (inside a room), with its point cloud"),
    "capture": QualityRun("short", CAPTURE, scene=_capture(False), layout="nerfstudio OPENCV (distorted JPEG)"),
    "capture_init_half": QualityRun("short", {**CAPTURE, **HALF}, scene=_capture(False),
                                    layout="nerfstudio OPENCV (distorted JPEG)"),  # fmt: skip
    "capture_pinhole": QualityRun("short", CAPTURE, scene=_capture(True), layout="pinhole twin (no lens)"),
    # posed, without a cloud: random points where the cameras look, or points triangulated with the poses fixed
    "capture_nocloud_random": QualityRun("short", {**CAPTURE, "init_triangulate": False}, scene=_capture(False, False),
                                         layout="nerfstudio OPENCV, no point cloud"),  # fmt: skip
    "capture_nocloud_sfm": QualityRun("short", CAPTURE, scene=_capture(False, False),
                                      layout="nerfstudio OPENCV, no point cloud"),  # fmt: skip
    # ... and with points for what the triangulated cloud misses (gsworkbench.train.init_background):
    # a far shell coloured from the photos, or points where the photos agree but SfM kept none
    "capture_nocloud_sfm_shell": QualityRun("short", {**CAPTURE, "init_shell": True}, scene=_capture(False, False),
                                            layout="nerfstudio OPENCV, no point cloud"),  # fmt: skip
    "capture_nocloud_sfm_fill": QualityRun("short", {**CAPTURE, "init_fill": True}, scene=_capture(False, False),
                                           layout="nerfstudio OPENCV, no point cloud"),  # fmt: skip
    # the fill where the scene's own cloud leaves little background
    "capture_fill": QualityRun("short", {**CAPTURE, "init_fill": True}, scene=_capture(False),
                               layout="nerfstudio OPENCV (distorted JPEG)"),  # fmt: skip
    # the photos alone: poses, lens and points from reconstruct, the same test photos held out
    "capture_reconstructed": QualityRun("short", CAPTURE, layout="photos only (reconstruct)", reconstructed=True),
    # per-photo exposure: without and with a learned colour transform per photo (gsworkbench.train.appearance)
    "capture_affine": QualityRun("short", {**CAPTURE, "appearance": "affine", "lr_appearance": 5e-3},
                                 scene=_capture(False), layout="nerfstudio OPENCV (distorted JPEG)"),  # fmt: skip
    # camera refinement: the photos alone through reconstruct (poses, one lens, points), each held-out
    # photo's pose aligned to it with the splats fixed before scoring (a recovered held-out pose is as
    # wrong as the training ones); without and with refinement, and the same protocol on the true poses and
    # lens with points triangulated from the photos (the start reconstruct gives, without its pose errors)
    "capture_sfm_aligned": QualityRun("short", {**CAPTURE, **ALIGNED}, scene=_capture(False, False),
                                      layout="true poses and lens, triangulated points"),  # fmt: skip
    "capture_reconstructed_aligned": QualityRun("short", {**CAPTURE, **ALIGNED}, layout=RECONSTRUCTED,
                                                reconstructed=True),  # fmt: skip
    "capture_reconstructed_pose_opt": QualityRun("short", {**CAPTURE, **ALIGNED, **POSE_OPT}, layout=RECONSTRUCTED,
                                                 reconstructed=True),  # fmt: skip
    "capture_exposure": QualityRun("short", CAPTURE, scene=_capture_exposure(), layout=EXPOSURE),
    "capture_exposure_affine": QualityRun("short", {**CAPTURE, "appearance": "affine", "lr_appearance": 5e-3},
                                          scene=_capture_exposure(), layout=EXPOSURE),  # fmt: skip
    # anti-aliasing where the image size changes: trained at 256x192, scored also at 2x (zoom in) and at 1/4
    # (zoom out); classic 3DGS, Mip-Splatting's 2D filter, its 3D filter, both, and both with the paper's
    # 2D filter variance (0.1 px^2 instead of the 3DGS dilation's 0.3)
    **{f"capture_zoom_{arm}": QualityRun("short", {**CAPTURE, **settings}, scene=_capture(False), layout=ZOOM_LAYOUT,
                                         zooms=ZOOMS)
       for arm, settings in {"classic": {}, "aa2d": {"rasterize_mode": "antialiased"},
                             "filter3d": {"filter_3d": True},
                             "both": {"rasterize_mode": "antialiased", "filter_3d": True},
                             "mip": {"rasterize_mode": "antialiased", "filter_3d": True, "eps2d": 0.1}}.items()},
}


def run_quality(name: str, out: Path, seed: int | None = None, commit: str | None = None) -> dict[str, Any]:
    """Trains run ``name`` (with ``seed`` for the training, else the preset's) into ``out/<name>/``
    (``<name>-s<seed>``) and returns its row. ``commit``: the code's commit for the row (default: the
    checkout's now; a table passes the one it started at, since the checkout may move while it runs)."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset, preset_scene, train

    if name not in RUNS:
        raise ValueError(f"unknown quality run {name!r}; runs: {', '.join(RUNS)}")
    spec = RUNS[name]
    if spec.reconstructed:
        scene = _reconstructed_capture(out / "reconstructed-scene")  # one reconstruction for every such run
    elif spec.scene is not None:
        scene = spec.scene()
    else:
        scene = builtin_scene(**{**preset_scene(spec.preset), **spec.scene_overrides})
    cfg = preset(spec.preset, progress=False, **{**spec.overrides, **({} if seed is None else {"seed": seed})})
    t0 = time.perf_counter()
    run_dir = out / (name if seed is None else f"{name}-s{seed}")
    result = train(scene, cfg, results_dir=run_dir)
    minutes = round((time.perf_counter() - t0) / 60, 2)
    m = result.metrics
    return {
        "run": name, "seed": cfg.seed, "layout": spec.layout,
        "views": f"{len(scene.train_ids)} + {len(scene.test_ids)}",
        "size": f"{scene.width}x{scene.height}", "init_rule": m["init_rule"], "init_scale": cfg.init_scale,
        "steps": m["iterations"],
        "minutes": minutes, "gaussians": m["num_gaussians"],
        "psnr_db": round(m["psnr_db"], 2), "ssim": round(m["ssim"], 4), "lpips": m["lpips"],
        "psnr_cc_db": round(m["psnr_cc_db"], 2),
        "psnr_background_db": round(m["psnr_background_db"], 2), "ssim_background": round(m["ssim_background"], 4),
        **zoom_scores(name, run_dir, scene, spec.zooms),
        "scene_sha256": m["scene_sha256"], "commit": commit or short_commit(), **scene.source.get("reconstruction", {}),
        **{k: round(v, 3) for k, v in m.items() if k.endswith(("_correction_deg_median", "_correction_pct_median"))},
    }  # fmt: skip


def quality_table(
    names: list[str], out: str | Path | None = None, seeds: list[int] | None = None
) -> tuple[pd.DataFrame, Path]:
    """Runs ``names`` in turn into one folder (a new ``results/<run-id>/`` by default), each once per
    seed of ``seeds`` (None: once, at the preset's seed), the seeds interleaved (run A and B at seed 0,
    then at seed 1, ...) so that a drift in the machine hits both alike; writes ``quality.csv`` after
    each run, so an interrupted table keeps its finished rows."""
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        raise ValueError(f"unknown quality run(s) {', '.join(unknown)}; runs: {', '.join(RUNS)}")
    commit = short_commit()  # the code this process runs: the one imported now, not the checkout at each row
    folder = Path(out) if out is not None else new_run_dir("quality")
    write_metadata(folder, {"runs": names, "seeds": seeds})
    rows: list[dict[str, Any]] = []
    for seed in seeds if seeds else [None]:
        for name in names:
            rows.append(run_quality(name, folder, seed, commit))
            write_table(folder / "quality.csv", pd.DataFrame(rows))
    return pd.DataFrame(rows), folder
