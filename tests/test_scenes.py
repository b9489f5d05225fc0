"""Scenes: the NeRF-synthetic and COLMAP loaders on generated scenes, camera conventions, bad input, cache."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gsworkbench.scenes import Scene, camera_extent, detect_layout, load_blender, load_colmap, load_scene
from gsworkbench.scenes.views import MissingImagesWarning
from gsworkbench.synthetic import builtin_scene, generate_scene
from gsworkbench.synthetic import generate as generate_mod

TINY = dict(width=64, height=48, n_train=5, n_test=2, spp=4, n_points=300)


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scene_cache")


@pytest.fixture(scope="session")
def object_dir(cache: Path) -> Path:
    return generate_scene("object", cache_dir=cache, **TINY)


@pytest.fixture
def scene_copy(object_dir: Path, tmp_path: Path) -> Path:
    """A writable copy of the generated object scene."""
    return Path(shutil.copytree(object_dir, tmp_path / "scene"))


def project(points: torch.Tensor, viewmat: torch.Tensor, K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel coordinates [P,2] and depths [P] of world points [P,3] (float64)."""
    cam = points.double() @ viewmat[:3, :3].double().T + viewmat[:3, 3].double()
    uvw = cam @ K.double().T
    return uvw[:, :2] / uvw[:, 2:], cam[:, 2]


def test_layouts_give_the_same_scene(object_dir: Path) -> None:
    b = load_blender(object_dir)
    c = load_colmap(object_dir, test_names=[f"view_{i:03d}.png" for i in range(5, 7)])
    assert b.image_names == c.image_names and len(b) == 7
    assert (b.viewmats - c.viewmats).abs().max() < 1e-6
    assert (b.Ks - c.Ks).abs().max() < 1e-6
    assert torch.equal(b.images, c.images) and torch.equal(b.alphas, c.alphas)
    assert b.train_ids.tolist() == c.train_ids.tolist() == [0, 1, 2, 3, 4]
    assert b.test_ids.tolist() == c.test_ids.tolist() == [5, 6]
    assert b.points.shape == (300, 3) and (b.points - c.points).abs().max() < 1e-6
    assert torch.equal(b.point_colors, c.point_colors)
    assert b.scene_scale == pytest.approx(c.scene_scale, rel=1e-6)
    # builtin_scene goes through the same loaders and keeps the split in both layouts
    for layout in ("blender", "colmap"):
        s = builtin_scene("object", cache_dir=object_dir.parent, layout=layout, **TINY)
        assert torch.equal(s.images, b.images) and s.test_ids.tolist() == [5, 6]


def test_colmap_text_model_and_test_every(object_dir: Path, tmp_path: Path) -> None:
    import pycolmap

    folder = tmp_path / "text"
    shutil.copytree(object_dir / "images", folder / "images")
    (folder / "sparse").mkdir(parents=True)
    pycolmap.Reconstruction(str(object_dir / "sparse" / "0")).write_text(str(folder / "sparse"))
    assert (folder / "sparse" / "cameras.txt").is_file()
    t = load_scene(folder, test_every=3)
    b = load_colmap(object_dir, test_every=3)
    assert (t.viewmats - b.viewmats).abs().max() < 1e-6 and (t.Ks - b.Ks).abs().max() < 1e-6
    assert t.test_ids.tolist() == [0, 3, 6]  # every 3rd view, sorted by name, from the first
    assert load_colmap(object_dir, test_every=None).test_ids.numel() == 0


def test_projection_matches_the_rendered_images(object_dir: Path) -> None:
    """Surface points land on covered pixels and the look-at target on the image centre in every view:
    this checks the OpenGL->OpenCV flip of the Blender loader against Mitsuba's own images."""
    s = load_blender(object_dir)
    assert s.alphas is not None
    centre, _ = project(torch.zeros(1, 3), s.viewmats[0], s.Ks[0])
    for v in range(len(s)):
        c, depth = project(torch.zeros(1, 3), s.viewmats[v], s.Ks[v])
        assert torch.allclose(c, torch.tensor([[s.width / 2, s.height / 2]], dtype=torch.float64), atol=1e-3)
        assert depth.item() > 0

    def covered_fraction(viewmats: torch.Tensor) -> float:
        # coverage dilated by one pixel: a silhouette pixel may get no sample at 4 spp
        alpha = F.max_pool2d(s.alphas.permute(0, 3, 1, 2), 3, stride=1, padding=1)[:, 0]
        hits = total = 0
        for v in range(len(s)):
            uv, depth = project(s.points, viewmats[v], s.Ks[v])
            inside = (depth > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < s.width) & (uv[:, 1] >= 0) & (uv[:, 1] < s.height)
            px = uv[inside].floor().long()
            hits += int((alpha[v, px[:, 1], px[:, 0]] > 0).sum())
            total += int(inside.sum())
        return hits / max(total, 1)

    assert covered_fraction(s.viewmats) > 0.995
    # the same check fails for cameras without the flip (OpenGL axes taken as OpenCV ones)
    flip = torch.diag(torch.tensor([1.0, -1.0, -1.0, 1.0]))
    assert covered_fraction(flip @ s.viewmats) < 0.5


def test_point_colors_match_pixels(object_dir: Path) -> None:
    s = load_blender(object_dir)
    # every point was seen through a pixel of some train view; its colour is that pixel's straight colour
    assert s.point_colors.min() >= 0 and s.point_colors.max() <= 1
    assert s.point_colors.std(0).min() > 0.05  # textured, not one flat colour


def test_scale_split_subset_to(object_dir: Path) -> None:
    s = load_blender(object_dir)
    meta = [json.loads((object_dir / f"transforms_{k}.json").read_text()) for k in ("train", "test")]
    centres = torch.tensor([f["transform_matrix"] for m in meta for f in m["frames"]], dtype=torch.float64)[:, :3, 3]
    assert torch.allclose(s.camera_centers().double(), centres, atol=1e-5)
    expected = 1.1 * float((centres - centres.mean(0)).norm(dim=1).max())
    assert s.scene_scale == pytest.approx(expected, rel=1e-6)
    assert camera_extent(s.viewmats) == pytest.approx(expected, rel=1e-6)
    assert (len(s.train_ids), len(s.test_ids), s.width, s.height) == (5, 2, 64, 48)
    sub = s.subset([6, 1, 3])
    assert len(sub) == 3 and torch.equal(sub.images[0], s.images[6]) and torch.equal(sub.viewmats[1], s.viewmats[1])
    assert sub.train_ids.tolist() == [1, 2] and sub.test_ids.tolist() == [0]
    assert sub.image_names == [s.image_names[i] for i in (6, 1, 3)]
    m = s.to("meta")
    assert m.images.device.type == "meta" and m.points.device.type == "meta" and m.width == s.width
    with pytest.raises(ValueError, match="subset ids"):
        s.subset([7])
    with pytest.raises(ValueError, match="images must be"):
        Scene(**{**s.__dict__, "width": 65})


@pytest.mark.parametrize("every", [2, 3, 10])
def test_validation_split_never_holds_a_test_view(every: int) -> None:
    """The tuning split: every ``every``-th training view held out, the rest trained on, the scene's test
    views gone; each view keeps its image and camera."""
    V, test = 23, [0, 5, 11, 22]
    is_test = torch.zeros(V, dtype=torch.bool)
    is_test[test] = True
    images = torch.arange(V, dtype=torch.float32)[:, None, None, None].expand(V, 2, 2, 3).clone()
    viewmats = torch.eye(4).repeat(V, 1, 1)
    viewmats[:, 0, 3] = torch.randn(V)
    s = Scene.from_views(images, viewmats, torch.eye(3).repeat(V, 1, 1), is_test, points=None, point_colors=None,
                         background=(1.0, 1.0, 1.0), name="views")
    v = s.validation_split(every)
    train = [i for i in range(V) if i not in test]
    assert len(v) == len(train) and v.scene_scale == s.scene_scale
    origin = v.images[:, 0, 0, 0].long().tolist()  # each view's index in s
    assert origin == train and torch.equal(v.viewmats, s.viewmats[train])
    held = [origin[i] for i in v.test_ids.tolist()]
    assert held == train[::every] and not set(held) & set(test)
    assert sorted(v.train_ids.tolist() + v.test_ids.tolist()) == list(range(len(train)))
    for bad in (1, 0, 2.0, True):
        with pytest.raises(ValueError, match="every must be"):
            s.validation_split(bad)
    with pytest.raises(ValueError, match="fewer than every"):
        s.validation_split(V)


def test_background_and_downsample(object_dir: Path) -> None:
    white = load_blender(object_dir)
    black = load_blender(object_dir, background=(0.0, 0.0, 0.0))
    assert torch.allclose(white.images - black.images, (1 - white.alphas).expand_as(white.images), atol=1e-6)
    half = load_blender(object_dir, downsample=2)
    assert (half.width, half.height) == (32, 24)
    assert torch.allclose(half.Ks[:, :2], white.Ks[:, :2] / 2)
    pooled = F.avg_pool2d(white.images.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
    assert torch.allclose(half.images, pooled, atol=1e-6)
    c, _ = project(torch.zeros(1, 3), half.viewmats[0], half.Ks[0])
    assert torch.allclose(c, torch.tensor([[16.0, 12.0]], dtype=torch.float64), atol=1e-3)


def test_room_scene(cache: Path) -> None:
    s = builtin_scene("room", cache_dir=cache, **TINY)
    assert len(s) == 7 and s.points is not None and s.alphas is not None
    assert s.alphas.mean() > 0.9  # walls and floor fill the views
    c = builtin_scene("room", cache_dir=cache, layout="colmap", **TINY)
    assert (s.viewmats - c.viewmats).abs().max() < 1e-6 and s.test_ids.tolist() == c.test_ids.tolist()



def test_bricks_scene(cache: Path) -> None:
    """The lego-hard object: an object on a transparent background, framed by the object's cameras, with
    coloured surface points on it (ray casts into the scaled model hit it)."""
    s = builtin_scene("bricks", cache_dir=cache, **{**TINY, "width": 48})  # square, as the object views are
    assert len(s) == 7 and s.points is not None and len(s.points) > 100 and s.alphas is not None
    assert 0.15 < float(s.alphas.mean()) < 0.7  # covers much of the frame, as lego does, not all of it
    corners = s.alphas[:, [0, 0, -1, -1], [0, -1, 0, -1]]
    assert float(corners.max()) < 0.05
    assert float(s.points.norm(dim=1).max()) < 1.1  # within the object cameras' framing radius
    assert s.point_colors.std(0).min() > 0.05  # several materials, not one flat colour


def test_bricks_prints_keep_their_texel_size() -> None:
    """The bricks' printed faces: a box's six quads face outwards, and each quad's texture coordinates
    span its edges / PRINT_TILE, so a print's texels are the same size on a long face as on a short one."""
    import numpy as np

    from gsworkbench.synthetic.mitsuba_render import mitsuba_scalar
    from gsworkbench.synthetic.mitsuba_scenes import PRINT_TILE, _box_quads, _printed_mesh

    mi = mitsuba_scalar()
    centre, half = (0.1, -0.2, 0.3), (0.3, 0.1, 0.05)
    quads = _box_quads(centre, half)
    mesh = _printed_mesh("box", quads, mi.load_dict({"type": "diffuse"}), np.random.default_rng(0))
    params = mi.traverse(mesh)
    xyz = np.array(params["vertex_positions"]).reshape(-1, 4, 3)
    uv = np.array(params["vertex_texcoords"]).reshape(-1, 4, 2)
    assert xyz.shape[0] == 6 and int(mesh.face_count()) == 12
    lo, hi = np.subtract(centre, half), np.add(centre, half)
    assert np.allclose(xyz.min((0, 1)), lo, atol=1e-6) and np.allclose(xyz.max((0, 1)), hi, atol=1e-6)
    for q, (corner, u, v) in enumerate(quads):
        assert np.allclose(xyz[q, 0], corner, atol=1e-6)
        normal = np.cross(u, v)
        assert np.dot(normal, xyz[q].mean(0) - np.asarray(centre)) > 0  # outwards: a one-sided BSDF shows
        span = uv[q].max(0) - uv[q].min(0)
        assert np.allclose(span, [np.linalg.norm(u) / PRINT_TILE, np.linalg.norm(v) / PRINT_TILE], atol=1e-6)


# ---- bad input -------------------------------------------------------------------------------


def _rewrite_json(path: Path, edit) -> None:
    meta = json.loads(path.read_text())
    path.write_text(json.dumps(edit(meta)))


def test_missing_files(scene_copy: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_blender(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_scene(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="neither a NeRF-synthetic"):
        load_scene(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="cameras.bin"):
        load_colmap(tmp_path / "empty")
    (scene_copy / "images" / "view_002.png").unlink()
    for loader in (load_blender, load_colmap):  # skipped with a warning, or refused
        with pytest.warns(MissingImagesWarning, match=r"1 of the 7 frames .* skipped \(the first: .*view_002"):
            assert len(loader(scene_copy)) == 6
        with pytest.raises(FileNotFoundError, match="image file not found: .*view_002"):
            loader(scene_copy, missing="error")
    (scene_copy / "transforms_test.json").unlink()
    with pytest.raises(FileNotFoundError, match="transforms_test.json"):
        load_blender(scene_copy)


def test_json_without_frames(scene_copy: Path) -> None:
    _rewrite_json(scene_copy / "transforms_train.json", lambda m: {"camera_angle_x": m["camera_angle_x"]})
    with pytest.raises(ValueError, match=r"transforms_train.json has no frames"):
        load_blender(scene_copy)
    (scene_copy / "transforms_train.json").write_text("{not json")
    with pytest.raises(ValueError, match="transforms_train.json is not valid JSON"):
        load_blender(scene_copy)


def test_bad_frames(scene_copy: Path) -> None:
    def drop_matrix(m):
        del m["frames"][1]["transform_matrix"]
        return m

    good = (scene_copy / "transforms_test.json").read_text()
    _rewrite_json(scene_copy / "transforms_test.json", drop_matrix)
    with pytest.raises(ValueError, match="transforms_test.json: frame 1 has no valid transform_matrix"):
        load_blender(scene_copy)
    (scene_copy / "transforms_test.json").write_text(good)
    _rewrite_json(scene_copy / "transforms_train.json", lambda m: {"frames": m["frames"]})
    with pytest.raises(
        ValueError, match=r"transforms_train.json, frame 0 \(./images/view_000\) gives neither camera_angle_x"
    ):
        load_blender(scene_copy)


def test_inconsistent_and_corrupt_images(scene_copy: Path) -> None:
    from PIL import Image

    img = scene_copy / "images" / "view_003.png"
    Image.new("RGBA", (50, 48)).save(img)
    with pytest.raises(ValueError, match=r"view_003.png is only 50 pixels wide .*view_000.png is 64"):
        load_blender(scene_copy)  # its camera comes from camera_angle_x at the file's size
    with pytest.raises(ValueError, match=r"view_003.png is 50x48, but .*cameras.bin: camera 1 gives 64x48"):
        load_colmap(scene_copy)  # a rescaled copy would keep the aspect ratio
    img.write_bytes(b"\x89PNG\r\n\x1a\n this is no image")
    for loader in (load_blender, load_colmap):
        with pytest.raises(ValueError, match="cannot read image .*view_003.png"):
            loader(scene_copy)


def test_unsupported_camera_model(scene_copy: Path) -> None:
    import pycolmap

    sparse = scene_copy / "sparse" / "0"
    rec = pycolmap.Reconstruction(str(sparse))
    cam = rec.cameras[1]
    rec.cameras[1] = pycolmap.Camera(
        model="FOV", width=cam.width, height=cam.height, params=[*cam.params, 0.5], camera_id=1
    )
    rec.write_binary(str(sparse))
    with pytest.raises(ValueError, match=r"cameras.bin: camera 1 uses the FOV camera model, which the loaders cannot"):
        load_colmap(scene_copy)
    (sparse / "cameras.bin").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"cameras.bin is truncated or not a COLMAP cameras.bin \(no cameras count"):
        load_colmap(scene_copy)


@pytest.mark.parametrize("every", [0, -2, 1.5, "8"])
def test_wrong_test_stride_and_missing_folder(object_dir: Path, tmp_path: Path, every: object) -> None:
    with pytest.raises(ValueError, match="split_test_every must be a positive integer or None"):
        load_blender(object_dir, split_test_every=every)
    with pytest.raises(ValueError, match="test_every must be a positive integer or None"):
        load_colmap(object_dir, test_every=every)
    for loader in (load_blender, load_colmap):
        with pytest.raises(FileNotFoundError, match="scene folder not found: .*nowhere"):
            loader(tmp_path / "nowhere")


@pytest.mark.parametrize("factor", [0, -1, 1.5, True, 65])
def test_wrong_downsample(object_dir: Path, factor: object) -> None:
    for loader in (load_blender, load_colmap):
        with pytest.raises(ValueError, match="downsample"):
            loader(object_dir, downsample=factor)


def test_bad_generator_arguments(cache: Path) -> None:
    with pytest.raises(ValueError, match="unknown built-in scene 'teapot'"):
        builtin_scene("teapot", cache_dir=cache)
    with pytest.raises(ValueError, match="layout"):
        builtin_scene("object", cache_dir=cache, layout="ply")
    with pytest.raises(ValueError, match="width must be a positive integer"):
        generate_scene("object", cache_dir=cache, width=0)


# ---- cache -----------------------------------------------------------------------------------


def test_cache_reuses(object_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_render(*args, **kwargs):
        raise AssertionError("the cached scene was generated again")

    monkeypatch.setattr(generate_mod, "_write_scene", no_render)
    assert generate_scene("object", cache_dir=object_dir.parent, **TINY) == object_dir
    with pytest.raises(AssertionError, match="generated again"):  # another parameter is another entry
        generate_scene("object", cache_dir=object_dir.parent, **{**TINY, "seed": 1})
    # a new version of the scene's description is another entry too
    spec = generate_mod.SYNTHETIC_SCENES["object"]
    monkeypatch.setitem(generate_mod.SYNTHETIC_SCENES, "object", dataclasses.replace(spec, version=spec.version + 1))
    with pytest.raises(AssertionError, match="generated again"):
        generate_scene("object", cache_dir=object_dir.parent, **TINY)


def test_version_one_keeps_the_cache_keys() -> None:
    """Scenes at version 1 hash as before the version existed: their cached renders stay valid."""
    params = generate_mod.GeneratorParams("object", 800, 800, 100, 10, 64, 0, 0)
    assert params.key() == "963fba210015953c"  # the object's 800 px NeRF-synthetic folder in existing caches


def test_cache_env_and_interrupted_generation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = generate_mod.render_views

    def interrupted(*args, **kwargs):
        for i, img in enumerate(real(*args, **kwargs)):
            if i == 2:
                raise KeyboardInterrupt  # as if the user stopped it mid-way
            yield img

    monkeypatch.setenv("GSW_SCENE_CACHE", str(tmp_path / "envcache"))
    monkeypatch.setattr(generate_mod, "render_views", interrupted)
    with pytest.raises(KeyboardInterrupt):
        generate_scene("object", **TINY)
    assert list((tmp_path / "envcache").iterdir()) == []  # no entry, no temporary left
    monkeypatch.setattr(generate_mod, "render_views", real)
    folder = generate_scene("object", **TINY)
    assert folder.parent == tmp_path / "envcache" and detect_layout(folder) == "blender"
    assert [p.name for p in (tmp_path / "envcache").iterdir()] == [folder.name]


def test_samples_per_pixel_fill_a_jitter_grid(object_dir: Path) -> None:
    from gsworkbench.synthetic.generate import read_manifest
    from gsworkbench.synthetic.mitsuba_render import stratified_spp

    assert [stratified_spp(n) for n in (1, 2, 4, 5, 16, 17, 64)] == [1, 4, 4, 9, 16, 25, 64]
    assert read_manifest(object_dir)["samples_per_pixel"] == 4
