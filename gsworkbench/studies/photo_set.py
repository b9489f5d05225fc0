"""Photo sets with known poses, rendered in milliseconds by our rasterizer: the reconstruction tests'
input and the ``reconstruct`` benchmark's 1-megapixel case.

Two scenes (:data:`SCENES`):

- ``textured_cube``: a cube of side 1.2 on a 4 x 4 floor, covered by small opaque splats whose colours
  mix a per-splat random colour with smooth colour fields (a speckled, non-repeating texture that SIFT
  finds thousands of distinct points on);
- ``plain_wall``: a small textured object (a cube of side 0.5) on a plain grey floor in front of a
  plain wall, as a phone capture of a thing on a table against a wall: the plain surfaces give SIFT
  nothing, so every pose rests on the few hundred points of the object;
- ``glossy_cube``: ``textured_cube`` with a glossy finish: the Blinn-Phong highlights of
  :data:`GLOSSY_LIGHTS` on the cube's faces and the floor (:func:`specular_highlights`), white and
  clipped, which slide over the surfaces as the camera moves, as on varnished wood or a glazed
  tabletop: features on a highlight's rim belong to no fixed point.

Photos of a fisheye lens (:func:`write_fisheye_photos`): the same arc through an equidistant fisheye
(an image radius proportional to the angle off the axis, 113 degrees across), resampled from a wider
pinhole render, with the EXIF lens model a fisheye photo carries.

Cameras on an arc around the scene (radius 3, ``step_deg`` apart, height 1.2 to 1.6) look at the
origin.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from gsworkbench.core.cameras import intrinsics_from_fov, look_at
from gsworkbench.splat import rasterize

W, H = 256, 192  # the tests' size


def textured_splats(n: int = 60_000, seed: int = 0) -> dict[str, torch.Tensor]:
    """Means [n,3], quats [n,4], scales [n,3], opacities [n], colours [n,3] of the cube and floor."""
    g = np.random.default_rng(seed)
    n_floor = n // 2
    floor = np.c_[g.uniform(-2, 2, (n_floor, 2)), np.full(n_floor, -0.6)]
    face = g.integers(0, 5, n - n_floor)  # the cube's faces but the bottom
    uv = g.uniform(-0.6, 0.6, (n - n_floor, 2))
    cube = np.zeros((n - n_floor, 3))
    for k, (axis, sign) in enumerate(((0, 1), (0, -1), (1, 1), (1, -1), (2, 1))):
        m = face == k
        others = [a for a in range(3) if a != axis]
        cube[m, axis] = 0.6 * sign
        cube[m, others[0]], cube[m, others[1]] = uv[m, 0], uv[m, 1]
    means = np.concatenate([floor, cube])
    smooth = 0.5 + 0.5 * np.sin(means @ g.normal(0, 3.0, (3, 3)) + g.uniform(0, 6.3, 3))
    colours = np.clip(0.45 * g.uniform(0, 1, (n, 3)) + 0.55 * smooth, 0, 1)
    return {
        "means": torch.tensor(means, dtype=torch.float32),
        "quats": torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(n, 1),
        "scales": torch.full((n, 3), 0.012),
        "opacities": torch.full((n,), 0.98),
        "colors": torch.tensor(colours, dtype=torch.float32),
    }


def plain_wall_splats(n: int = 60_000, seed: int = 0, side: float = 0.5) -> dict[str, torch.Tensor]:
    """The ``plain_wall`` scene (see the module docstring): a third of ``n`` splats each for the wall, the
    floor and the object, in the layout of :func:`textured_splats`."""
    g = np.random.default_rng(seed)
    across = math.radians(75.0)  # the arc's middle azimuth for a dozen views: the wall stands behind the object
    u = np.array([math.cos(across), math.sin(across), 0.0])
    v = np.array([-u[1], u[0], 0.0])
    n_wall = n_floor = n // 3
    n_obj = n - n_wall - n_floor
    up = np.array([0.0, 0.0, 1.0])
    wall = -1.6 * u + g.uniform(-3, 3, n_wall)[:, None] * v + g.uniform(-0.6, 2.5, n_wall)[:, None] * up
    floor = g.uniform(-3, 3, n_floor)[:, None] * v + g.uniform(-1.6, 3, n_floor)[:, None] * u + np.array([0, 0, -0.6])
    face = g.integers(0, 5, n_obj)
    uv = g.uniform(-side / 2, side / 2, (n_obj, 2))
    cube = np.zeros((n_obj, 3))
    for k, (axis, sign) in enumerate(((0, 1), (0, -1), (1, 1), (1, -1), (2, 1))):
        m = face == k
        others = [a for a in range(3) if a != axis]
        cube[m, axis] = side / 2 * sign
        cube[m, others[0]], cube[m, others[1]] = uv[m, 0], uv[m, 1]
    cube[:, 2] += side / 2 - 0.6  # on the floor
    smooth = 0.5 + 0.5 * np.sin(cube @ g.normal(0, 12.0, (3, 3)) + g.uniform(0, 6.3, 3))
    plain = np.concatenate([np.tile([0.85, 0.82, 0.75], (n_wall, 1)), np.tile([0.55, 0.55, 0.58], (n_floor, 1))])
    colours = np.concatenate([plain, np.clip(0.45 * g.uniform(0, 1, (n_obj, 3)) + 0.55 * smooth, 0, 1)])
    scales = np.concatenate([np.full(n_wall + n_floor, 0.03), np.full(n_obj, side / 60)])
    return {
        "means": torch.tensor(np.concatenate([wall, floor, cube]), dtype=torch.float32),
        "quats": torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(n, 1),
        "scales": torch.tensor(scales, dtype=torch.float32)[:, None].repeat(1, 3),
        "opacities": torch.full((n,), 0.98),
        "colors": torch.tensor(colours, dtype=torch.float32),
    }


SCENES = {"textured_cube": textured_splats, "plain_wall": plain_wall_splats, "glossy_cube": textured_splats}
GLOSSY = ("glossy_cube",)  # the scenes rendered with specular highlights
GLOSSY_LIGHTS = ((1.5, -1.0, 3.0), (-1.0, 2.0, 2.5), (2.5, 2.5, 1.5))  # point lights (world)
SHININESS = 40.0  # the Blinn-Phong exponent: highlights a few degrees wide, as on a semi-gloss finish
SPECULAR = 1.6  # a highlight's peak over the diffuse colour (in [0, 1] units: the peak clips to white)
_CUBE_HALF, _FLOOR_Z, _FLOOR_HALF = 0.6, -0.6, 2.0  # the geometry of ``textured_splats``


def specular_highlights(viewmat: torch.Tensor, K: torch.Tensor, width: int = W, height: int = H) -> np.ndarray:
    """The specular term [H,W] (>= 0) of the cube (side 1.2, centred at the origin) and the floor
    (z = -0.6, 4 x 4) of ``textured_splats`` seen through one camera (``viewmat`` [4,4] world-to-camera,
    ``K`` [3,3]): each pixel's ray is intersected with the two analytically, and the highlights of
    :data:`GLOSSY_LIGHTS` are summed (Blinn-Phong, exponent :data:`SHININESS`, peak :data:`SPECULAR`);
    zero where the ray meets neither."""
    m = viewmat.double().numpy()
    R, t = m[:3, :3], m[:3, 3]
    centre = -R.T @ t
    u, v = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    pix = np.stack([u, v, np.ones_like(u)], -1) @ np.linalg.inv(K.double().numpy()).T
    rays = pix @ R  # world directions [H,W,3] (R^T d for each pixel)
    rays /= np.linalg.norm(rays, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the cube: slab intersection, the entry face's axis is the one whose slab is entered last
        lo = (-_CUBE_HALF - centre) / rays
        hi = (_CUBE_HALF - centre) / rays
        near, far = np.minimum(lo, hi), np.maximum(lo, hi)
        t_in, t_out = near.max(-1), far.min(-1)
        hit_cube = (t_in <= t_out) & (t_in > 0)
        t_floor = (_FLOOR_Z - centre[2]) / rays[..., 2]
    floor_pt = centre + np.nan_to_num(t_floor)[..., None] * rays
    hit_floor = (t_floor > 0) & (np.abs(floor_pt[..., :2]) <= _FLOOR_HALF).all(-1) & ~hit_cube
    depth = np.where(hit_cube, t_in, np.where(hit_floor, t_floor, 0.0))
    point = centre + depth[..., None] * rays
    axis = near.argmax(-1)
    normal = np.zeros_like(point)
    np.put_along_axis(normal, axis[..., None], -np.sign(np.take_along_axis(rays, axis[..., None], -1)), -1)
    normal = np.where(hit_cube[..., None], normal, np.array([0.0, 0.0, 1.0]))
    to_eye = -rays
    spec = np.zeros((height, width))
    for light in GLOSSY_LIGHTS:
        to_light = np.asarray(light) - point
        to_light /= np.linalg.norm(to_light, axis=-1, keepdims=True)
        half = to_light + to_eye
        half /= np.linalg.norm(half, axis=-1, keepdims=True)
        lit = (to_light * normal).sum(-1) > 0
        spec += np.where(lit, np.clip((half * normal).sum(-1), 0, 1) ** SHININESS, 0.0)
    return np.where(hit_cube | hit_floor, SPECULAR * spec, 0.0)


def arc_cameras(
    n: int, step_deg: float = 10.0, dtype: torch.dtype = torch.float32, width: int = W, height: int = H
) -> tuple[torch.Tensor, torch.Tensor]:
    """n world-to-camera matrices [n,4,4] (OpenCV axes) on the arc and the shared K [3,3] (60 degrees
    across ``width``)."""
    views = []
    for i in range(n):
        az = math.radians(20.0 + step_deg * i)
        z = 1.2 + 0.4 * (i % 3) / 2
        views.append(look_at((3.0 * math.cos(az), 3.0 * math.sin(az), z), (0.0, 0.0, 0.0), dtype=dtype))
    return torch.stack(views), intrinsics_from_fov(width, height, 60.0, dtype=dtype)


def render(
    viewmats: torch.Tensor, K: torch.Tensor, splats: dict[str, torch.Tensor] | None = None, width: int = W,
    height: int = H, glossy: bool = False,
) -> np.ndarray:  # fmt: skip
    """uint8 RGB images [V,H,W,3] of the scene over a grey background, rendered a view at a time;
    ``glossy``: with the highlights of :func:`specular_highlights` (the ``textured_cube`` geometry)."""
    s = splats or textured_splats()
    out = []
    with torch.no_grad():
        for vm in viewmats:
            img, _, _ = rasterize(s["means"], s["quats"], s["scales"], s["opacities"], s["colors"], vm[None].float(),
                                  K[None].float(), width, height, backgrounds=torch.full((1, 3), 0.5))  # fmt: skip
            if glossy:
                img = img + torch.from_numpy(specular_highlights(vm, K, width, height)).float()[None, ..., None]
            out.append((img[0].clamp(0, 1) * 255).round().to(torch.uint8).numpy())
    return np.stack(out)


def write_photos(
    folder: Path, n: int = 12, width: int = W, height: int = H, step_deg: float = 10.0, num_splats: int = 60_000,
    scene: str = "textured_cube",
) -> dict[str, np.ndarray]:
    """Writes n JPEG photos (``view_NN.jpg``) of ``scene`` (:data:`SCENES`) into ``folder``; returns their
    true world-to-camera matrices [4,4] by name."""
    from PIL import Image

    if scene not in SCENES:
        raise ValueError(f"scene must be one of {sorted(SCENES)}, got {scene!r}")
    folder.mkdir(parents=True, exist_ok=True)
    viewmats, K = arc_cameras(n, step_deg, width=width, height=height)
    truth = {}
    for i, rgb in enumerate(render(viewmats, K, SCENES[scene](num_splats), width, height, scene in GLOSSY)):
        name = f"view_{i:02d}.jpg"
        Image.fromarray(rgb).save(folder / name, quality=95)
        truth[name] = viewmats[i].double().numpy()
    return truth


def true_focal(width: int = W, height: int = H) -> float:
    """The true focal length in pixels of the photos."""
    return float(arc_cameras(1, width=width, height=height)[1][0, 0])


def focal_35mm(focal_px: float, width: int = W, height: int = H) -> int:
    """The EXIF FocalLengthIn35mmFilm (whole mm) from which COLMAP takes a focal length of about
    ``focal_px`` as its prior (COLMAP: the 35 mm value / 35 x the long side)."""
    return round(35.0 * focal_px / max(width, height))


FISHEYE_FOCAL = 130.0  # px at the tests' width: 113 degrees across 256 px, 141 across the diagonal
FISHEYE_LENS = "Test 7.5mm F2.8 Fisheye"  # the EXIF LensModel written (names like it are what phones write)


def fisheye_render(
    viewmats: torch.Tensor, splats: dict[str, torch.Tensor] | None = None, width: int = W, height: int = H,
    focal: float = FISHEYE_FOCAL,
) -> np.ndarray:  # fmt: skip
    """uint8 RGB images [V,H,W,3] through an equidistant fisheye (pixel radius = ``focal`` x the angle off
    the axis, principal point at the centre): each view rendered by a pinhole of the same focal length
    wide enough for the corners, and resampled bilinearly."""
    half_diag = math.hypot(width, height) / 2
    if half_diag / focal >= math.radians(80):
        raise ValueError(f"a fisheye of focal {focal} px reaches past 80 degrees at {width}x{height}")
    reach = math.tan(half_diag / focal)  # the pinhole's image-plane extent at the corners
    sw, sh = (2 * math.ceil(focal * reach * side / half_diag) + 2 for side in (width / 2, height / 2))
    K_src = torch.tensor([[focal, 0.0, sw / 2], [0.0, focal, sh / 2], [0.0, 0.0, 1.0]])
    source = render(viewmats, K_src, splats, sw, sh)
    u, v = np.meshgrid(np.arange(width) + 0.5 - width / 2, np.arange(height) + 0.5 - height / 2)
    theta = np.hypot(u, v) / focal
    stretch = np.where(theta > 0, np.tan(theta) / np.maximum(theta, 1e-12), 1.0)  # pinhole radius / fisheye radius
    xs, ys = u * stretch + sw / 2, v * stretch + sh / 2  # pixel positions in the pinhole render
    grid = torch.tensor(np.stack([2 * xs / sw - 1, 2 * ys / sh - 1], -1), dtype=torch.float32)[None]
    out = []
    for img in source:
        t = torch.from_numpy(img).permute(2, 0, 1)[None].float()
        warped = torch.nn.functional.grid_sample(t, grid, mode="bilinear", align_corners=False)
        out.append(warped[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy())
    return np.stack(out)


def write_fisheye_photos(
    folder: Path, indices: list[int], n: int = 12, step_deg: float = 10.0, num_splats: int = 60_000
) -> dict[str, np.ndarray]:
    """Writes JPEGs ``fisheye_NN.jpg`` of the arc's views ``indices`` (of ``n``; the views of
    :func:`write_photos`) through :func:`fisheye_render`, each with the EXIF LensModel
    :data:`FISHEYE_LENS` and the 35 mm equivalent focal length (:func:`focal_35mm`); returns their true
    world-to-camera matrices [4,4] by name."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    viewmats, _ = arc_cameras(n, step_deg)
    chosen = viewmats[list(indices)]
    exif = Image.Exif()
    exif.get_ifd(0x8769)[0xA434] = FISHEYE_LENS  # the Exif IFD's LensModel
    exif.get_ifd(0x8769)[0xA405] = focal_35mm(FISHEYE_FOCAL)  # FocalLengthIn35mmFilm
    truth = {}
    for i, rgb in zip(indices, fisheye_render(chosen, textured_splats(num_splats))):
        name = f"fisheye_{i:02d}.jpg"
        Image.fromarray(rgb).save(folder / name, quality=95, exif=exif.tobytes())
        truth[name] = viewmats[i].double().numpy()
    return truth
