"""Posed photos without a point cloud: points triangulated with the poses held fixed (the "sfm" init
rule): they lie on the scene's surfaces, only train views are used, and the result is cached."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from gsworkbench.scenes import Scene
from gsworkbench.sfm.triangulate import triangulate_views
from gsworkbench.studies.photo_set import arc_cameras, render
from gsworkbench.train import Trainer, preset
from gsworkbench.train.init_points import initial_points


@pytest.fixture(scope="module")
def posed() -> Scene:
    viewmats, K = arc_cameras(12)
    images = torch.from_numpy(render(viewmats, K)).float() / 255.0
    is_test = torch.tensor([i % 6 == 0 for i in range(12)])
    return Scene.from_views(images, viewmats, K.expand(12, 3, 3).clone(), is_test, points=None, point_colors=None,
                            background=(0.5, 0.5, 0.5), name="posed photos")  # fmt: skip


def _surface_distance(p: np.ndarray) -> np.ndarray:
    """Distance of points [P,3] to the photo scene's surfaces (the floor z = -0.6, the cube of half side 0.6)."""
    floor = np.abs(p[:, 2] + 0.6)
    cube = np.abs(np.abs(p).max(axis=1) - 0.6)
    return np.minimum(floor, cube)


def test_sfm_points_lie_on_the_surfaces(posed: Scene, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GSW_SCENE_CACHE", str(tmp_path))
    pts, cols, info = initial_points(posed, preset("smoke"), torch.Generator().manual_seed(0))
    assert info["rule"] == "sfm" and info["views"] == len(posed.train_ids) == 10 and not info["cached"]
    assert len(pts) >= 300 and cols.shape == pts.shape and float(cols.min()) >= 0 and float(cols.max()) <= 1
    d = _surface_distance(pts.numpy())
    assert np.median(d) < 0.03 and np.percentile(d, 90) < 0.1  # the splats are 0.012 in size
    again = initial_points(posed, preset("smoke"), torch.Generator().manual_seed(0))
    assert again[2]["cached"] and torch.equal(again[0], pts)
    off = initial_points(posed, preset("smoke", init_triangulate=False), torch.Generator().manual_seed(0))
    assert off[2]["rule"] == "frustum"


def test_only_the_train_views_are_used(posed: Scene, tmp_path) -> None:
    """The test views' images must not shape the start: changing them changes nothing."""
    ids = posed.train_ids
    base = triangulate_views(posed.images[ids], posed.viewmats[ids], posed.Ks[ids], cache_dir=tmp_path)
    changed = posed.images.clone()
    changed[posed.test_ids] = 0.0
    other = dataclasses.replace(posed, images=changed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GSW_SCENE_CACHE", str(tmp_path))
        pts, _, info = initial_points(other, preset("smoke"), torch.Generator().manual_seed(0))
    assert info["cached"] and torch.equal(pts, base[0])


def test_the_trainer_records_the_rule(posed: Scene, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GSW_SCENE_CACHE", str(tmp_path))
    trainer = Trainer(posed, preset("smoke", iterations=2))
    assert trainer.init_info["rule"] == "sfm"


def test_too_few_views_are_refused() -> None:
    viewmats, K = arc_cameras(1)
    with pytest.raises(ValueError, match="at least 2 views"):
        triangulate_views(torch.zeros(1, 8, 8, 3), viewmats, K[None])
