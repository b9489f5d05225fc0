"""The built-in synthetic datasets: rendered by Mitsuba 3, written in both layouts, cached, then loaded.

A generated folder holds
- ``images/view_NNN.png``: RGBA (straight alpha, sRGB), the train views first, then the test views;
- ``transforms_train.json`` / ``transforms_test.json``: the NeRF-synthetic layout (frames name the
  images without extension, as the original dataset does);
- ``sparse/0/``: a binary COLMAP model (one PINHOLE camera, the posed images, the point cloud);
- ``points3D.ply``: the same point cloud, a few thousand surface points with their observed colours,
  found by casting rays through random pixels of the train views into the Mitsuba scene. With
  ``n_points=0`` there is no cloud: no ``points3D.ply`` and no points in the COLMAP model (the
  NeRF-synthetic layout as the original dataset ships it, for training from random initialisation;
  the images are the same as with a cloud, since the points are sampled after rendering);
- ``scene.json``: the parameters, the split, the generator version and the generation times.

The "capture" scene has a layout of its own, a photo capture's (:mod:`gsworkbench.synthetic.simulated_capture`).

Folders are cached under ``$GSW_SCENE_CACHE`` (default ``~/.cache/gsworkbench/scenes``), keyed by a hash
of every parameter and :data:`GENERATOR_VERSION`. A folder is built in a temporary sibling and renamed
into place, so an interrupted generation leaves no entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gsworkbench._libz import check_import_order
from gsworkbench.core.atomic import write_json
from gsworkbench.scenes.blender import GL_TO_CV, POINTS_FILE, load_blender
from gsworkbench.scenes.cache import scene_cache_dir
from gsworkbench.scenes.colmap import load_colmap, write_colmap
from gsworkbench.scenes.points import write_points_ply
from gsworkbench.scenes.scene import Scene
from gsworkbench.synthetic.mitsuba_render import (
    load_scene_dict,
    render_views,
    stratified_spp,
    to_straight_srgba,
)
from gsworkbench.synthetic.mitsuba_scenes import SYNTHETIC_SCENES
from gsworkbench.synthetic.simulated_capture import write_capture
from gsworkbench.synthetic.surface_points import sample_surface_points, stage_seconds

GENERATOR_VERSION = 2
MANIFEST = "scene.json"
STALE_TMP_S = 3600.0


@dataclass(frozen=True)
class GeneratorParams:
    """Everything a generated scene depends on (sizes in pixels, spp = Mitsuba samples per pixel)."""

    name: str
    width: int
    height: int
    n_train: int
    n_test: int
    spp: int
    seed: int
    n_points: int

    def __post_init__(self) -> None:
        if self.name not in SYNTHETIC_SCENES:
            raise ValueError(f"unknown built-in scene {self.name!r}; choose from {sorted(SYNTHETIC_SCENES)}")
        for key in ("width", "height", "n_train", "spp"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{key} must be a positive integer, got {v!r}")
        for key in ("n_test", "n_points", "seed"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{key} must be a non-negative integer, got {v!r}")

    def key(self) -> str:
        """The cache key: a hash of the parameters, the generator version and the scene's version
        (hashed only from 2 on, so the keys of scenes still at version 1 stay what they were)."""
        version = SYNTHETIC_SCENES[self.name].version
        blob = {**asdict(self), "generator_version": GENERATOR_VERSION}
        if version > 1:
            blob["scene_version"] = version
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]

    def folder_name(self) -> str:
        return f"{self.name}-{self.width}x{self.height}-{self.key()}"


def _save_png(path: Path, rgba: np.ndarray) -> None:
    from PIL import Image

    Image.fromarray(np.round(np.clip(rgba, 0, 1) * 255).astype(np.uint8), mode="RGBA").save(path)


def _write_scene(folder: Path, p: GeneratorParams) -> dict[str, Any]:
    """Renders and writes every file of a generated scene into ``folder``; returns the manifest."""
    if p.name == "capture":  # its own layout: gsworkbench/synthetic/simulated_capture.py
        manifest = {"params": asdict(p), "generator_version": GENERATOR_VERSION,
                    "samples_per_pixel": stratified_spp(p.spp), **write_capture(folder, p)}  # fmt: skip
        write_json(folder / MANIFEST, manifest)
        return manifest
    spec = SYNTHETIC_SCENES[p.name]
    rng = np.random.default_rng(p.seed)
    t0 = time.perf_counter()
    mi_scene = load_scene_dict(spec.build(rng))
    n_views = p.n_train + p.n_test
    viewmats, K, target = spec.cameras(n_views, p.width, p.height, rng)
    # test views spread evenly along the camera path; files list the train views first
    test_pos = set(np.floor((np.arange(p.n_test) + 0.5) * n_views / max(p.n_test, 1)).astype(int).tolist())
    order = [i for i in range(n_views) if i not in test_pos] + sorted(test_pos)
    viewmats = viewmats[order]
    names = [f"images/view_{i:03d}.png" for i in range(n_views)]
    (folder / "images").mkdir()
    t_load = time.perf_counter()
    images = []
    for name, img in zip(names, render_views(mi_scene, viewmats, K, p.width, p.height, p.spp, p.seed)):
        rgba = to_straight_srgba(img)
        _save_png(folder / name, rgba)
        images.append(rgba)
    t_render = time.perf_counter()
    points, colors = sample_surface_points(mi_scene, viewmats[: p.n_train], K, images[: p.n_train], p.n_points, rng)
    t_points = time.perf_counter()

    fov_x = 2.0 * float(np.arctan(0.5 * p.width / float(K[0, 0])))
    for split, ids in (("train", range(p.n_train)), ("test", range(p.n_train, n_views))):
        frames = [
            {
                "file_path": "./" + names[i].removesuffix(".png"),
                "transform_matrix": (np.linalg.inv(viewmats[i].numpy()) @ GL_TO_CV).tolist(),
            }
            for i in ids
        ]
        write_json(folder / f"transforms_{split}.json", {"camera_angle_x": fov_x, "frames": frames})
    if len(points):
        write_points_ply(folder / POINTS_FILE, points, colors)
    write_colmap(
        folder / "sparse" / "0",
        [n.removeprefix("images/") for n in names],
        viewmats.numpy(),
        K.numpy(),
        p.width,
        p.height,
        points,
        colors,
    )
    import mitsuba

    manifest = {
        "params": asdict(p),
        "generator_version": GENERATOR_VERSION,
        "mitsuba": f"{mitsuba.__version__} scalar_rgb, direct integrator, multijitter sampler",
        "samples_per_pixel": stratified_spp(p.spp),
        "look_at_target": list(target),
        "train_images": names[: p.n_train],
        "test_images": names[p.n_train :],
        "num_points": len(points),
        "seconds": stage_seconds(t0, t_load, t_render, t_points),
    }
    write_json(folder / MANIFEST, manifest)
    return manifest


def generate_scene(
    name: str = "object",
    *,
    width: int | None = None,
    height: int | None = None,
    n_train: int | None = None,
    n_test: int | None = None,
    spp: int | None = None,
    seed: int = 0,
    n_points: int = 3000,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """The folder of a generated scene, rendered now or reused from the cache (defaults per scene in
    :data:`~gsworkbench.synthetic.mitsuba_scenes.SYNTHETIC_SCENES`)."""
    spec = SYNTHETIC_SCENES.get(name)
    if spec is None:
        raise ValueError(f"unknown built-in scene {name!r}; choose from {sorted(SYNTHETIC_SCENES)}")
    p = GeneratorParams(
        name=name,
        width=spec.width if width is None else width,
        height=spec.height if height is None else height,
        n_train=spec.n_train if n_train is None else n_train,
        n_test=spec.n_test if n_test is None else n_test,
        spp=spec.spp if spp is None else spp,
        seed=seed,
        n_points=n_points,
    )
    root = scene_cache_dir(cache_dir)
    final = root / p.folder_name()
    if (final / MANIFEST).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(root)
    check_import_order()  # a RuntimeError now, not an abort at the first PNG write
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{p.folder_name()}.tmp-"))
    try:
        _write_scene(tmp, p)
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished the same scene first: keep theirs
            if not (final / MANIFEST).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _remove_stale_tmp(root: Path) -> None:
    """Removes temporary folders that a killed generation left (older than an hour)."""
    now = time.time()
    for d in root.glob(".*.tmp-*"):
        try:
            if now - d.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``scene.json`` of a generated folder."""
    return json.loads((Path(folder) / MANIFEST).read_text())


def builtin_scene(
    name: str = "object",
    *,
    width: int | None = None,
    height: int | None = None,
    n_train: int | None = None,
    n_test: int | None = None,
    spp: int | None = None,
    seed: int = 0,
    n_points: int = 3000,
    cache_dir: str | os.PathLike[str] | None = None,
    layout: Literal["blender", "colmap"] = "blender",
    downsample: int = 1,
    background: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> Scene:
    """A built-in scene ("object", "bricks" or "room"), generated (or reused from the cache) and loaded
    through :func:`load_blender` or :func:`load_colmap`, which give the same views in the same order and split.
    ``n_points=0``: no point cloud (training starts from random points); ``scene.source`` names the
    folder and the generator's cache key."""
    if layout not in ("blender", "colmap"):
        raise ValueError(f"layout must be 'blender' or 'colmap', got {layout!r}")
    folder = generate_scene(
        name,
        width=width,
        height=height,
        n_train=n_train,
        n_test=n_test,
        spp=spp,
        seed=seed,
        n_points=n_points,
        cache_dir=cache_dir,
    )
    if layout == "blender":
        scene = load_blender(folder, background=background, downsample=downsample)
    else:
        test = [n.removeprefix("images/") for n in read_manifest(folder)["test_images"]]
        scene = load_colmap(folder, downsample=downsample, test_names=test, background=background)
    scene.name = name
    # what a training run's fingerprint names: the folder and the generator's cache key
    scene.source = {
        "folder": str(folder),
        "builtin": name,
        "generator_key": folder.name.rsplit("-", 1)[-1],
        "generator_version": GENERATOR_VERSION,
    }
    return scene
