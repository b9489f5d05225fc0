"""Loader of the transforms.json layouts: NeRF-synthetic ("Blender"), instant-ngp and nerfstudio.

A folder with ``transforms_train.json`` and ``transforms_test.json`` (``transforms_val.json`` is
ignored), or a single ``transforms.json``. The files' keys are described in
:mod:`gsworkbench.scenes.transforms_json` (frames, poses, bounds) and :mod:`gsworkbench.scenes.lens`
(camera keys at file level or per frame, distortion); what happens to the images (missing files,
``images_N`` folders, undistortion, per-view sizes) in :mod:`gsworkbench.scenes.views`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from gsworkbench.scenes.images import check_background, check_downsample, check_folder_and_split
from gsworkbench.scenes.points import read_points_ply
from gsworkbench.scenes.scene import Scene
from gsworkbench.scenes.transforms_json import (
    GL_TO_CV,
    frame_views,
    json_bounds,
    read_transforms,
    split_names,
)
from gsworkbench.scenes.views import View, assemble, check_missing, drop_missing, use_downsampled_folder

__all__ = ["GL_TO_CV", "POINTS_FILE", "load_blender"]

POINTS_FILE = "points3D.ply"


def _downsampled_candidates(folder: Path, d: int):
    """nerfstudio's ``images_d/<file name>``, then ``<image folder>_d/<file name>``."""

    def candidates(v: View) -> list[Path]:
        return [
            folder / f"images_{d}" / v.image.name,
            v.image.parent.with_name(f"{v.image.parent.name}_{d}") / v.image.name,
        ]

    return candidates


def load_blender(
    path: str | os.PathLike[str],
    *,
    background: tuple[float, float, float] = (1.0, 1.0, 1.0),
    downsample: int = 1,
    split_test_every: int | None = None,
    missing: str = "skip",
    cache_dir: str | os.PathLike[str] | None = None,
) -> Scene:
    """Loads a transforms.json folder (NeRF-synthetic, instant-ngp or nerfstudio) as a :class:`Scene`.

    Views are the train frames, then the test frames, in file order. A lone ``transforms.json`` is split
    by its ``test_filenames`` where it has them, else every 8th frame (from the first) is a test view.
    ``split_test_every=N`` pools all frames and makes every N-th a test view instead. Frames without an
    image file are skipped with one warning (``missing="error"``: a FileNotFoundError). Distorted
    cameras are undistorted (cached under ``cache_dir``, default the scene cache), views of different
    sizes are cropped to a common size (:mod:`gsworkbench.scenes.views`), RGBA images are composited
    over ``background``. ``downsample=d`` uses an ``images_d`` folder where one holds every image, else
    box-averages by d. The initial point cloud is ``ply_file_path`` (nerfstudio) or ``points3D.ply``
    beside the JSON files; ``bounds`` are instant-ngp's scene box where the file states one.
    """
    folder = Path(path)
    bg = check_background(background)
    d = check_downsample(downsample)
    how = check_missing(missing)
    check_folder_and_split(folder, "split_test_every", split_test_every)
    train_file, test_file, single = (
        folder / f for f in ("transforms_train.json", "transforms_test.json", "transforms.json")
    )
    if train_file.is_file():
        if not test_file.is_file() and split_test_every is None:
            raise FileNotFoundError(f"{test_file} not found (pass split_test_every to split the train frames)")
        files = [train_file] + ([test_file] if test_file.is_file() else [])
    elif single.is_file():
        files = [single]
    else:
        raise FileNotFoundError(f"no transforms_train.json or transforms.json in {folder}")

    metas = [read_transforms(f) for f in files]
    listed: list[View] = []
    for f, meta in zip(files, metas):
        listed += frame_views(folder, f, meta, "test" if f == test_file else "train")
    views = drop_missing(listed, how, " and ".join(str(f) for f in files))
    if split_test_every is not None:
        for i, v in enumerate(views):
            v.is_test = i % split_test_every == 0
    elif files == [single]:
        test = split_names(metas[0], folder, single)
        for i, v in enumerate(views):
            v.is_test = (i % 8 == 0) if test is None else v.image in test
    views, box = use_downsampled_folder(views, d, _downsampled_candidates(folder, d), folder)
    images, alphas, Ks = assemble(views, bg, box, cache_dir)
    viewmats = torch.tensor(np.stack([v.viewmat for v in views]), dtype=torch.float32)

    ply = metas[0].get("ply_file_path")
    points_file = folder / ply if isinstance(ply, str) else folder / POINTS_FILE
    if isinstance(ply, str) and not points_file.is_file():
        raise FileNotFoundError(f"{files[0]}: ply_file_path {ply!r} not found ({points_file})")
    points, colors = read_points_ply(points_file) if points_file.is_file() else (None, None)
    bounds = next((b for b in (json_bounds(m, f) for f, m in zip(files, metas)) if b is not None), None)
    return Scene.from_views(
        images, viewmats, Ks, torch.tensor([v.is_test for v in views]), points=points, point_colors=colors,
        background=bg, name=folder.name, alphas=alphas, image_names=[v.name for v in views],
        bounds=None if bounds is None else torch.tensor(bounds, dtype=torch.float32),
        source={"folder": str(folder.resolve())},
    )  # fmt: skip
