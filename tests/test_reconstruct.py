"""Photos to a posed scene (gsworkbench.sfm.reconstruct, in gsworkbench.sfm.pipeline): poses against the
truth after a similarity alignment, the output read by load_scene, the report, lenses and sizes, the
registration strategies, EXIF orientation, video frames, the named errors, Ctrl-C and resuming."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from pathlib import Path

import numpy as np
import pycolmap
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from scipy.spatial.transform import Rotation

from gsworkbench.scenes import load_scene
from gsworkbench.sfm.colmap_run import Cancelled, cancellable
from gsworkbench.sfm.photos import Photo, prepare_photo
from gsworkbench.sfm.pipeline import ReconstructionFailed, reconstruct
from gsworkbench.sfm.pose_accuracy import model_poses, pose_errors, umeyama
from gsworkbench.sfm.registration import (
    DISTORTION_MIN_PHOTOS,
    best_model,
    camera_model_for,
    exif_fisheye,
    lens_groups,
    why_unregistered,
)
from gsworkbench.sfm.sfm_report import format_report, read_report
from gsworkbench.sfm.video import MOTION_BLUR_RATIO, extract_frames, motion_blur_ratio, sharpness
from gsworkbench.studies.photo_set import (
    FISHEYE_FOCAL,
    FISHEYE_LENS,
    arc_cameras,
    focal_35mm,
    plain_wall_splats,
    render,
    specular_highlights,
    textured_splats,
    true_focal,
    write_fisheye_photos,
    write_photos,
)

REPORT_KEYS = {"images_given", "images_registered", "registered_fraction", "mean_reprojection_error_px",
               "mean_track_length", "num_points3D", "cameras", "unmatched", "seconds"}  # fmt: skip


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    folder = tmp_path_factory.mktemp("photos")
    return folder, write_photos(folder, 12)


@pytest.fixture(scope="module")
def reconstructed(photos, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return reconstruct(photos[0], tmp_path_factory.mktemp("rec") / "scene", progress=False, log=None)


# ---- the similarity alignment and the error measures -------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.05, 20.0))
def test_umeyama_recovers_a_similarity(seed: int, scale: float) -> None:
    g = np.random.default_rng(seed)
    src = g.normal(size=(12, 3))
    R = Rotation.random(random_state=seed).as_matrix()
    t = g.normal(size=3) * 5
    s, R2, t2 = umeyama(src, scale * src @ R.T + t)
    assert abs(s - scale) <= 1e-9 * scale
    np.testing.assert_allclose(R2, R, atol=1e-9)
    np.testing.assert_allclose(t2, t, atol=1e-8 * (1 + scale))


def test_pose_errors_are_zero_for_a_transformed_copy_and_see_a_turned_camera() -> None:
    viewmats, _ = arc_cameras(40, step_deg=4.0, dtype=torch.float64)
    truth = {f"v{i}": m.double().numpy() for i, m in enumerate(viewmats)}
    R, s, t = Rotation.random(random_state=3).as_matrix(), 2.5, np.array([1.0, -2.0, 0.5])
    # the same cameras in a world X' = s R X + t, cameras scaled with it
    moved = {n: np.c_[m[:3, :3] @ R.T, s * m[:3, 3] - m[:3, :3] @ R.T @ t] for n, m in truth.items()}
    e = pose_errors(moved, truth)
    assert e.rotation_deg.max() < 1e-5 and e.centre.max() < 1e-9 and abs(e.scale - 1 / s) < 1e-9
    turned = dict(moved)
    R3, t3 = moved["v3"][:3, :3], moved["v3"][:3, 3]
    R3_turned = Rotation.from_euler("y", 2.0, degrees=True).as_matrix() @ R3  # turned about its own centre
    turned["v3"] = np.c_[R3_turned, R3_turned @ (R3.T @ t3)]
    e = pose_errors(turned, truth)
    assert e.rotation_deg[e.names.index("v3")] == pytest.approx(2.0, abs=0.06)  # less the 1/40 it moves the mean
    assert np.delete(e.rotation_deg, e.names.index("v3")).max() < 0.06


# ---- reconstruction of a small generated photo set ---------------------------------------------------------


def test_reconstruct_recovers_the_poses(photos, reconstructed: Path) -> None:
    _, truth = photos
    rec = pycolmap.Reconstruction(str(reconstructed / "sparse" / "0"))
    assert len(model_poses(rec)) >= 11  # of 12
    e = pose_errors(model_poses(rec), truth).summary()
    assert e["rotation_median_deg"] < 1.0 and e["centre_median_pct"] < 2.0, e
    cams = pycolmap.Reconstruction(str(best_model(reconstructed / "work" / "sparse")[0])).cameras
    (cam,) = cams.values()  # one size: one shared camera
    assert abs(cam.focal_length_x / true_focal() - 1) < 0.05


def test_the_output_loads_and_the_report_has_its_fields(reconstructed: Path) -> None:
    scene = load_scene(reconstructed)
    assert len(scene) >= 11 and len(scene.test_ids) >= 1 and scene.points is not None and len(scene.points) > 100
    assert scene.bounds is not None and bool((scene.bounds[0] < scene.bounds[1]).all())
    report = read_report(reconstructed)
    assert REPORT_KEYS <= set(report)
    assert report["images_given"] == 12 and report["images_registered"] >= 11
    assert 0 < report["mean_reprojection_error_px"] < 1.0 and report["mean_track_length"] >= 2
    assert set(report["seconds"]) == {"photos", "features", "matching", "mapping", "undistort"}
    assert report["cameras"][0]["model"] == "OPENCV" and len(report["cameras"][0]["distortion"]) == 4
    state = json.loads((reconstructed / "reconstruct.json").read_text())
    assert state["pycolmap"] == pycolmap.__version__ and state["options"]["camera"] == "per_lens"
    assert report["matcher"] == "exhaustive" and report["pairs_matched"] == 66  # 12 photos: every pair
    assert "images registered" in format_report(report) and "66 (exhaustive)" in format_report(report)


def test_photos_of_two_sizes_get_a_camera_each(photos, tmp_path: Path) -> None:
    src, _ = photos
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for i, p in enumerate(sorted(src.iterdir())):
        im = Image.open(p)
        (im.crop((0, 0, im.width, im.height - 4)) if i % 3 == 0 else im).save(mixed / p.name, quality=95)
    out = reconstruct(mixed, tmp_path / "scene", camera="per_size", progress=False, log=None)
    report = read_report(out)
    assert report["num_cameras"] == 2 and report["images_registered"] >= 11
    with pytest.raises(ValueError, match="one size"):
        reconstruct(mixed, tmp_path / "single", camera="single", progress=False, log=None)


def _photo(name: str, size: tuple[int, int]) -> Photo:
    return Photo(name, Path(name), size, size)


def test_lens_groups_join_crops_of_one_lens_and_keep_lenses_apart() -> None:
    """Sizes a few pixels apart are one lens (cropped differently), a rotated or larger size is not,
    and two EXIF lenses of one size stay apart."""
    sizes = {"a": (1000, 662), "b": (1000, 656), "c": (998, 660), "d": (662, 1000), "e": (1600, 1000), "f": (1000, 662)}
    photos = [_photo(n, s) for n, s in sizes.items()]
    lens = {"f": ("Other", "phone", 4.2)}
    groups = lens_groups(photos, lens_of=lambda p: lens.get(p.name))
    assert [[p.name for p in g] for g in groups] == [["a", "b", "c"], ["d"], ["e"], ["f"]]
    assert camera_model_for(3, "auto") == "SIMPLE_RADIAL"
    assert camera_model_for(DISTORTION_MIN_PHOTOS, "auto") == "OPENCV"
    assert camera_model_for(3, "OPENCV") == "OPENCV"


def test_photos_of_several_sizes_with_a_few_each_share_one_lens(tmp_path: Path) -> None:
    """A capture exported undistorted at 7 sizes a few pixels apart, 3 photos each (one OPENCV camera of
    8 parameters per size cannot be pinned down by 3 photos): the default cameras crop them to one size
    and one camera, whose 21 photos pin down OPENCV's distortion; every photo registers, the poses hold."""
    full = tmp_path / "full"
    truth = write_photos(full, 21, width=272, height=208)
    crops = tmp_path / "crops"
    crops.mkdir()
    for i, p in enumerate(sorted(full.iterdir())):
        k = i // 3
        im = Image.open(p)
        im.crop((k % 2, k // 2, im.width - k % 3, im.height - k // 3)).save(crops / p.name, quality=95)
    assert len({Image.open(p).size for p in crops.iterdir()}) == 7
    out = reconstruct(crops, tmp_path / "scene", progress=False, log=None)
    report = read_report(out)
    assert report["num_cameras"] == 1 and report["cameras"][0]["model"] == "OPENCV"
    assert report["images_registered"] == 21 and report["not_registered"] == {}
    rec = pycolmap.Reconstruction(str(out / "sparse" / "0"))
    e = pose_errors(model_poses(rec), truth).summary()
    assert e["rotation_median_deg"] < 1.0 and e["centre_median_pct"] < 2.0, e


def test_exposure_and_white_balance_that_change_from_photo_to_photo(photos, tmp_path: Path) -> None:
    """Phones auto-expose: each photo gets its own gain (0.5x to 1.7x, clipped) and colour balance; every
    photo still registers and the poses hold."""
    src, truth = photos
    varied = tmp_path / "exposure"
    varied.mkdir()
    g = np.random.default_rng(3)
    for p in sorted(src.iterdir()):
        rgb = np.asarray(Image.open(p), dtype=np.float64) * g.uniform(0.5, 1.7) * g.uniform(0.85, 1.15, 3)
        Image.fromarray(np.clip(rgb, 0, 255).round().astype(np.uint8)).save(varied / p.name, quality=95)
    out = reconstruct(varied, tmp_path / "scene", progress=False, log=None)
    assert read_report(out)["images_registered"] == 12
    e = pose_errors(model_poses(pycolmap.Reconstruction(str(out / "sparse" / "0"))), truth).summary()
    assert e["rotation_median_deg"] < 1.0 and e["centre_median_pct"] < 2.0, e


def test_a_glossy_surface_with_highlights_that_move_registers_every_photo(tmp_path: Path) -> None:
    """The textured cube with a glossy finish: white, clipped highlights that slide over its faces and
    the floor from photo to photo (features on their rims belong to no fixed point). Every photo still
    registers and the poses hold."""
    viewmats, K = arc_cameras(12)
    shine = np.stack([specular_highlights(vm, K) for vm in viewmats])
    assert ((shine > 1.0).mean(axis=(1, 2)) > 0.003).sum() >= 6  # clipped highlights in half the photos or more
    peaks = [np.unravel_index(s.argmax(), s.shape)[1] for s in shine]
    assert max(peaks) - min(peaks) > 100  # they move across the image
    truth = write_photos(tmp_path / "photos", 12, scene="glossy_cube")
    out = reconstruct(tmp_path / "photos", tmp_path / "scene", num_threads=1, progress=False, log=None)
    assert read_report(out)["images_registered"] == 12
    e = pose_errors(model_poses(pycolmap.Reconstruction(str(out / "sparse" / "0"))), truth).summary()
    assert e["rotation_median_deg"] < 1.0 and e["centre_median_pct"] < 2.0, e


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_small_object_on_a_plain_wall_registers_every_photo(tmp_path: Path, seed: int) -> None:
    """A small textured object on a plain floor before a plain wall: the poses rest on the object's few
    hundred points. Every photo registers with the poses held, over several mapper seeds (one thread:
    COLMAP's multithreaded mapper differs from run to run, and on this scene its first mapping can
    leave photos out, which the strategies after it bring back)."""
    truth = write_photos(tmp_path / "photos", 16, width=320, height=240, step_deg=7.0, scene="plain_wall")
    out = reconstruct(tmp_path / "photos", tmp_path / "scene", seed=seed, num_threads=1, progress=False, log=None)
    assert read_report(out)["images_registered"] == 16
    e = pose_errors(model_poses(pycolmap.Reconstruction(str(out / "sparse" / "0"))), truth).summary()
    assert e["rotation_median_deg"] < 1.5 and e["centre_median_pct"] < 2.0, e


def test_a_mapping_that_leaves_photos_out_tries_the_next_strategy(photos, tmp_path: Path) -> None:
    """A first mapping whose inlier minimums no pair meets registers nothing: the strategies follow in
    turn (a simpler lens, relaxed minimums) until the photos register, and each try is in the report."""
    out = reconstruct(photos[0], tmp_path / "scene", min_inliers=5000, progress=False, log=None)
    report = read_report(out)
    tries = [(a["strategy"], a["registered"], a["kept"]) for a in report["attempts"]]
    assert tries[0] == ("incremental", 0, False) and tries[1][0] == "simpler_lens"
    assert tries[-1][0] == "relaxed_inliers" and tries[-1][1] >= 11 and tries[-1][2]
    assert report["images_registered"] >= 11 and "strategies tried" in format_report(report)
    e = pose_errors(model_poses(pycolmap.Reconstruction(str(out / "sparse" / "0"))), photos[1]).summary()
    assert e["rotation_median_deg"] < 1.0, e


def test_the_leftover_and_global_strategies_register_the_photos(reconstructed: Path, photos, tmp_path: Path) -> None:
    """The two strategies the ladder reaches last, run on their own on the fixture's database: the
    leftovers put back photos taken out of a model, and the global mapper poses the set from scratch."""
    from gsworkbench.sfm.registration import Mapping, global_mapping, incremental, registered_names

    work = reconstructed / "work"
    model, names = best_model(work / "sparse")
    rec = pycolmap.Reconstruction(str(model))
    for frame_id in sorted(rec.reg_frame_ids())[-3:]:  # three photos taken out
        rec.deregister_frame(frame_id)
    partial = tmp_path / "partial"
    partial.mkdir()
    rec.write(str(partial))
    assert len(registered_names(partial)) == len(names) - 3
    m = Mapping(work / "database.db", work / "photos", tmp_path / "sparse", 12)
    incremental(m, "leftovers", (15, 10), input_model=partial)
    assert registered_names(tmp_path / "sparse" / "leftovers-0") == names
    global_mapping(m, "global")
    glob = pycolmap.Reconstruction(str(tmp_path / "sparse" / "global-0"))
    assert len(registered_names(tmp_path / "sparse" / "global-0")) >= 11
    e = pose_errors(model_poses(glob), photos[1]).summary()
    assert e["rotation_median_deg"] < 1.0, e


def test_the_best_model_is_the_largest_plausible_one(reconstructed: Path, tmp_path: Path) -> None:
    """Copies of the fixture's model: all photos with its camera's pixels stretched 1.5:1, all photos with
    its points moved (reprojection error of pixels), and three photos fewer as it is. The last is the
    best model, and the two others are named implausible; alone, the largest implausible one is kept."""
    from gsworkbench.sfm.registration import model_problems, model_problems_at

    model, names = best_model(reconstructed / "work" / "sparse")
    sparse = tmp_path / "sparse"
    stretched = pycolmap.Reconstruction(str(model))
    for cam in stretched.cameras.values():
        cam.focal_length_y = 1.5 * cam.focal_length_x
    (sparse / "a-0").mkdir(parents=True)
    stretched.write(str(sparse / "a-0"))
    moved = pycolmap.Reconstruction(str(model))
    g = np.random.default_rng(0)
    for pid in moved.point3D_ids():
        moved.points3D[pid].xyz = moved.points3D[pid].xyz + g.normal(0, 0.1, 3)
    moved.update_point_3d_errors()
    (sparse / "b-0").mkdir()
    moved.write(str(sparse / "b-0"))
    fewer = pycolmap.Reconstruction(str(model))
    for frame_id in sorted(fewer.reg_frame_ids())[-3:]:
        fewer.deregister_frame(frame_id)
    (sparse / "c-0").mkdir()
    fewer.write(str(sparse / "c-0"))
    (problem,) = model_problems_at(sparse / "a-0")
    assert problem.startswith("camera 1's pixels 1.50:1")
    (problem,) = model_problems(moved)
    assert problem.startswith("mean reprojection error") and moved.compute_mean_reprojection_error() > 2.0
    assert model_problems(fewer) == []
    assert best_model(sparse) == (sparse / "c-0", names - set(sorted(names)[-3:]))
    for d in ("b-0", "c-0"):
        shutil.rmtree(sparse / d)
    assert best_model(sparse) == (sparse / "a-0", names)


def test_an_implausible_model_does_not_stop_the_ladder(photos, tmp_path: Path, monkeypatch) -> None:
    """With a reprojection limit no model meets, every model is implausible: the ladder goes through
    every strategy though the first mapping placed every photo, each try records why, the largest model
    is kept all the same, and one line says so."""
    import gsworkbench.sfm.registration as registration

    monkeypatch.setattr(registration, "MAX_REPROJECTION_PX", 0.01)
    said: list[str] = []
    out = reconstruct(photos[0], tmp_path / "scene", num_threads=1, progress=False, log=said.append)
    report = read_report(out)
    assert [a["strategy"] for a in report["attempts"]] == ["incremental", *registration.STRATEGIES]
    assert all(a["problems"] and a["problems"][0].startswith("mean reprojection error") for a in report["attempts"])
    assert report["images_registered"] >= 11 and report["model_problems"]
    assert sum(s.startswith(f"the kept model of {photos[0]} is implausible (mean reprojection") for s in said) == 1
    assert "kept model implausible" in format_report(report)


def test_duplicates_and_panoramas_are_left_out_and_named(photos, tmp_path: Path) -> None:
    """A copied photo, the same shot saved again as PNG, and a 3:1 panorama among the photos: each is
    left out before features, named in the log and the report; the rest reconstructs."""
    src, _ = photos
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for p in sorted(src.iterdir()):
        (mixed / p.name).write_bytes(p.read_bytes())
    (mixed / "view_03 copy.jpg").write_bytes((src / "view_03.jpg").read_bytes())
    Image.open(src / "view_07.jpg").save(mixed / "zz_again.png")
    strip = np.concatenate([np.asarray(Image.open(src / f"view_0{k}.jpg")) for k in (0, 4, 8)], axis=1)
    Image.fromarray(strip).save(mixed / "pano.jpg", quality=95)
    said: list[str] = []
    out = reconstruct(mixed, tmp_path / "scene", progress=False, log=said.append)
    report = read_report(out)
    assert report["left_out"] == {"duplicates": {"view_03.jpg": "view_03 copy.jpg", "zz_again.png": "view_07.jpg"},
                                  "panoramas": ["pano.jpg"]}  # fmt: skip
    assert report["images_given"] == 12 and report["images_registered"] >= 11
    assert any("duplicates" in line and "zz_again.png (= view_07.jpg)" in line for line in said)
    assert "pano.jpg" in format_report(report)


def test_a_folder_mixing_two_scenes_names_the_other_scenes_photos(photos, tmp_path: Path) -> None:
    """Twelve photos of one scene and eight of another: the larger scene is kept, and the report names
    the other scene's photos as a separate model."""
    src, _ = photos
    mixed = tmp_path / "two"
    mixed.mkdir()
    for p in sorted(src.iterdir()):
        (mixed / p.name).write_bytes(p.read_bytes())
    viewmats, K = arc_cameras(8)
    for i, rgb in enumerate(render(viewmats, K, textured_splats(seed=9))):
        Image.fromarray(rgb).save(mixed / f"other_{i}.jpg", quality=95)
    out = reconstruct(mixed, tmp_path / "scene", progress=False, log=None)
    report = read_report(out)
    assert report["images_registered"] >= 11
    (other,) = report["separate_models"]
    assert len(other) >= 6 and all(n.startswith("other_") for n in other)
    assert set(other) <= set(report["not_registered"])
    assert "another scene?" in format_report(report)


def test_an_out_folder_that_cannot_be_written_is_named_in_one_line(photos, tmp_path: Path, monkeypatch) -> None:
    """A read-only disk (simulated: root writes anywhere) is refused before anything runs."""
    real_write = Path.write_bytes

    def read_only(self: Path, data: bytes) -> int:
        if "ro" in self.parts:
            raise PermissionError(30, "Read-only file system", str(self))
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", read_only)
    with pytest.raises(ValueError, match=r"ro/scene: cannot write the reconstruction there \(Read-only file system\)"):
        reconstruct(photos[0], tmp_path / "ro" / "scene", progress=False, log=None)


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    g = np.random.default_rng(0)
    upright = (g.uniform(0, 1, (6, 10, 3)) * 255).astype(np.uint8).repeat(16, 0).repeat(16, 1)  # 96 x 160
    stored = Image.fromarray(upright).transpose(Image.Transpose.ROTATE_90)  # as a sensor would store it
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    stored.save(tmp_path / "turned.jpg", quality=98, exif=exif.tobytes())
    size, written = prepare_photo(tmp_path / "turned.jpg", tmp_path / "out.jpg", max_size=None)
    assert size == written == (160, 96)
    back = np.asarray(Image.open(tmp_path / "out.jpg"), dtype=np.float64)
    assert np.abs(back - upright).mean() < 8.0
    assert np.abs(back - upright[::-1, ::-1]).mean() > 40.0  # the test can tell orientations apart
    assert Image.open(tmp_path / "out.jpg").getexif().get(0x0112, 1) == 1
    _, small = prepare_photo(tmp_path / "turned.jpg", tmp_path / "small.jpg", max_size=80)
    assert small == (80, 48)


def test_fisheye_photos_among_normal_ones_get_a_fisheye_camera(photos, tmp_path: Path) -> None:
    """Four photos through an equidistant fisheye (113 degrees across; EXIF lens model "... Fisheye")
    among twelve of a normal lens, all with a 35 mm equivalent focal length: the fisheye photos are
    named and get a fisheye camera of their own, which recovers their focal length; every photo
    registers and the poses hold (sharing the normal lens's camera, the centres were 25 % off)."""
    src, truth = photos
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    exif = Image.Exif()
    exif.get_ifd(0x8769)[0xA405] = focal_35mm(true_focal())
    for p in sorted(src.iterdir()):
        Image.open(p).save(mixed / p.name, quality=95, exif=exif.tobytes())
    truth = {**truth, **write_fisheye_photos(mixed, [1, 4, 7, 10])}
    assert exif_fisheye(mixed / "fisheye_04.jpg") == f"lens {FISHEYE_LENS!r}"
    assert exif_fisheye(src / "view_00.jpg") is None and exif_fisheye(mixed / "view_00.jpg") is None  # 30 mm
    exif.get_ifd(0x8769)[0xA405] = 8
    Image.open(src / "view_00.jpg").save(tmp_path / "wide.jpg", exif=exif.tobytes())
    assert exif_fisheye(tmp_path / "wide.jpg") == "8 mm (35 mm equivalent)"
    assert camera_model_for(4, "auto", fisheye=True) == "SIMPLE_RADIAL_FISHEYE"
    said: list[str] = []
    out = reconstruct(mixed, tmp_path / "scene", num_threads=1, progress=False, log=said.append)
    report = read_report(out)
    assert sorted(report["fisheye"]) == ["fisheye_01.jpg", "fisheye_04.jpg", "fisheye_07.jpg", "fisheye_10.jpg"]
    assert any(s.startswith("fisheye photos (lens ") and "fisheye_10.jpg" in s for s in said)
    assert report["images_registered"] == 16
    (fish,) = [c for c in report["cameras"] if c["model"] == "SIMPLE_RADIAL_FISHEYE"]
    assert fish["num_images"] == 4 and abs(fish["focal_px"][0] / FISHEYE_FOCAL - 1) < 0.05
    e = pose_errors(model_poses(pycolmap.Reconstruction(str(out / "sparse" / "0"))), truth).summary()
    assert e["rotation_median_deg"] < 1.0 and e["centre_median_pct"] < 2.0, e


def test_a_photo_whose_exif_orientation_tag_is_wrong_is_named(photos, tmp_path: Path) -> None:
    """Upright pixels with a tag that turns them a quarter (6) or half (3) turn: each registers rolled by
    that turn and is named in one line. With a tag that mirrors them (5) a photo matches nothing: the
    ``untagged`` strategy registers it with the tag ignored, in place, and names it. A photo stored
    turned with its right tag (6) is not named."""
    src, truth = photos
    mixed = tmp_path / "tagged"
    mixed.mkdir()
    wrong = {"view_05.jpg": 6, "view_08.jpg": 3, "view_10.jpg": 5}  # the pixels are upright already
    for p in sorted(src.iterdir()):
        im, exif = Image.open(p), Image.Exif()
        if p.name in wrong:
            exif[0x0112] = wrong[p.name]
        elif p.name == "view_02.jpg":  # right: stored as a sensor turned a quarter turn would store it
            exif[0x0112] = 6
            im = im.transpose(Image.Transpose.ROTATE_90)
        im.save(mixed / p.name, quality=95, exif=exif.tobytes())
    said: list[str] = []
    out = reconstruct(mixed, tmp_path / "scene", num_threads=1, progress=False, log=said.append)
    report = read_report(out)
    assert report["images_registered"] == 12 and report["not_registered"] == {} and report["unmatched"] == []
    assert sorted(report["turned_by_exif"]) == ["view_05.jpg", "view_08.jpg"]
    assert "EXIF orientation 6 turns it 90 deg" in report["turned_by_exif"]["view_05.jpg"]
    lines = [s for s in said if s.startswith("photo view_") and "its tag is likely wrong" in s]
    assert [s.split(" ")[1] for s in lines] == ["view_10.jpg", "view_05.jpg:", "view_08.jpg:"]
    assert lines[0].startswith("photo view_10.jpg registered only with its EXIF orientation tag (5) ignored")
    assert report["untagged"] == {"view_10.jpg": "view_10.untagged.jpg"}
    (last,) = [a for a in report["attempts"] if a["strategy"] == "untagged"]
    assert last["registered"] == 12 and last["kept"]
    assert "EXIF tag wrong?" in format_report(report) and "EXIF tag ignored" in format_report(report)
    assert (out / "images" / "view_10.untagged.jpg").is_file()
    truth = {**truth, "view_10.untagged.jpg": truth["view_10.jpg"]}
    e = pose_errors(model_poses(pycolmap.Reconstruction(str(out / "sparse" / "0"))), truth)
    rot = dict(zip(e.names, e.rotation_deg))
    assert abs(rot["view_05.jpg"] - 90) < 15 and abs(rot["view_08.jpg"] - 180) < 30  # rolled, as named
    assert rot["view_02.jpg"] < 10 and rot["view_10.untagged.jpg"] < 10
    from gsworkbench.sfm.screening import rolled_by_tag

    g = np.random.default_rng(5)  # straight down, held any way round: "down" is every way, nothing named
    spun = {f"p{k}": np.array([np.cos(a), np.sin(a), 0.0]) for k, a in enumerate(g.uniform(0, 2 * np.pi, 12))}
    assert rolled_by_tag(spun, {"p3": 6, "p4": 3}) == {}
    why = why_unregistered(["a.jpg", "b.jpg"], ["a.jpg"], {"a.jpg": 1, "b.jpg": 8})  # one that did not register
    assert why == {"a.jpg": "no matches", "b.jpg": "matches but no pose; EXIF orientation 8: is the tag wrong?"}


# ---- errors, each naming its cause and file ------------------------------------------------------------------


def test_named_errors(photos, tmp_path: Path) -> None:
    src, _ = photos
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=f"no images .* in {empty}"):
        reconstruct(empty, tmp_path / "o1", progress=False, log=None)
    two = tmp_path / "two"
    two.mkdir()
    for p in sorted(src.iterdir())[:2]:
        (two / p.name).write_bytes(p.read_bytes())
    with pytest.raises(ReconstructionFailed, match="only 2 image"):
        reconstruct(two, tmp_path / "o2", progress=False, log=None)
    bad = tmp_path / "bad"
    bad.mkdir()
    for p in sorted(src.iterdir())[:4]:
        (bad / p.name).write_bytes(p.read_bytes())
    (bad / "view_99.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    with pytest.raises(ValueError, match="cannot read photo .*view_99.jpg"):
        reconstruct(bad, tmp_path / "o3", progress=False, log=None)
    with pytest.raises(FileNotFoundError, match="photos not found"):
        reconstruct(tmp_path / "nowhere", tmp_path / "o4", progress=False, log=None)
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"\x00\x00\x00\x18ftypmp42 truncated")
    with pytest.raises(ValueError, match=f"cannot (read|decode) video {video}"):
        reconstruct(video, tmp_path / "o5", progress=False, log=None)


def test_images_that_match_nothing_are_named(photos, tmp_path: Path) -> None:
    src, _ = photos
    mixed = tmp_path / "noise"
    mixed.mkdir()
    for p in sorted(src.iterdir())[:4]:
        (mixed / p.name).write_bytes(p.read_bytes())
    g = np.random.default_rng(1)
    for k in range(6):  # photos of nothing in common with anything
        Image.fromarray((g.uniform(0, 1, (192, 256, 3)) * 255).astype(np.uint8)).save(mixed / f"zz_noise{k}.png")
    with pytest.raises(ReconstructionFailed, match=r"only \d+ of 10 images registered .*zz_noise0.png \(no matches\)"):
        reconstruct(mixed, tmp_path / "scene", progress=False, log=None)


def test_other_options_into_the_same_out_are_refused(photos, reconstructed: Path) -> None:
    with pytest.raises(ValueError, match="other input or options .*max_size"):
        reconstruct(photos[0], reconstructed, max_size=128, progress=False, log=None)


# ---- Ctrl-C and resuming -----------------------------------------------------------------------------------------


def test_ctrl_c_cancels_a_running_pycolmap_call() -> None:
    """cancellable's worker thread lets Ctrl-C reach the call's cancellation token."""
    seen = []

    def long_call(*, cancellation_token) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the call runs (the handler is in place by now)
        while not cancellation_token.is_cancelled:
            threading.Event().wait(0.01)
        seen.append("cancelled")

    with pytest.raises(Cancelled):
        cancellable(long_call)
    assert seen == ["cancelled"]


def test_an_interrupted_run_resumes_from_the_finished_stages(photos, tmp_path: Path, monkeypatch) -> None:
    import gsworkbench.sfm.pipeline as r

    out = tmp_path / "scene"

    def interrupted(*a, **k):
        raise Cancelled("incremental_mapping cancelled")

    monkeypatch.setattr(r, "_map", interrupted)
    with pytest.raises(Cancelled, match=f"finished stages and COLMAP's database are kept in {out / 'work'}"):
        reconstruct(photos[0], out, progress=False, log=None)
    state = json.loads((out / "reconstruct.json").read_text())
    assert set(state["stages"]) == {"photos", "features", "matching"} and (out / "work" / "database.db").is_file()
    monkeypatch.undo()

    def must_not_run(*a, **k):
        raise AssertionError("a finished stage ran again")

    monkeypatch.setattr(r, "_extract", must_not_run)
    monkeypatch.setattr(r, "_match", must_not_run)
    reconstruct(photos[0], out, progress=False, log=None)
    assert read_report(out)["images_registered"] >= 11
    assert json.loads((out / "reconstruct.json").read_text())["stages"]["features"] == state["stages"]["features"]


# ---- video ---------------------------------------------------------------------------------------------------


def _blur(rgb: np.ndarray, k: int = 9) -> np.ndarray:
    import torch

    t = torch.from_numpy(rgb).permute(2, 0, 1)[None].float()
    out = torch.nn.functional.avg_pool2d(t, k, stride=1, padding=k // 2, count_include_pad=False)
    return out[0].permute(1, 2, 0).round().to(torch.uint8).numpy()


def _smear(rgb: np.ndarray, length: int, direction: tuple[int, int] = (0, 1)) -> np.ndarray:
    """``rgb`` [H,W,3] uint8 averaged over ``length`` pixels along ``direction`` (dy, dx): motion blur."""
    acc = np.zeros(rgb.shape, dtype=np.float64)
    for k in range(-(length // 2), length // 2 + 1):
        acc += np.roll(rgb, (k * direction[0], k * direction[1]), axis=(0, 1))
    return (acc / length).round().astype(np.uint8)


def _write_clip(path: Path, frames: np.ndarray, sharp: set[int]) -> None:
    """A lossless video of ``frames`` [N,H,W,3] uint8, the frames not in ``sharp`` blurred."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=10)  # lossless: blur comes from us alone
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv444p"
        for i, f in enumerate(frames):
            img = f if i in sharp else _blur(f)
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def test_video_frames_are_sampled_evenly_and_blurry_ones_dropped(tmp_path: Path) -> None:
    viewmats, K = arc_cameras(30, step_deg=1.0)
    sharp = {3 * k + 1 for k in range(9)}  # one sharp frame in each stretch of 3, none in the last
    path = tmp_path / "clip.mkv"
    _write_clip(path, render(viewmats, K), sharp)
    got = extract_frames(path, tmp_path / "frames", num_frames=10)
    assert got.decoded == 30
    assert got.kept == sorted(sharp)
    assert len(got.blurry) == 1 and next(iter(got.blurry)) in (27, 28, 29)
    assert sorted(p.name for p in (tmp_path / "frames").iterdir()) == [f"frame_{i:05d}.jpg" for i in sorted(sharp)]
    assert "9 frames kept of 30 decoded, 1 dropped as blurry" == got.summary()


def test_sharpness_falls_with_blur() -> None:
    g = np.random.default_rng(2)
    img = (g.uniform(0, 1, (64, 64, 3)) * 255).astype(np.uint8)
    assert sharpness(_blur(img).mean(2)) < 0.2 * sharpness(img.mean(2))


def test_motion_blur_ratio_sees_a_smear_in_any_direction_at_any_size_and_contrast() -> None:
    """Still frames of both scenes score above the floor, at two sizes, half the contrast and with
    sensor noise; a smear over 5 % of the width along either axis or a diagonal scores under it."""
    g = np.random.default_rng(4)
    for W, H in ((256, 192), (512, 384)):
        viewmats, K = arc_cameras(2, width=W, height=H)
        for splats in (None, plain_wall_splats()):
            still = render(viewmats[1:], K, splats, W, H)[0]
            noisy = np.clip(still + g.normal(0, 2.0, still.shape), 0, 255).astype(np.uint8)
            for img in (still, noisy, (still // 2 + 64).astype(np.uint8)):
                assert motion_blur_ratio(img.mean(2)) > MOTION_BLUR_RATIO + 0.05, (W, splats is None)
            for direction in ((0, 1), (1, 0), (1, 1)):
                smeared = _smear(noisy, W // 18 | 1, direction)
                assert motion_blur_ratio(smeared.mean(2)) < MOTION_BLUR_RATIO - 0.05, (W, splats is None, direction)
    assert motion_blur_ratio(np.full((50, 60), 7.0)) == 1.0


def test_a_video_blurred_throughout_is_named_and_still_reconstructs(tmp_path: Path) -> None:
    """A walk around the cube filmed without a still moment: every frame smeared by 9 pixels (3.5 % of
    the width) along the motion. The relative rule keeps them all; the absolute floor counts each, one
    line names the video, and the frames still register, with rougher poses than a sharp video's."""
    viewmats, K = arc_cameras(36, step_deg=3.0)
    path = tmp_path / "walk.mkv"
    _write_clip(path, np.stack([_smear(f, 9) for f in render(viewmats, K)]), set(range(36)))
    said: list[str] = []
    out = reconstruct(path, tmp_path / "scene", video_frames=12, num_threads=1, progress=False, log=said.append)
    report = read_report(out)
    assert report["video"]["blurry"] == 0 and report["video"]["motion_blurred"] == 12
    (line,) = [s for s in said if s.startswith("video walk.mkv: 12 of 12 kept frames are motion-blurred (")]
    assert "no frame is sharp" in line and "\n" not in line and line in format_report(report)
    assert report["images_registered"] >= 11
    truth = {f"frame_{i:05d}.jpg": m.double().numpy() for i, m in enumerate(viewmats)}
    e = pose_errors(model_poses(pycolmap.Reconstruction(str(out / "sparse" / "0"))), truth).summary()
    assert e["rotation_median_deg"] < 4.0 and e["centre_median_pct"] < 4.0, e


def test_a_video_reconstructs_with_sequential_matching(tmp_path: Path) -> None:
    viewmats, K = arc_cameras(36, step_deg=3.0)
    path = tmp_path / "walk.mkv"
    _write_clip(path, render(viewmats, K), set(range(36)))
    out = reconstruct(path, tmp_path / "scene", video_frames=12, progress=False, log=None)
    report = read_report(out)
    assert report["matcher"] == "sequential+retrieval" and report["video"] == {"decoded": 36, "kept": 12, "blurry": 0,
                                                                                        "motion_blurred": 0}
    assert report["images_registered"] >= 11 and "12 kept of 36 decoded" in format_report(report)


@pytest.mark.parametrize(
    ("options", "named"),
    [({"camera": "each"}, "camera must be one of"), ({"matcher": "vocab"}, "matcher must be one of"),
     ({"max_size": 8}, "max_size must be"), ({"min_registered": 0.0}, "min_registered must be"),
     ({"min_inliers": 3}, "min_inliers must be"), ({"overlap": 0}, "overlap must be"),
     ({"focal": 500.0}, "unknown reconstruct option.*focal")],
)  # fmt: skip
def test_bad_options_are_named_before_anything_runs(photos, tmp_path: Path, options, named) -> None:
    with pytest.raises(ValueError, match=named):
        reconstruct(photos[0], tmp_path / "scene", progress=False, log=None, **options)
    assert not (tmp_path / "scene").exists()
