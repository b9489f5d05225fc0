"""The loaders on data as researchers have it: distortion in both layouts, transforms.json camera keys,
missing frames, downsampled folders, per-view sizes, named errors, the capture scene, import order."""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from loader_scenes import (
    POSES,
    distort,
    dot_centroid,
    project_normalized,
    scene_points,
    write_colmap_dots,
    write_json_dots,
)

from gsworkbench.scenes import load_blender, load_colmap, load_scene
from gsworkbench.scenes.views import MissingImagesWarning
from gsworkbench.synthetic import builtin_scene, generate_scene
from gsworkbench.synthetic.generate import read_manifest

W, H = 96, 72
CAPTURE = dict(width=64, height=48, n_train=6, n_test=2, spp=4, n_points=200)
# COLMAP models with their parameters (pixels; barrel or pincushion as such lenses have)
COLMAP_MODELS = {
    "SIMPLE_RADIAL": [80.0, 48.3, 36.2, -0.12],
    "RADIAL": [80.0, 48.3, 36.2, -0.1, 0.02],
    "OPENCV": [80.0, 82.0, 47.1, 35.3, -0.15, 0.03, 0.004, -0.003],
    "FULL_OPENCV": [80.0, 82.0, 47.1, 35.3, -0.15, 0.03, 0.004, -0.003, 0.01, 0.02, 0.01, 0.0],
    "OPENCV_FISHEYE": [70.0, 71.0, 47.5, 36.5, 0.06, 0.01, -0.005, 0.001],
    "SIMPLE_RADIAL_FISHEYE": [70.0, 47.5, 36.5, 0.05],
    "RADIAL_FISHEYE": [70.0, 47.5, 36.5, 0.05, 0.01],
}
# transforms.json lenses: the keys, and the COLMAP model + params they mean (for the drawn dots)
JSON_LENSES = {
    "nerfstudio OPENCV": (
        {
            "camera_model": "OPENCV",
            "fl_x": 80.0,
            "fl_y": 82.0,
            "cx": 47.1,
            "cy": 35.3,
            "k1": -0.15,
            "k2": 0.03,
            "p1": 0.004,
            "p2": -0.003,
        },
        ("OPENCV", [80.0, 82.0, 47.1, 35.3, -0.15, 0.03, 0.004, -0.003]),
    ),
    "nerfstudio OPENCV with k3": (
        {
            "camera_model": "OPENCV",
            "fl_x": 80.0,
            "fl_y": 80.0,
            "cx": 48.0,
            "cy": 36.0,
            "k1": -0.12,
            "k2": 0.02,
            "k3": 0.01,
            "p1": 0.0,
            "p2": 0.0,
        },
        ("FULL_OPENCV", [80.0, 80.0, 48.0, 36.0, -0.12, 0.02, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0]),
    ),
    "nerfstudio OPENCV_FISHEYE": (
        {
            "camera_model": "OPENCV_FISHEYE",
            "fl_x": 70.0,
            "fl_y": 71.0,
            "cx": 47.5,
            "cy": 36.5,
            "k1": 0.06,
            "k2": 0.01,
            "k3": -0.005,
            "k4": 0.001,
        },
        ("OPENCV_FISHEYE", [70.0, 71.0, 47.5, 36.5, 0.06, 0.01, -0.005, 0.001]),
    ),
    "instant-ngp is_fisheye": (
        {"is_fisheye": True, "fl_x": 70.0, "fl_y": 70.0, "cx": 48.0, "cy": 36.0, "k1": 0.05, "k2": 0.0},
        ("OPENCV_FISHEYE", [70.0, 70.0, 48.0, 36.0, 0.05, 0.0, 0.0, 0.0]),
    ),
    "instant-ngp k1 k2 p1 p2": (
        {"fl_x": 80.0, "fl_y": 80.0, "cx": 48.0, "cy": 36.0, "k1": -0.1, "k2": 0.01, "p1": 0.002, "p2": 0.001},
        ("OPENCV", [80.0, 80.0, 48.0, 36.0, -0.1, 0.01, 0.002, 0.001]),
    ),
}


@pytest.fixture(scope="module", autouse=True)
def scene_cache(tmp_path_factory: pytest.TempPathFactory):
    """Generated scenes and undistorted views go to a temporary cache, not ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        cache = tmp_path_factory.mktemp("loader_cache")
        mp.setenv("GSW_SCENE_CACHE", str(cache))
        yield cache


@pytest.fixture(scope="module")
def capture_dir(scene_cache: Path) -> Path:
    return generate_scene("capture", **CAPTURE)


def dot_errors(scene, points: np.ndarray = None) -> list[float]:
    """Distances (pixels) between where each view's K and pose project the scene points and where the
    loaded image shows their dots (dots fully inside the image only)."""
    pts = scene_points() if points is None else points
    errs = []
    for v in range(len(scene)):
        K = scene.Ks[v].double().numpy()
        uv = project_normalized(pts, scene.viewmats[v].double().numpy()) @ K[:2, :2].T + K[:2, 2]
        for q in uv:
            if 4 < q[0] < scene.width - 4 and 4 < q[1] < scene.height - 4:
                errs.append(float(np.linalg.norm(dot_centroid(scene.images[v].numpy(), q) - q)))
    return errs


def quietly(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingImagesWarning)
        return fn(*args, **kwargs)


# ---- distortion -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(COLMAP_MODELS))
def test_colmap_distortion_models_are_undone(model: str, tmp_path: Path) -> None:
    params = COLMAP_MODELS[model]
    folder = write_colmap_dots(tmp_path, [(model, W, H, params)] * 2)
    s = load_colmap(folder, test_every=None)
    errs = dot_errors(s)
    assert len(errs) >= 16 and max(errs) < 0.5, (model, errs)
    # the test has teeth: the lens moves the dots by pixels from where a pinhole would put them
    single = model.startswith(("SIMPLE_RADIAL", "RADIAL"))
    f = (params[0], params[0]) if single else (params[0], params[1])
    c = params[1:3] if single else params[2:4]
    xy = project_normalized(scene_points(), POSES[0])
    moved = np.linalg.norm(distort(model, params, xy) - (xy * f + c), axis=1)
    assert moved.max() > 1.0
    assert (s.width, s.height) != (W, H)  # COLMAP's undistorter picks the pinhole's size


@pytest.mark.parametrize("lens", sorted(JSON_LENSES))
def test_json_distortion_is_undone(lens: str, tmp_path: Path) -> None:
    keys, (model, params) = JSON_LENSES[lens]
    folder = write_json_dots(tmp_path, {**keys, "w": W, "h": H}, [{}, {}], [(model, W, H, params)] * 2)
    s = load_blender(folder, split_test_every=2)
    errs = dot_errors(s)
    assert len(errs) >= 16 and max(errs) < 0.5, (lens, errs)


def test_json_camera_keys_per_frame_override_the_file(tmp_path: Path) -> None:
    a = ("OPENCV", W, H, [80.0, 80.0, 48.0, 36.0, -0.1, 0.0, 0.0, 0.0])
    b = ("OPENCV", W, H, [84.0, 84.0, 47.0, 37.0, -0.2, 0.0, 0.0, 0.0])
    file_keys = {
        "camera_model": "OPENCV",
        "w": W,
        "h": H,
        "fl_x": 80.0,
        "fl_y": 80.0,
        "cx": 48.0,
        "cy": 36.0,
        "k1": -0.1,
    }
    frame_keys = [{}, {"fl_x": 84.0, "fl_y": 84.0, "cx": 47.0, "cy": 37.0, "k1": -0.2}]
    s = load_blender(write_json_dots(tmp_path, file_keys, frame_keys, [a, b]), split_test_every=2)
    assert max(dot_errors(s)) < 0.5
    assert s.Ks[1, 0, 0] == pytest.approx(84.0) and s.Ks[0, 0, 0] == pytest.approx(80.0)


def test_undistortion_is_cached_by_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gsworkbench.scenes import undistort

    folder = write_colmap_dots(tmp_path / "scene", [("OPENCV", W, H, COLMAP_MODELS["OPENCV"])] * 2)
    cache = tmp_path / "cache"
    first = load_colmap(folder, test_every=None, cache_dir=cache)
    entries = sorted((cache / "undistorted").iterdir())
    assert len(entries) == 2 and all(e.suffix == ".npz" for e in entries)  # no temporaries left

    def no_undistort(*args, **kwargs):
        raise AssertionError("undistorted again")

    monkeypatch.setattr(undistort, "undistort_array", no_undistort)
    again = load_colmap(folder, test_every=None, cache_dir=cache)
    assert torch.equal(first.images, again.images) and torch.equal(first.Ks, again.Ks)
    # another image content is another entry
    img = folder / "images" / "view_00.png"
    from PIL import Image

    arr = np.asarray(Image.open(img)).copy()
    arr[0, 0] = 255
    Image.fromarray(arr).save(img)
    with pytest.raises(AssertionError, match="undistorted again"):
        load_colmap(folder, test_every=None, cache_dir=cache)


# ---- per-view sizes, rescaling, downsampling -----------------------------------------------------


def test_per_view_sizes_crop_to_the_smallest(tmp_path: Path) -> None:
    cams = [("PINHOLE", 96, 72, [80.0, 80.0, 48.0, 36.0]), ("PINHOLE", 99, 70, [80.0, 80.0, 49.5, 35.0]),
            ("PINHOLE", 97, 75, [81.0, 81.0, 48.2, 37.9])]  # fmt: skip
    s = load_colmap(write_colmap_dots(tmp_path, cams), test_every=None)
    assert (s.width, s.height) == (96, 70)
    # principal points move by the columns and rows cropped off the left and top
    assert s.Ks[:, 0, 2].tolist() == pytest.approx([48.0, 49.5 - 1, 48.2 - 0])
    assert s.Ks[:, 1, 2].tolist() == pytest.approx([36.0 - 1, 35.0, 37.9 - 2])
    assert max(dot_errors(s)) < 0.5


def test_per_view_sizes_too_different(tmp_path: Path) -> None:
    cams = [("PINHOLE", 96, 72, [80.0, 80.0, 48.0, 36.0]), ("PINHOLE", 80, 72, [80.0, 80.0, 40.0, 36.0])]
    with pytest.raises(ValueError, match=r"view_01.png is only 80 pixels wide .*view_00.png is 96"):
        load_colmap(write_colmap_dots(tmp_path, cams), test_every=None)


def _halve_images(src: Path, dst: Path, size: tuple[int, int] | None = None) -> None:
    from PIL import Image

    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):
        im = Image.open(f)
        im.resize(size or (im.width // 2, im.height // 2), Image.Resampling.BOX).save(dst / f.name)


def test_wh_rescaled_to_the_image_files(tmp_path: Path) -> None:
    keys = {"camera_model": "OPENCV", "w": W, "h": H, "fl_x": 80.0, "fl_y": 80.0, "cx": 48.0, "cy": 36.0, "k1": -0.1}
    folder = write_json_dots(
        tmp_path / "s", keys, [{}, {}], [("OPENCV", W, H, [80.0, 80.0, 48.0, 36.0, -0.1, 0, 0, 0])] * 2
    )
    full = load_blender(folder, split_test_every=2)
    _halve_images(folder / "images", tmp_path / "half")
    shutil.rmtree(folder / "images")
    shutil.copytree(tmp_path / "half", folder / "images")  # same names, half size: w/h still say 96x72
    half = load_blender(folder, split_test_every=2)
    assert abs(half.width - full.width / 2) <= 2 and abs(half.height - full.height / 2) <= 2
    assert torch.allclose(half.Ks[:, :2, :2], full.Ks[:, :2, :2] / 2, rtol=2e-2)
    assert max(dot_errors(half)) < 0.5
    _halve_images(tmp_path / "half", folder / "images", size=(48, 30))  # another aspect ratio
    with pytest.raises(ValueError, match=r"view_00.png is 48x30.* gives 96x72: the aspect ratios differ"):
        load_blender(folder, split_test_every=2)


@pytest.mark.parametrize("layout", ["json", "colmap"])
def test_downsampled_folders_and_box_downsampling(layout: str, tmp_path: Path) -> None:
    cams = [("PINHOLE", W, H, [80.0, 80.0, 48.0, 36.0])] * 2
    if layout == "json":
        folder = write_json_dots(tmp_path / "s", {"w": W, "h": H, "fl_x": 80.0}, [{}, {}], cams)
        load = lambda **kw: load_blender(folder, split_test_every=2, **kw)  # noqa: E731
    else:
        folder = write_colmap_dots(tmp_path / "s", cams)
        load = lambda **kw: load_colmap(folder, test_every=None, **kw)  # noqa: E731
    full = load()
    boxed = load(downsample=2)  # no images_2 folder: a box downsample
    assert boxed.image_names == full.image_names and (boxed.width, boxed.height) == (48, 36)
    pooled = F.avg_pool2d(full.images.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
    assert torch.allclose(boxed.images, pooled, atol=1e-6)
    _halve_images(folder / "images", folder / "images_2")
    from PIL import Image

    for f in (folder / "images_2").iterdir():  # mark the copies, to see they are the ones loaded
        Image.fromarray(np.asarray(Image.open(f)) // 2).save(f)
    shipped = load(downsample=2)
    assert all(n.startswith("images_2/") for n in shipped.image_names)
    assert torch.allclose(shipped.images, pooled / 2, atol=1.5 / 255)
    assert torch.allclose(shipped.Ks, boxed.Ks)


# ---- missing frames -----------------------------------------------------------------------------


def test_missing_frames_skipped_with_one_warning(capture_dir: Path) -> None:
    manifest = read_manifest(capture_dir)
    first_missing = manifest["missing_images"][0]
    for loader in (load_blender, load_colmap):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = loader(capture_dir)
        ours = [w for w in caught if issubclass(w.category, MissingImagesWarning)]
        assert len(ours) == 1, [str(w.message) for w in caught]
        assert "2 of the 10 frames" in str(ours[0].message) and first_missing in str(ours[0].message)
        assert len(s) == 8 and not any(n in s.image_names for n in manifest["missing_images"])
        with pytest.raises(FileNotFoundError, match=rf"image file not found: .*{first_missing}.*2 of the 10"):
            loader(capture_dir, missing="error")
        with pytest.raises(ValueError, match="missing must be 'skip' or 'error'"):
            loader(capture_dir, missing="ignore")


# ---- the capture scene --------------------------------------------------------------------------


def test_capture_loads_alike_from_colmap_and_transforms_json(capture_dir: Path) -> None:
    manifest = read_manifest(capture_dir)
    test_names = [n.removeprefix("images/") for n in manifest["test_images"]]
    j = quietly(load_blender, capture_dir)
    c = quietly(load_colmap, capture_dir, test_names=test_names)
    assert j.image_names == c.image_names and j.test_ids.tolist() == c.test_ids.tolist() == [2, 6]
    assert (j.width, j.height) == (c.width, c.height)
    assert (j.Ks - c.Ks).abs().max() < 1e-4 and (j.viewmats - c.viewmats).abs().max() < 1e-4
    assert torch.equal(j.images, c.images)
    assert j.points is not None and c.points is not None and j.points.shape == c.points.shape
    assert j.bounds is not None and j.bounds.tolist() == [[-4.0, -4.0, 0.0], [4.0, 4.0, 2.5]]
    # COLMAP's own undistorter output: one PINHOLE camera per image, a few pixels apart in size
    import pycolmap

    rec = pycolmap.Reconstruction(str(capture_dir / "undistorted" / "sparse"))
    assert {c.model_name for c in rec.cameras.values()} == {"PINHOLE"}
    assert len({(c.width, c.height) for c in rec.cameras.values()}) > 1
    u = quietly(load_colmap, capture_dir / "undistorted", test_names=test_names)
    assert (u.width, u.height) == (j.width, j.height) and (u.Ks - j.Ks).abs().max() < 1e-4
    assert (u.images - j.images).abs().mean() < 0.02  # the same pixels, JPEG-compressed once more
    # builtin_scene reads the same folder in either layout with the generator's split
    for layout in ("blender", "colmap"):
        s = quietly(builtin_scene, "capture", layout=layout, **CAPTURE)
        assert s.test_ids.tolist() == [2, 6] and torch.equal(s.images, j.images)


def test_capture_points_project_onto_the_undistorted_images(capture_dir: Path) -> None:
    """The undistorted capture is geometrically right: its surface points (coloured from the pinhole
    renders) match the colours of the pixels they project to better than with any 1-pixel shift."""
    s = quietly(load_colmap, capture_dir, test_every=None)

    def colour_error(dx: float, dy: float) -> float:
        errs = []
        for v in range(len(s)):
            K = s.Ks[v].double()
            cam = s.points.double() @ s.viewmats[v, :3, :3].double().T + s.viewmats[v, :3, 3].double()
            uv = (cam @ K.T)[:, :2] / cam[:, 2:] + torch.tensor([dx, dy], dtype=torch.float64)
            ok = (cam[:, 2] > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < s.width) & (uv[:, 1] >= 0) & (uv[:, 1] < s.height)
            px = uv[ok].floor().long()
            errs.append((s.images[v, px[:, 1], px[:, 0]] - s.point_colors[ok]).abs().mean(1))
        return float(torch.cat(errs).median())

    e0 = colour_error(0.0, 0.0)
    assert e0 < min(colour_error(dx, dy) for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)))
    assert e0 < 0.9 * min(colour_error(3, 0), colour_error(0, 3))


# ---- named errors -------------------------------------------------------------------------------


def _json_scene(tmp_path: Path, **keys) -> Path:
    cams = [("PINHOLE", W, H, [80.0, 80.0, 48.0, 36.0])] * 2
    return write_json_dots(tmp_path, {"w": W, "h": H, "fl_x": 80.0, **keys}, [{}, {}], cams)


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"fl_x": float("nan")}, r"frame 0 \(images/view_00.png\): fl_x must be a finite positive number, got nan"),
        ({"fl_x": 0}, "fl_x must be a finite positive number, got 0"),
        ({"fl_x": None, "camera_angle_x": "wide"}, "camera_angle_x must be a number, got 'wide'"),
        ({"fl_x": None, "camera_angle_x": 4.0}, r"camera_angle_x must be in \(0, pi\)"),
        ({"camera_model": "EQUIRECTANGULAR"}, "camera_model 'EQUIRECTANGULAR' is not supported"),
        ({"camera_model": "OPENCV", "k4": 0.1}, "k4 = 0.1 is not supported with camera_model OPENCV"),
        ({"camera_model": "OPENCV_FISHEYE", "p1": 0.1}, "OPENCV_FISHEYE has no tangential terms"),
        ({"camera_model": "PINHOLE", "k1": 0.1}, "camera_model PINHOLE has no distortion"),
        ({"latlong": True}, "the latlong lens is not supported"),
        ({"w": 96.5}, "w and h must be whole pixel counts"),
    ],
)
def test_json_camera_errors_name_the_file(tmp_path: Path, keys: dict, message: str) -> None:
    folder = _json_scene(tmp_path, **keys)
    with pytest.raises(ValueError, match=r"transforms.json.*" + message):
        load_blender(folder)


def test_non_utf8_json(tmp_path: Path) -> None:
    folder = _json_scene(tmp_path)
    text = (folder / "transforms.json").read_text()
    (folder / "transforms.json").write_bytes(text.replace('"frames"', '"fr\xe4mes"').encode("latin-1"))
    with pytest.raises(ValueError, match=r"transforms.json is not UTF-8 text \(byte 0xe4 at offset"):
        load_scene(folder)
    (folder / "transforms.json").write_bytes(b"\xef\xbb\xbf" + text.encode())  # a UTF-8 BOM is fine
    assert len(load_scene(folder)) == 2


def test_image_over_the_decompression_bomb_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from PIL import Image

    folder = _json_scene(tmp_path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", W * H // 3)  # the limit: twice this is refused
    with pytest.raises(ValueError, match=r"image .*view_00.png is over Pillow's decompression-bomb limit"):
        load_blender(folder)


def test_points3d_bin_truncated_garbage_or_missing(tmp_path: Path) -> None:
    from gsworkbench.scenes.colmap import write_colmap_model
    from gsworkbench.scenes.lens import make_camera

    folder = write_colmap_dots(tmp_path, [("PINHOLE", W, H, [80.0, 80.0, 48.0, 36.0])] * 2)
    sparse = folder / "sparse" / "0"
    pts = np.random.default_rng(0).normal(size=(50, 3))
    cam = make_camera("PINHOLE", W, H, [80.0, 80.0, 48.0, 36.0])
    write_colmap_model(
        sparse, ["view_00.png", "view_01.png"], np.stack(POSES), [cam], [0, 0], pts, np.full((50, 3), 0.5)
    )
    assert load_colmap(folder).points.shape == (50, 3)
    data = (sparse / "points3D.bin").read_bytes()
    (sparse / "points3D.bin").write_bytes(data[:-30])
    with pytest.raises(ValueError, match=r"points3D.bin is truncated or not a COLMAP points3D.bin"):
        load_colmap(folder)
    (sparse / "points3D.bin").write_bytes(np.random.default_rng(1).integers(0, 255, 300, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError, match=r"points3D.bin is truncated or not a COLMAP points3D.bin"):
        load_colmap(folder)
    (sparse / "points3D.bin").unlink()  # no point cloud: random init, not an error
    s = load_colmap(folder)
    assert s.points is None and len(s) == 2


def _one_camera_model(tmp_path: Path, pts: np.ndarray | None = None) -> tuple[Path, Path]:
    """A COLMAP scene of two views taken by one PINHOLE camera, with ``pts`` as its points3D."""
    from gsworkbench.scenes.colmap import write_colmap_model
    from gsworkbench.scenes.lens import make_camera

    folder = write_colmap_dots(tmp_path, [("PINHOLE", W, H, [80.0, 80.0, 48.0, 36.0])] * 2)
    sparse = folder / "sparse" / "0"
    pts = np.random.default_rng(0).normal(size=(20, 3)) if pts is None else pts
    cam = make_camera("PINHOLE", W, H, [80.0, 80.0, 48.0, 36.0])
    names = ["view_00.png", "view_01.png"]
    write_colmap_model(sparse, names, np.stack(POSES[:2]), [cam], [0, 0], pts, np.full((len(pts), 3), 0.5))
    return folder, sparse


def test_truncated_cameras_bin_is_named(tmp_path: Path) -> None:
    """Cut to 40 of its 64 bytes, cameras.bin loaded without a word: pycolmap filled the missing
    parameters with the last one it read (cx = cy = fx)."""
    folder, sparse = _one_camera_model(tmp_path)
    data = (sparse / "cameras.bin").read_bytes()
    assert len(data) == 64 and len(load_colmap(folder)) == 2
    (sparse / "cameras.bin").write_bytes(data[:40])
    with pytest.raises(ValueError, match=r"cameras.bin is truncated or not a COLMAP cameras.bin \(camera 1 "
                       r"\(PINHOLE\) needs 4 parameters .* the file has 40 bytes\)"):  # fmt: skip
        load_colmap(folder)
    for cut in range(len(data)):
        (sparse / "cameras.bin").write_bytes(data[:cut])
        with pytest.raises(ValueError, match=r"cameras.bin is truncated or not a COLMAP cameras.bin"):
            load_colmap(folder)
    (sparse / "cameras.bin").write_bytes(data + b"\0" * 8)
    with pytest.raises(ValueError, match=r"8 bytes follow the 1 cameras"):
        load_colmap(folder)
    bad_model = bytearray(data)
    bad_model[12:16] = (77).to_bytes(4, "little")  # the first camera's model id
    (sparse / "cameras.bin").write_bytes(bytes(bad_model))
    with pytest.raises(ValueError, match=r"camera 1 \(at byte 8\) has an unknown camera model id 77"):
        load_colmap(folder)


def test_truncated_images_bin_is_named(tmp_path: Path) -> None:
    """Cut in half, images.bin gave only pycolmap's "vector::reserve"."""
    folder, sparse = _one_camera_model(tmp_path)
    data = (sparse / "images.bin").read_bytes()
    for cut in [len(data) // 2, *range(len(data))]:
        (sparse / "images.bin").write_bytes(data[:cut])
        with pytest.raises(ValueError, match=r"images.bin is truncated or not a COLMAP images.bin"):
            load_colmap(folder)
    garbage = np.random.default_rng(2).integers(0, 255, len(data), dtype=np.uint8).tobytes()
    (sparse / "images.bin").write_bytes(garbage)
    with pytest.raises(ValueError, match=r"images.bin is truncated or not a COLMAP images.bin"):
        load_colmap(folder)
    (sparse / "images.bin").write_bytes(data)
    assert len(load_colmap(folder)) == 2


def test_non_finite_points3d_are_refused_naming_the_file(tmp_path: Path) -> None:
    """NaN coordinates loaded, and training then failed inside scipy's KD-tree ("data must be finite")."""
    pts = np.random.default_rng(0).normal(size=(20, 3))
    pts[3, 1] = np.nan
    pts[7, 0] = 1e300  # finite in the file, inf as float32
    folder, sparse = _one_camera_model(tmp_path, pts)
    with pytest.raises(ValueError, match=r"points3D.bin: 2 of 20 points have non-finite coordinates \(point ids "
                       r"\[4, 8\]\)"):  # fmt: skip
        load_colmap(folder)


def test_unsupported_colmap_model_names_model_and_file(tmp_path: Path) -> None:
    folder = write_colmap_dots(tmp_path, [("FOV", W, H, [80.0, 80.0, 48.0, 36.0, 0.9])] * 2)
    with pytest.raises(ValueError, match=r"cameras.bin: camera 1 uses the FOV camera model, which the loaders cannot"):
        load_colmap(folder)


# ---- bounds -----------------------------------------------------------------------------------


def test_bounds_from_instant_ngp_keys(tmp_path: Path) -> None:
    assert load_blender(_json_scene(tmp_path / "none")).bounds is None
    b = load_blender(_json_scene(tmp_path / "scale", aabb_scale=4)).bounds
    assert torch.allclose(b, torch.tensor([[-2.0 / 0.33] * 3, [2.0 / 0.33] * 3]))  # 0.5 -/+ 2, minus 0.5, / 0.33
    b = load_blender(_json_scene(tmp_path / "offset", aabb_scale=2, scale=0.5, offset=[0.5, 0.3, 0.7])).bounds
    assert torch.allclose(b, torch.tensor([[-2.0, -1.6, -2.4], [2.0, 2.4, 1.6]]))
    box = [[-1.0, -2.0, 0.0], [1.0, 2.0, 1.0]]
    assert load_blender(_json_scene(tmp_path / "aabb", aabb=box)).bounds.tolist() == box
    b = load_blender(_json_scene(tmp_path / "both", aabb=box, aabb_scale=2)).bounds  # a cube, 2x the longest side
    assert b.tolist() == [[-4.0, -4.0, -3.5], [4.0, 4.0, 4.5]]
    with pytest.raises(ValueError, match="aabb must be"):
        load_blender(_json_scene(tmp_path / "bad", aabb=[[1, 1, 1], [0, 0, 0]]))
    s = load_blender(_json_scene(tmp_path / "keep", aabb_scale=1))
    assert torch.equal(s.subset([1]).bounds, s.bounds) and s.to("meta").bounds.device.type == "meta"


# ---- import order -------------------------------------------------------------------------------


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_pycolmap_then_png_writes(tmp_path: Path) -> None:
    """pycolmap imported before torch, Pillow and matplotlib (after gsworkbench, which loads the system
    libz first): PNG writes through Pillow and matplotlib work (they aborted in deflateEnd)."""
    out = tmp_path / "a.png"
    code = f"""
import gsworkbench
import pycolmap
import sys
assert "torch" not in sys.modules and "PIL" not in sys.modules
import numpy as np
from PIL import Image
Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3)).save({str(out)!r})
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([0, 1]); plt.savefig({str(tmp_path / "b.png")!r})
from gsworkbench._libz import libz_bound_to_pycolmap
print("bound", libz_bound_to_pycolmap())
"""
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "bound False" in r.stdout and out.stat().st_size > 0 and (tmp_path / "b.png").stat().st_size > 0


def test_pycolmap_as_the_first_import_in_the_project_environment(tmp_path: Path) -> None:
    """The issue's case: pycolmap imported first of all, then a PNG write. The set-up's start-up hook
    (gsworkbench-libz.pth, see gsworkbench/_libz.py) makes the order irrelevant in this environment."""
    import sysconfig

    from gsworkbench._libz import PTH_LINE, PTH_NAME

    hook = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    assert hook.is_file() and hook.read_text() == PTH_LINE, f"{hook} missing or stale: run `make setup`"
    out = tmp_path / "first.png"
    code = f"""
import pycolmap
import numpy as np
from PIL import Image
Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3)).save({str(out)!r})
"""
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert out.stat().st_size > 0


def test_pycolmap_before_gsworkbench_is_detected() -> None:
    """pycolmap imported before anything that loads libz cannot be repaired afterwards: importing
    gsworkbench then warns with the fix instead of leaving a later PNG write to abort."""
    import sysconfig

    # without the environment's start-up hooks (-S: no .pth files), as in an environment set up by hand
    paths = [sysconfig.get_paths()["purelib"], str(Path(__file__).resolve().parent.parent)]
    code = f"import sys\nsys.path[:0] = {paths!r}\nimport pycolmap\nimport warnings\nwarnings.simplefilter('always')\n"
    r = subprocess.run([sys.executable, "-S", "-c", code + "import gsworkbench\n"], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "RuntimeWarning" in r.stderr and "Import gsworkbench (or zlib, or torch) before pycolmap" in r.stderr


def test_the_pinhole_twin_matches_the_undistorted_capture(capture_dir: Path) -> None:
    """The capture rendered again without its lens, at the loaded cameras (issue 20's distortion
    target trains both): the same cameras, and images that line up with the loader's undistorted ones
    better than a 1-pixel shift of them does."""
    from gsworkbench.synthetic.simulated_capture import pinhole_twin

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingImagesWarning)
        scene = load_scene(capture_dir)
    twin = pinhole_twin(scene, spp=16)
    assert torch.equal(twin.Ks, scene.Ks) and torch.equal(twin.viewmats, scene.viewmats)
    assert twin.images.shape == scene.images.shape and torch.equal(twin.train_ids, scene.train_ids)

    def mse(a: torch.Tensor, b: torch.Tensor) -> float:
        return float(((a - b) ** 2).mean())

    inner = (slice(None), slice(2, -2), slice(2, -2))
    here = mse(twin.images[inner], scene.images[inner])
    shifts = [mse(twin.images[inner], torch.roll(scene.images, s, dims=d)[inner]) for d in (1, 2) for s in (-1, 1)]
    assert here < 0.8 * min(shifts), (here, shifts)  # measured: 0.56 of the best shift


def test_pinhole_views_at_twice_the_size_keep_the_field_of_view(capture_dir: Path) -> None:
    """The capture's views rendered at 2x (the quality table's zoom-in truth), box-averaged back to the
    loaded size, line up with the 1x pinhole render better than a 1-pixel shift of it does."""
    from gsworkbench.synthetic.simulated_capture import pinhole_views
    from gsworkbench.train.resolution import downsample

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingImagesWarning)
        scene = load_scene(capture_dir)
    views = scene.test_ids.tolist()
    once = pinhole_views(scene, views, scene.width, scene.height, spp=16)
    twice = pinhole_views(scene, views, 2 * scene.width, 2 * scene.height, spp=4)
    assert twice.shape == (len(views), 2 * scene.height, 2 * scene.width, 3)
    back = downsample(twice, scene.width, scene.height)
    inner = (slice(None), slice(2, -2), slice(2, -2))

    def mse(a: torch.Tensor, b: torch.Tensor) -> float:
        return float(((a - b) ** 2).mean())

    here = mse(back[inner], once[inner])
    shifts = [mse(back[inner], torch.roll(once, s, dims=d)[inner]) for d in (1, 2) for s in (-1, 1)]
    assert here < 0.5 * min(shifts), (here, shifts)
