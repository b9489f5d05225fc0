"""The built-in "capture" scene: the room, cluttered (:func:`~gsworkbench.synthetic.mitsuba_scenes.capture_scene`),
as a photo capture reaches a researcher after COLMAP.

What it holds (``W`` x ``H`` = the generator's width and height):

- ``images/frame_NNNNN.jpg``: JPEG photos (quality 92) through a lens with OPENCV distortion (barrel,
  k1 about -0.12, small k2, p1, p2), one camera per image: focal lengths, principal points and k1
  vary a little from photo to photo, as COLMAP finds them with one camera per image. Each is made by
  rendering a pinhole view with Mitsuba that covers the lens's field of view, then resampling it
  through the lens (pycolmap's ``cam_from_img``: the inverse of what a loader must undo);
- :data:`N_MISSING` listed frames with no image file (in the COLMAP model and in transforms.json);
- ``sparse/0/``: the COLMAP model (OPENCV cameras, posed images, the point cloud), written by pycolmap;
- ``transforms.json``: the nerfstudio form of the same: ``camera_model`` OPENCV and ``w``/``h`` at file
  level, ``fl_x``, ``fl_y``, ``cx``, ``cy``, ``k1``, ``k2``, ``p1``, ``p2`` per frame, the split as
  ``train_filenames``/``test_filenames``, ``ply_file_path`` and the room's box as ``aabb``;
- ``sparse_pc.ply``: the point cloud (surface points seen by the train views, their colours);
- ``undistorted/``: what ``colmap image_undistorter`` makes of it (pycolmap's ``undistort_images``):
  PINHOLE cameras, one per image, and images a few pixels apart in size.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from gsworkbench.core.atomic import write_json
from gsworkbench.scenes.colmap import write_colmap_model
from gsworkbench.scenes.lens import make_camera
from gsworkbench.scenes.points import write_points_ply
from gsworkbench.scenes.transforms_json import GL_TO_CV
from gsworkbench.synthetic.mitsuba_render import linear_to_srgb, load_scene_dict, render_views, to_straight_srgba
from gsworkbench.synthetic.mitsuba_scenes import capture_scene, room_cameras
from gsworkbench.synthetic.surface_points import sample_surface_points, stage_seconds

CAMERA_MODEL = "OPENCV"
DISTORTION = (-0.12, 0.02, 0.002, -0.0015)  # k1, k2, p1, p2 of the mean lens
N_MISSING = 2
JPEG_QUALITY = 92
SKY = (0.62, 0.72, 0.85)  # sRGB colour behind the open ceiling (the photos have no alpha)
ROOM_BOX = [[-4.0, -4.0, 0.0], [4.0, 4.0, 2.5]]


def capture_cameras(n: int, width: int, height: int, rng: np.random.Generator) -> list[Any]:
    """n OPENCV ``pycolmap.Camera`` s of ``width`` x ``height``: the room's 60 degree lens with
    :data:`DISTORTION`, focal lengths within 2 %, principal points within 2 % of the size of the
    centre, k1 within 25 % of its mean."""
    f0 = 0.5 * width / np.tan(np.radians(30.0))
    k1, k2, p1, p2 = DISTORTION
    cams = []
    for _ in range(n):
        j = rng.uniform(-1.0, 1.0, size=5)
        fx = f0 * (1 + 0.02 * j[0])
        params = [fx, fx * (1 + 0.005 * j[1]), width * (0.5 + 0.02 * j[2]), height * (0.5 + 0.02 * j[3])]
        cams.append(make_camera(CAMERA_MODEL, width, height, [*params, k1 * (1 + 0.25 * j[4]), k2, p1, p2]))
    return cams


def _pixel_rays(cam: Any) -> np.ndarray:
    """Normalized image-plane coordinates [H,W,2] of the pixel centres of ``cam`` (its lens undone)."""
    v, u = np.mgrid[0 : cam.height, 0 : cam.width].astype(np.float64) + 0.5
    xy = cam.cam_from_img(np.stack([u.ravel(), v.ravel()], axis=1))
    return np.asarray(xy, dtype=np.float64).reshape(cam.height, cam.width, 2)


def source_canvas(cams: list[Any]) -> tuple[float, int, int]:
    """A centred pinhole (focal f in pixels, width, height) whose view covers every ray of ``cams``,
    sampled at least as densely as their pixels."""
    f = max(max(c.focal_length_x, c.focal_length_y) for c in cams)
    ext = np.zeros(2)
    for c in cams:
        ext = np.maximum(ext, np.abs(_pixel_rays(c)).reshape(-1, 2).max(0))
    w, h = (2 * np.ceil(f * ext + 2.0)).astype(int)
    return f, int(w), int(h)


def distort(source: np.ndarray, f: float, cam: Any) -> np.ndarray:
    """The image [H,W,C] that ``cam`` sees of a centred pinhole image ``source`` [Hs,Ws,C] with focal
    length ``f`` (bilinear resampling; pixel centres at +0.5 in both)."""
    Hs, Ws = source.shape[:2]
    xy = _pixel_rays(cam)
    grid = np.stack([(f * xy[..., 0] + Ws / 2) * 2 / Ws - 1, (f * xy[..., 1] + Hs / 2) * 2 / Hs - 1], axis=-1)
    src = torch.from_numpy(np.ascontiguousarray(source)).permute(2, 0, 1)[None].double()
    g = torch.from_numpy(grid)[None]
    out = F.grid_sample(src, g, mode="bilinear", padding_mode="border", align_corners=False)
    return out[0].permute(1, 2, 0).numpy().astype(np.float32)


def _save_jpeg(path: Path, rgb: np.ndarray) -> None:
    from PIL import Image

    Image.fromarray(np.round(np.clip(rgb, 0, 1) * 255).astype(np.uint8), mode="RGB").save(path, quality=JPEG_QUALITY)


def write_capture(folder: Path, p: Any) -> dict[str, Any]:
    """Renders and writes the capture scene for generator parameters ``p`` into ``folder``; returns the
    manifest (``scene.json``'s content, without the generator's own keys)."""
    import pycolmap

    rng = np.random.default_rng(p.seed)
    t0 = time.perf_counter()
    mi_scene = load_scene_dict(capture_scene(rng))
    n_views = p.n_train + p.n_test
    n_listed = n_views + N_MISSING
    viewmats, _, _ = room_cameras(n_listed, p.width, p.height, rng)
    cams = capture_cameras(n_listed, p.width, p.height, rng)
    missing = set(np.linspace(1, n_listed - 2, N_MISSING).round().astype(int).tolist())
    present = [i for i in range(n_listed) if i not in missing]
    test_pos = {present[k] for k in np.floor((np.arange(p.n_test) + 0.5) * n_views / max(p.n_test, 1)).astype(int)}
    names = [f"frame_{i:05d}.jpg" for i in range(n_listed)]
    f, Ws, Hs = source_canvas([cams[i] for i in present])
    K_src = torch.tensor([[f, 0.0, Ws / 2], [0.0, f, Hs / 2], [0.0, 0.0, 1.0]], dtype=torch.float64)
    (folder / "images").mkdir()
    t_load = time.perf_counter()
    sources = {}
    sky_lin = np.asarray(SKY) ** 2.2  # near enough the sRGB curve for a background colour
    rendered = render_views(mi_scene, viewmats[present], K_src, Ws, Hs, p.spp, p.seed)
    for i, img in zip(present, rendered):
        photo = distort(img, f, cams[i])  # premultiplied linear RGBA through the lens
        rgb_lin = photo[..., :3] + (1.0 - np.clip(photo[..., 3:], 0, 1)) * sky_lin
        _save_jpeg(folder / "images" / names[i], linear_to_srgb(rgb_lin))
        sources[i] = to_straight_srgba(img)
    t_render = time.perf_counter()
    train = [i for i in present if i not in test_pos]
    points, colors = sample_surface_points(
        mi_scene, viewmats[train], K_src, [sources[i] for i in train], p.n_points, rng
    )
    t_points = time.perf_counter()

    write_colmap_model(folder / "sparse" / "0", names, viewmats.numpy(), cams, list(range(n_listed)), points, colors)
    write_points_ply(folder / "sparse_pc.ply", points, colors)
    frames = []
    for i in range(n_listed):
        fx, fy, cx, cy, k1, k2, p1, p2 = (float(v) for v in cams[i].params)
        c2w = np.linalg.inv(viewmats[i].numpy()) @ GL_TO_CV
        frames.append({"file_path": f"images/{names[i]}", "transform_matrix": c2w.tolist(), "fl_x": fx, "fl_y": fy,
                       "cx": cx, "cy": cy, "k1": k1, "k2": k2, "p1": p1, "p2": p2})  # fmt: skip
    write_json(
        folder / "transforms.json",
        {
            "camera_model": CAMERA_MODEL, "w": p.width, "h": p.height, "aabb": ROOM_BOX,
            "ply_file_path": "sparse_pc.ply", "frames": frames,
            "train_filenames": [f"images/{names[i]}" for i in train],
            "test_filenames": [f"images/{names[i]}" for i in sorted(test_pos)],
        },
    )  # fmt: skip
    level, pycolmap.logging.minloglevel = pycolmap.logging.minloglevel, 1  # its INFO lines: not ours to print
    try:
        pycolmap.undistort_images(
            str(folder / "undistorted"), str(folder / "sparse" / "0"), str(folder / "images"),
            image_names=[names[i] for i in present], jpeg_quality=JPEG_QUALITY, num_threads=1,
        )  # fmt: skip
    finally:
        pycolmap.logging.minloglevel = level
    for extra in (folder / "undistorted").iterdir():  # keep the images and the model (no MVS set-up)
        if extra.name not in ("images", "sparse"):
            shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
    return {
        "camera_model": CAMERA_MODEL,
        "source_pinhole": {"focal": f, "width": Ws, "height": Hs},
        "train_images": [f"images/{names[i]}" for i in train],
        "test_images": [f"images/{names[i]}" for i in sorted(test_pos)],
        "missing_images": [f"images/{names[i]}" for i in sorted(missing)],
        "num_points": len(points),
        "seconds": stage_seconds(t0, t_load, t_render, t_points),
    }


def pinhole_twin(scene: Any, seed: int = 0, spp: int = 64, supersample: int = 2) -> Any:
    """``scene`` (the capture scene as a loader made it: undistorted, cropped) with every image rendered
    again by Mitsuba at its loaded camera (pose and pinhole intrinsics) over the same sky: the same views
    with no lens and no JPEG. Training on both and comparing their test PSNR measures what the distortion
    costs once the loader has undone it. ``seed`` is the generator's (it places the room's furniture),
    ``spp`` its samples per pixel; see :func:`pinhole_views` for ``supersample``."""
    import dataclasses

    views = list(range(len(scene.viewmats)))
    images = pinhole_views(scene, views, scene.width, scene.height, seed, spp, supersample)
    twin = dataclasses.replace(scene, images=images.to(scene.images))
    twin.name = f"{scene.name} (pinhole twin)"
    return twin


def pinhole_views(
    scene: Any, views: list[int], width: int, height: int, seed: int = 0, spp: int = 64, supersample: int = 2
) -> torch.Tensor:
    """Views ``views`` of the capture ``scene`` (loaded: pinhole cameras) rendered by Mitsuba at
    ``width`` x ``height`` pixels with the same field of view (the intrinsics scaled by the sizes'
    ratios, pixel corners kept), no lens and no JPEG, over the capture's sky: sRGB [V,height,width,3]
    float32. ``seed`` is the generator's (it places the room's furniture), ``spp`` the samples per pixel
    of the canvas. The renderer draws centred square-pixel pinholes only, so each view is rendered
    ``supersample`` x finer on a centred canvas that covers it, then resampled to its camera."""
    rng = np.random.default_rng(seed)
    mi_scene = load_scene_dict(capture_scene(rng))
    sky_lin = np.asarray(SKY) ** 2.2
    sx, sy = width / scene.width, height / scene.height
    images = []
    for i in views:
        fx, fy, cx, cy = (float(scene.Ks[i, 0, 0]) * sx, float(scene.Ks[i, 1, 1]) * sy, float(scene.Ks[i, 0, 2]) * sx,
                          float(scene.Ks[i, 1, 2]) * sy)  # fmt: skip
        cam = make_camera("PINHOLE", width, height, [fx, fy, cx, cy])
        f, Ws, Hs = source_canvas([cam])
        f, Ws, Hs = f * supersample, Ws * supersample, Hs * supersample
        K_src = torch.tensor([[f, 0.0, Ws / 2], [0.0, f, Hs / 2], [0.0, 0.0, 1.0]], dtype=torch.float64)
        (img,) = render_views(mi_scene, scene.viewmats[i : i + 1].cpu(), K_src, Ws, Hs, spp, seed + 1000 + i)
        photo = distort(img, f, cam)  # a PINHOLE "lens": only the intrinsics' resampling
        rgb_lin = photo[..., :3] + (1.0 - np.clip(photo[..., 3:], 0, 1)) * sky_lin
        images.append(torch.from_numpy(np.clip(linear_to_srgb(rgb_lin), 0, 1).astype(np.float32)))
    return torch.stack(images)
