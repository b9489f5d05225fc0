"""Points for what the sparse cloud misses (issue 49 §3): the far shell and the fill points of
:mod:`gsworkbench.train.init_background`, their settings and their record in the run's init_info."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gsworkbench.core.cameras import intrinsics_from_fov, look_at
from gsworkbench.scenes.scene import Scene
from gsworkbench.train import TrainConfig, preset
from gsworkbench.train.evaluate import sfm_background_mask
from gsworkbench.train.init_background import fill_points, shell_points
from gsworkbench.train.init_points import initial_splats, sparse_cloud
from gsworkbench.train.train_views import TrainViews

SIZE = 48
SKY = (0.25, 0.55, 0.8)
HEIGHT = 2.0  # the cameras' height above the floor plane z = 0


def _cameras(n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """n cameras on a circle of radius 2 at HEIGHT, looking at a point 1.2 above the origin (the floor in
    the lower half of the view, the sky above the horizon in the upper): viewmats [n,4,4], Ks [n,3,3]."""
    eyes = [(2 * math.cos(2 * math.pi * i / n), 2 * math.sin(2 * math.pi * i / n), HEIGHT) for i in range(n)]
    viewmats = torch.stack([look_at(e, (0.0, 0.0, 1.2)) for e in eyes])
    Ks = intrinsics_from_fov(SIZE, SIZE, 60.0)[None].repeat(n, 1, 1)
    return viewmats, Ks


def _floor_colour(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The floor's texture [...,3] at world (x, y): smooth, and different from place to place."""
    return torch.stack([0.5 + 0.4 * torch.sin(3 * x + 1) * torch.cos(2 * y), 0.5 + 0.4 * torch.sin(2.3 * y - 0.5),
                        0.5 + 0.4 * torch.cos(1.7 * x + 2.1 * y)], -1)  # fmt: skip


def _scene(floor: bool, cloud: torch.Tensor | None = None) -> Scene:
    """Views of the sky colour alone, or of a textured floor (z = 0) under the sky; ``cloud`` [P,3] its
    sparse points (grey)."""
    viewmats, Ks = _cameras()
    images = torch.empty(len(viewmats), SIZE, SIZE, 3)
    v, u = torch.meshgrid(torch.arange(SIZE) + 0.5, torch.arange(SIZE) + 0.5, indexing="ij")
    for i, (vm, K) in enumerate(zip(viewmats, Ks)):
        d_cam = torch.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], torch.ones_like(u)], -1)
        R, t = vm[:3, :3], vm[:3, 3]
        d = d_cam @ R  # world directions (R^T d)
        eye = -R.T @ t
        s = -eye[2] / d[..., 2]  # where the ray meets z = 0
        hit = floor & (d[..., 2] < 0)
        x, y = eye[0] + s * d[..., 0], eye[1] + s * d[..., 1]
        images[i] = torch.where(torch.as_tensor(hit)[..., None], _floor_colour(x, y), torch.tensor(SKY))
    is_test = torch.zeros(len(viewmats), dtype=torch.bool)
    colours = None if cloud is None else torch.full_like(cloud, 0.5)
    return Scene.from_views(images, viewmats, Ks, is_test, points=cloud, point_colors=colours, background=(1, 1, 1),
                            name="floor" if floor else "sky")  # fmt: skip


SKY_SCENE = _scene(floor=False)


@settings(max_examples=15, deadline=None)
@given(factor=st.floats(1.01, 40.0), num=st.integers(1, 400))
def test_shell_points_lie_on_the_sphere_beyond_every_camera(factor, num):
    views = TrainViews.of(SKY_SCENE, images=True)
    centre = SKY_SCENE.camera_centers().mean(0)
    radius = factor * SKY_SCENE.scene_scale
    pts, colours, info = shell_points(views, centre, radius, num, torch.Generator().manual_seed(0), 0.01)
    assert pts.shape == (num, 3) and colours.shape == (num, 3) and info["num"] == num
    torch.testing.assert_close((pts - centre).norm(dim=1), torch.full((num,), radius), rtol=1e-5, atol=1e-4)
    far = (pts[:, None, :] - SKY_SCENE.camera_centers()[None]).norm(dim=2).min(1).values
    assert bool((far > 0).all()) and bool(((pts - centre).norm(dim=1) > (SKY_SCENE.camera_centers() - centre).norm(
        dim=1).max()).all())  # fmt: skip
    assert bool((views.views_seeing(pts, 0.01) > 0).all())  # only where a train view looks
    torch.testing.assert_close(colours, torch.tensor(SKY).expand(num, 3), atol=1e-6, rtol=0)  # the photos' colour


def test_shell_colours_come_from_the_views_that_see_each_point():
    scene = _scene(floor=True)  # sky above the horizon, the floor below it
    views = TrainViews.of(scene, images=True)
    centre = scene.camera_centers().mean(0)
    pts, colours, _ = shell_points(views, centre, 20 * scene.scene_scale, 500, torch.Generator().manual_seed(1), 0.01)
    sky = (colours - torch.tensor(SKY)).abs().max(1).values < 1e-6
    up = pts[:, 2] > centre[2] + 1.0  # clearly above the cameras: every view that sees it sees sky there
    assert bool(up.any()) and bool(sky[up].all())
    down = pts[:, 2] < -1.0  # below the floor: the views see the floor in front of it
    assert bool(down.any()) and not bool(sky[down].any())


def test_fill_points_lie_on_the_floor_where_the_cloud_has_none():
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(400, 2, generator=g) * 3 - 1.5
    half = xy[xy[:, 0] < 0]  # the sparse cloud covers the floor's x < 0 half
    cloud = torch.cat([half, torch.zeros(len(half), 1)], 1)
    scene = _scene(floor=True, cloud=cloud)
    views = TrainViews.of(scene, images=True)
    pts, colours, info = fill_points(views, cloud, 300, torch.Generator().manual_seed(2), 0.01)
    assert 0 < info["num"] == len(pts) <= 300 and colours.shape == pts.shape
    masks = [sfm_background_mask(cloud, scene.viewmats[v], scene.Ks[v], SIZE, SIZE) for v in range(len(views))]
    x, y, seen = views.project(pts, 0.01)
    in_background = torch.zeros(len(pts), dtype=torch.bool)
    for v, m in enumerate(masks):  # each point lies on a background pixel of some view (the one it came from)
        px, py = x[v].clamp(0, SIZE - 1).long(), y[v].clamp(0, SIZE - 1).long()
        in_background |= seen[v] & torch.from_numpy(m)[py, px]
    assert bool(in_background.all())
    # rays through the floor: photo-consistency finds it (the textured floor agrees across views only
    # there); rays through the sky agree at every depth, so their depth says nothing
    floor_ray = (colours - torch.tensor(SKY)).abs().max(1).values > 1e-6
    assert int(floor_ray.sum()) >= 50
    on_floor = pts[floor_ray][:, 2].abs() < 0.15 * HEIGHT
    assert float(on_floor.float().mean()) > 0.8
    p = pts[floor_ray][on_floor]
    error = (colours[floor_ray][on_floor] - _floor_colour(p[:, 0], p[:, 1])).abs().max(1).values
    assert float(error.median()) < 0.05  # the ray's pixel: the floor's colour where the point lies


def test_initial_splats_add_the_shell_and_record_it():
    cloud = torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.5, 0.0], [0.3, 0.3, 0.0]])
    scene = _scene(floor=False, cloud=cloud)
    base_cfg = preset("smoke", init_num=None)
    base, info = initial_splats(scene, base_cfg, torch.Generator().manual_seed(0))
    assert "shell" not in info and "fill" not in info
    cfg = base_cfg.with_flat(init_shell=True, init_shell_num=64, init_shell_radius=5.0)
    both, info = initial_splats(scene, cfg, torch.Generator().manual_seed(0))
    assert info["rule"] == "points" and info["shell"]["num"] == 64
    assert info["shell"]["radius"] == pytest.approx(5.0 * scene.scene_scale, rel=1e-4)
    assert len(both) == len(base) + 64
    torch.testing.assert_close(both.means[: len(base)], base.means)  # the rule's start is as without the shell
    shell_scales = both.log_scales[len(base) :].exp()
    spacing = math.sqrt(4 * math.pi * info["shell"]["radius"] ** 2 / 64)  # at most the whole sphere's spacing
    assert float(shell_scales.median()) > 0.2 * spacing  # neighbours on the shell overlap, not points


def test_fill_needs_a_cloud_and_the_background_follows_it():
    scene = _scene(floor=False)
    cfg = preset("smoke", init_rule="frustum", init_fill=True, init_random_num=200)
    _, info = initial_splats(scene, cfg, torch.Generator().manual_seed(0))
    assert info["fill"]["num"] == 0 and "no sparse cloud" in info["fill"]["skipped"]
    assert sparse_cloud(scene, info) is None  # a random start: no background to score
    cloud = torch.zeros(3, 3)
    assert sparse_cloud(_scene(floor=False, cloud=cloud), {"rule": "points"}) is cloud


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [("init_shell_radius", 1.0, "init_shell_radius"), ("init_shell_radius", 0.5, "init_shell_radius"),
     ("init_shell_num", 0, "init_shell_num"), ("init_fill_num", -3, "init_fill_num"),
     ("init_shell", "yes", "init_shell"), ("init_fill", 1.5, "init_fill")],
)  # fmt: skip
def test_bad_settings_are_one_line_errors(key, value, words):
    with pytest.raises(ValueError, match=words) as err:
        TrainConfig(**{key: value})
    assert "\n" not in str(err.value)
