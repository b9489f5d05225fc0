"""The built-in synthetic scenes as Mitsuba 3 scene descriptions, and their cameras.

World units are arbitrary, z is up. Albedos stay at or below 0.8 and the lights are chosen so that
rendered radiance stays below 1 (no clipping). Textures are Mitsuba's checkerboard or small numpy
bitmaps (stripes, smooth colour fields) that a few thousand Gaussians can reproduce, except the clutter
of the capture scene (:func:`_noise`) and the prints of the bricks (:func:`_print`: detail down to the
pixel of an 800 px view, texels the same size on every face).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gsworkbench.core.cameras import intrinsics_from_fov, look_at
from gsworkbench.synthetic.mitsuba_render import mitsuba_scalar

GOLDEN_ANGLE_DEG = 180.0 * (3.0 - math.sqrt(5.0))


def _rgb(v: tuple[float, float, float]) -> dict[str, Any]:
    return {"type": "rgb", "value": list(v)}


def _diffuse(texture: dict[str, Any]) -> dict[str, Any]:
    return {"type": "diffuse", "reflectance": texture}


def _checker(c0: tuple[float, float, float], c1: tuple[float, float, float], scale: float) -> dict[str, Any]:
    mi = mitsuba_scalar()

    return {
        "type": "checkerboard",
        "color0": _rgb(c0),
        "color1": _rgb(c1),
        "to_uv": mi.ScalarTransform4f().scale([scale, scale, 1.0]),
    }


def _bitmap(array: np.ndarray) -> dict[str, Any]:
    """A linear-RGB bitmap texture [h,w,3] in [0,1], bilinearly filtered."""
    mi = mitsuba_scalar()

    return {
        "type": "bitmap",
        "bitmap": mi.Bitmap(np.ascontiguousarray(array, dtype=np.float32)),
        "raw": True,
        "filter_type": "bilinear",
    }


def _stripes(c0: tuple[float, float, float], c1: tuple[float, float, float], n: int, size: int = 64) -> np.ndarray:
    """Soft stripes along u: n periods over the texture."""
    t = 0.5 + 0.5 * np.sin(2 * np.pi * n * (np.arange(size) + 0.5) / size)
    t = np.broadcast_to(t[None, :, None], (size, size, 1))
    return (1 - t) * np.asarray(c0) + t * np.asarray(c1)


def _colour_field(rng: np.random.Generator, cells: int, lo: float = 0.1, hi: float = 0.8) -> np.ndarray:
    """A smooth random colour field: a cells x cells grid of colours (bilinearly filtered by Mitsuba)."""
    return rng.uniform(lo, hi, size=(cells, cells, 3))


def _lights(env: float, sun: float, direction: tuple[float, float, float]) -> dict[str, Any]:
    return {
        "env": {"type": "constant", "radiance": _rgb((env, env, env))},
        "sun": {"type": "directional", "direction": list(direction), "irradiance": _rgb((sun, sun, sun))},
    }


def object_scene(rng: np.random.Generator) -> dict[str, Any]:
    """A few textured shapes around the origin (within radius ~0.9), no ground: an object on a
    transparent background."""
    mi = mitsuba_scalar()

    T = mi.ScalarTransform4f
    return {
        "type": "scene",
        **_lights(0.55, 1.2, (-0.4, 0.6, -1.0)),
        "body": {
            "type": "sphere",
            "center": [0.0, 0.0, 0.0],
            "radius": 0.42,
            "bsdf": _diffuse(_checker((0.75, 0.12, 0.1), (0.8, 0.72, 0.45), 6.0)),
        },
        "head": {
            "type": "sphere",
            "center": [0.05, -0.1, 0.58],
            "radius": 0.18,
            "bsdf": _diffuse(_bitmap(_stripes((0.1, 0.5, 0.15), (0.75, 0.8, 0.7), 4))),
        },
        "moon": {
            "type": "sphere",
            "center": [0.52, 0.38, -0.22],
            "radius": 0.2,
            "bsdf": _diffuse(_bitmap(_colour_field(rng, 5))),
        },
        "box": {
            "type": "cube",
            "to_world": T().translate([-0.5, 0.25, -0.18]).rotate([0, 0, 1], 30).scale(0.22),
            "bsdf": _diffuse(_bitmap(_stripes((0.1, 0.2, 0.7), (0.8, 0.8, 0.8), 3))),
        },
        "pillar": {
            "type": "cube",
            "to_world": T().translate([0.1, 0.55, 0.0]).rotate([1, 1, 0], 20).scale([0.1, 0.1, 0.4]),
            "bsdf": _diffuse(_checker((0.8, 0.6, 0.1), (0.2, 0.15, 0.1), 3.0)),
        },
    }


def _plastic(colour: dict[str, Any], alpha: float = 0.07) -> dict[str, Any]:
    """Glossy plastic: a diffuse base under a GGX coat of roughness ``alpha`` (view-dependent
    highlights where the sun reflects)."""
    return {"type": "roughplastic", "distribution": "ggx", "alpha": alpha, "diffuse_reflectance": colour}


def _studs(prefix: str, x0: float, y0: float, z: float, nx: int, ny: int, pitch: float,
           bsdf: dict[str, Any]) -> dict[str, Any]:
    """nx x ny capped cylinders (radius 0.3 pitch, height 0.17 pitch) standing on the plane z, the first
    centred at (x0, y0): a brick's studs."""
    mi = mitsuba_scalar()
    T = mi.ScalarTransform4f
    r, h = 0.3 * pitch, 0.17 * pitch
    out: dict[str, Any] = {}
    for i in range(nx):
        for j in range(ny):
            cx, cy = x0 + i * pitch, y0 + j * pitch
            out[f"{prefix}_{i}_{j}"] = {"type": "cylinder", "p0": [cx, cy, z], "p1": [cx, cy, z + h], "radius": r,
                                        "bsdf": bsdf}  # fmt: skip
            out[f"{prefix}_{i}_{j}_cap"] = {"type": "disk", "to_world": T().translate([cx, cy, z + h]).scale(r),
                                            "bsdf": bsdf}  # fmt: skip
    return out


def _brick(name: str, centre: tuple[float, float, float], nx: int, ny: int, pitch: float, height: float,
           plastic: PrintedPlastic, rng: np.random.Generator) -> dict[str, Any]:
    """A brick of nx x ny studs (a box of nx pitch x ny pitch x height, centred at ``centre``): its
    printed body (:func:`_printed_mesh`) and its plain studs."""
    cx, cy, cz = centre
    half = (nx * pitch / 2, ny * pitch / 2, height / 2)
    body = _printed_mesh(name, _box_quads(centre, half), plastic.faces, rng)
    x0, y0 = cx - (nx - 1) * pitch / 2, cy - (ny - 1) * pitch / 2
    return {name: body, **_studs(name, x0, y0, cz + height / 2, nx, ny, pitch, plastic.studs)}


def _rod(p0: tuple[float, float, float], p1: tuple[float, float, float], radius: float,
         bsdf: dict[str, Any]) -> dict[str, Any]:
    return {"type": "cylinder", "p0": list(p0), "p1": list(p1), "radius": radius, "bsdf": bsdf}


BRICKS_SCALE = 1.1
PRINT_TEXELS = 2048  # a print tile's side
# model units one print tile spans: a texel is about a quarter of a pixel of the object's 800 px views
# (their pixel is about 0.0023 model units at the origin), so cells of 4 texels are about one pixel
PRINT_TILE = 1.2

Vec3 = tuple[float, float, float]
Quad = tuple[Vec3, Vec3, Vec3]  # a flat quad: a corner and its two edges u, v (normal along u x v)


def _paste_rectangle(out: np.ndarray, w: int, h: int, rng: np.random.Generator, opaque: bool = False) -> None:
    """Places a w x h rectangle of one random colour at a uniform random place into ``out``
    [size,size,3] (in place): the "dead leaf" of :func:`_print` and :func:`_noise`. Translucent
    (default): blended half to fully opaque, each channel uniform in [0,1]. ``opaque``: it covers what is
    under it, each channel drawn from Beta(0.5, 0.5), which favours dark and bright over grey, so
    neighbouring leaves differ as much as a real print's inks and decals do."""
    size = out.shape[0]
    x, y = rng.integers(0, size - w), rng.integers(0, size - h)
    if opaque:
        out[y : y + h, x : x + w] = rng.beta(0.5, 0.5, size=3)
        return
    a = rng.uniform(0.5, 1.0)
    out[y : y + h, x : x + w] = (1 - a) * out[y : y + h, x : x + w] + a * rng.uniform(0.0, 1.0, size=3)


def _print(rng: np.random.Generator, size: int = PRINT_TEXELS, octaves: int = 8, falloff: float = 0.85,
           coverage: float = 3.0, smallest: int = 4) -> np.ndarray:
    """A print with detail at every scale down to an 800 px view's pixel, in colour [size,size,3] in
    [0.05,0.8]: value noise (:func:`_value_noise`) from 4 cells across down to cells of 4 texels (about a
    pixel on the bricks: :data:`PRINT_TILE`), under "dead leaves": opaque rectangles of one random
    colour each (:func:`_paste_rectangle`), their sides drawn with density ~ side^-3 from ``smallest``
    texels to a tenth of the tile (the same share of the area at every scale, as in natural images), as
    many as cover the tile ``coverage`` times over on average. Like :func:`_noise`, but with as much
    contrast per pixel at 800 px as at 400 px, as a detailed model's prints, decals and wear have."""
    out = _value_noise(rng, size, octaves, falloff)
    s0, s1 = smallest ** -2.0, (size / 10) ** -2.0
    mean_area = (2.0 * (1 / smallest - 10 / size) / (s0 - s1)) ** 2  # E[w] E[h] under the side^-3 density
    for _ in range(round(coverage * size * size / mean_area)):
        w, h = (s0 - rng.uniform(0.0, 1.0, size=2) * (s0 - s1)) ** -0.5
        _paste_rectangle(out, int(w), int(h), rng, opaque=True)
    return np.clip(0.05 + 0.75 * out, 0.05, 0.8)


@dataclass(frozen=True)
class PrintedPlastic:
    """A brick colour: the loaded BSDF of its printed faces (one instance, so every face shares one
    texture) and the plain plastic of its studs, in the print's mean colour (a whole print tile squeezed
    onto a stud's few pixels would only alias)."""

    faces: Any
    studs: dict[str, Any]


PRINT_SHARE = 0.8  # of a printed face's colour, the rest the brick's own: the contrast of the prints


def _printed_plastic(rng: np.random.Generator, base: Vec3, alpha: float = 0.07) -> PrintedPlastic:
    """Glossy plastic (:func:`_plastic`) of colour ``base`` printed over with :func:`_print`
    (:data:`PRINT_SHARE` of the colour)."""
    mi = mitsuba_scalar()
    colour = (1 - PRINT_SHARE) * np.asarray(base) + PRINT_SHARE * _print(rng)
    r, g, b = (float(c) for c in colour.mean((0, 1)))
    return PrintedPlastic(mi.load_dict(_plastic(_bitmap(colour), alpha)), _plastic(_rgb((r, g, b)), alpha))


def _box_quads(centre: Vec3, half: Vec3) -> list[Quad]:
    """The six outward-facing faces of an axis-aligned box of half-extents ``half``."""
    (cx, cy, cz), (hx, hy, hz) = centre, half
    ex, ey, ez = (2 * hx, 0.0, 0.0), (0.0, 2 * hy, 0.0), (0.0, 0.0, 2 * hz)
    low = (cx - hx, cy - hy, cz - hz)
    return [((cx - hx, cy - hy, cz + hz), ex, ey), (low, ey, ex),  # top, bottom
            ((cx + hx, cy - hy, cz - hz), ey, ez), (low, ez, ey),  # +x, -x
            ((cx - hx, cy + hy, cz - hz), ez, ex), (low, ex, ez)]  # +y, -y  # fmt: skip


def _printed_mesh(name: str, quads: list[Quad], bsdf: Any, rng: np.random.Generator) -> Any:
    """A Mitsuba mesh of flat quads whose texture coordinates are model units / :data:`PRINT_TILE`
    (from a random offset per quad; the texture repeats), so a print's texels are the same size on every
    face: Mitsuba's cube and rectangle stretch one whole texture over each face, whatever its size."""
    mi = mitsuba_scalar()
    props = mi.Properties()
    props["bsdf"] = bsdf
    mesh = mi.Mesh(name, 4 * len(quads), 2 * len(quads), props=props, has_vertex_texcoords=True)
    positions, uvs = [], []
    for corner, u, v in quads:
        c, eu, ev = np.asarray(corner), np.asarray(u), np.asarray(v)
        positions += [c, c + eu, c + eu + ev, c + ev]
        du, dv = np.linalg.norm(eu) / PRINT_TILE, np.linalg.norm(ev) / PRINT_TILE
        o = rng.uniform(0.0, 1.0, size=2)
        uvs += [o, o + (du, 0.0), o + (du, dv), o + (0.0, dv)]
    first = 4 * np.arange(len(quads))[:, None]
    faces = np.concatenate([first + (0, 1, 2), first + (0, 2, 3)], axis=1)
    params = mi.traverse(mesh)
    params["vertex_positions"] = np.asarray(positions, dtype=np.float32).ravel()
    params["vertex_texcoords"] = np.asarray(uvs, dtype=np.float32).ravel()
    params["faces"] = faces.astype(np.uint32).ravel()
    params.update()
    return mesh


def bricks_scene(rng: np.random.Generator) -> dict[str, Any]:
    """An object made to be as hard as NeRF-synthetic's lego (within radius ~0.9, no ground): a base
    plate of 24 x 18 studs and stacked bricks with studs (about 570: fine repeated detail), their faces
    printed (:func:`_print`: detail at every scale down to the pixel of the object's 800 px views, so the
    views are as detailed per pixel at 800 px as at 400 px), glossy plastic and a brushed-metal mast and
    dish (specular highlights that move with the view), thin parts (two truss towers of 152 rods, two
    grilles of 30 bars, a ladder, a railing and a row of tread links: 2 to 7 pixels wide in the object's
    800 px views) and a printed panel."""
    mi = mitsuba_scalar()
    T = mi.ScalarTransform4f
    p = 0.05  # stud pitch
    green = _printed_plastic(rng, (0.12, 0.45, 0.15))
    yellow = _printed_plastic(rng, (0.8, 0.62, 0.06))
    red = _printed_plastic(rng, (0.7, 0.08, 0.06))
    grey = _printed_plastic(rng, (0.45, 0.45, 0.48), alpha=0.3)
    metal = {"type": "roughconductor", "material": "Al", "distribution": "ggx", "alpha": 0.18}
    dark = _diffuse(_rgb((0.06, 0.06, 0.07)))
    scene: dict[str, Any] = {"type": "scene", **_lights(0.5, 1.1, (-0.4, 0.6, -1.0))}
    # base plate
    scene.update(_brick("plate", (0.0, 0.0, -0.42), 24, 18, p, 0.04, grey, rng))
    # a stepped tower of bricks
    scene.update(_brick("b0", (-0.2, 0.05, -0.34), 8, 4, p, 0.12, yellow, rng))
    scene.update(_brick("b1", (-0.25, 0.05, -0.22), 4, 4, p, 0.12, red, rng))
    scene.update(_brick("b2", (0.3, -0.2, -0.34), 4, 8, p, 0.12, red, rng))
    scene.update(_brick("b3", (0.3, -0.2, -0.22), 4, 4, p, 0.12, yellow, rng))
    scene.update(_brick("b4", (0.3, -0.2, -0.10), 4, 4, p, 0.12, green, rng))
    scene.update(_brick("b5", (0.05, 0.3, -0.36), 12, 2, p, 0.08, green, rng))
    # a printed panel, seen face-on from one side
    panel = mi.load_dict({"type": "twosided", "bsdf": _diffuse(_bitmap(_print(rng)))})
    scene["panel"] = _printed_mesh("panel", [((-0.39, -0.061, -0.32), (0.38, 0.0, 0.0), (0.0, 0.0, 0.2))], panel, rng)
    # thin parts: a metal mast with a cross-bar, a ladder, a railing along the plate's edge
    scene["mast"] = _rod((0.3, -0.2, -0.02), (0.3, -0.2, 0.46), 0.012, metal)
    scene["bar"] = _rod((0.12, -0.2, 0.38), (0.48, -0.2, 0.38), 0.007, metal)
    scene["dish"] = {"type": "disk", "to_world": T().translate([0.3, -0.2, 0.46]).rotate([1, 0, 0], 35).scale(0.09),
                     "bsdf": {"type": "twosided", "bsdf": metal}}  # fmt: skip
    for k, y in enumerate((-0.09, 0.05)):
        scene[f"rail{k}"] = _rod((-0.42, y, -0.16), (-0.42, y, 0.32), 0.008, dark)
    for k in range(9):
        z = -0.12 + 0.05 * k
        scene[f"rung{k}"] = _rod((-0.42, -0.09, z), (-0.42, 0.05, z), 0.005, dark)
    for k in range(7):
        x = -0.55 + 0.18 * k
        scene[f"post{k}"] = _rod((x, 0.43, -0.40), (x, 0.43, -0.25), 0.006, dark)
    scene["railing"] = _rod((-0.55, 0.43, -0.25), (0.53, 0.43, -0.25), 0.006, dark)
    # two truss towers: four legs, a square of rods and one diagonal per face at each level
    for t, (cx, cy, w, levels, dz, r) in enumerate(((0.42, 0.2, 0.1, 8, 0.07, 0.0035),
                                                    (-0.5, -0.25, 0.07, 10, 0.045, 0.0025))):  # fmt: skip
        h0 = -0.4
        corners = [(cx + sx * w / 2, cy + sy * w / 2) for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        for k, (x, y) in enumerate(corners):
            scene[f"t{t}_leg{k}"] = _rod((x, y, h0), (x, y, h0 + levels * dz), 1.4 * r, metal)
        for level in range(levels):
            z0, z1 = h0 + level * dz, h0 + (level + 1) * dz
            for k in range(4):
                (xa, ya), (xb, yb) = corners[k], corners[(k + 1) % 4]
                scene[f"t{t}_ring{level}_{k}"] = _rod((xa, ya, z1), (xb, yb, z1), r, dark)
                scene[f"t{t}_brace{level}_{k}"] = _rod((xa, ya, z0), (xb, yb, z1), r, dark)
    # two grilles of fine bars (about 2 px wide at 800 px) in front of the bricks
    for g, (x0, y, z0, z1) in enumerate(((-0.45, 0.17, -0.40, -0.16), (0.12, -0.42, -0.40, -0.22))):
        for k in range(30):
            x = x0 + 0.012 * k
            scene[f"grille{g}_{k}"] = _rod((x, y, z0), (x, y, z1), 0.0022, dark)
        scene[f"grille{g}_top"] = _rod((x0, y, z1), (x0 + 0.012 * 29, y, z1), 0.003, dark)
    # a row of tread links along the front edge, with gaps between them
    for k in range(24):
        x = -0.55 + 0.048 * k
        scene[f"link{k}"] = {"type": "cube", "bsdf": dark,
                             "to_world": T().translate([x, -0.36, -0.385]).scale([0.02, 0.04, 0.012])}  # fmt: skip
    # the whole model scaled up to fill the object's frame as lego does (radius ~0.9)
    shapes = {k: v for k, v in scene.items() if k not in ("type", "env", "sun")}
    return {
        "type": "scene", "env": scene["env"], "sun": scene["sun"],
        "model": {"type": "shapegroup", **shapes},
        "placed": {"type": "instance", "to_world": T().scale(BRICKS_SCALE),
                   "shapegroup": {"type": "ref", "id": "model"}},
    }  # fmt: skip


def room_scene(rng: np.random.Generator) -> dict[str, Any]:
    """A 8 x 8 room (walls 2.5 high, no ceiling) with a checkered floor and objects inside."""
    mi = mitsuba_scalar()

    T = mi.ScalarTransform4f
    walls = {}
    wall_textures = [
        _stripes((0.7, 0.3, 0.2), (0.8, 0.75, 0.6), 8),
        _stripes((0.2, 0.4, 0.7), (0.75, 0.8, 0.8), 5),
        _colour_field(rng, 6, 0.25, 0.8),
        _stripes((0.3, 0.6, 0.3), (0.7, 0.7, 0.5), 12),
    ]
    for k, (angle, tex) in enumerate(zip((0, 90, 180, 270), wall_textures)):
        # a rectangle spans [-1,1]^2 in its xy plane facing +z: stand it up facing the room centre
        walls[f"wall{k}"] = {
            "type": "rectangle",
            "to_world": T()
            .rotate([0, 0, 1], angle)
            .translate([4.0, 0.0, 1.25])
            .rotate([0, 1, 0], -90)
            .scale([1.25, 4.0, 1.0]),
            "bsdf": _diffuse(_bitmap(tex)),
        }
    return {
        "type": "scene",
        **_lights(0.5, 1.3, (-0.5, -0.3, -1.0)),
        "floor": {
            "type": "rectangle",
            "to_world": T().scale([4.0, 4.0, 1.0]),
            "bsdf": _diffuse(_checker((0.7, 0.6, 0.45), (0.35, 0.25, 0.18), 8.0)),
        },
        **walls,
        "ball": {
            "type": "sphere",
            "center": [0.3, -0.2, 0.5],
            "radius": 0.5,
            "bsdf": _diffuse(_checker((0.75, 0.15, 0.1), (0.8, 0.75, 0.5), 6.0)),
        },
        "ball2": {
            "type": "sphere",
            "center": [-1.2, 1.3, 0.35],
            "radius": 0.35,
            "bsdf": _diffuse(_bitmap(_colour_field(rng, 5))),
        },
        "crate": {
            "type": "cube",
            "to_world": T().translate([-1.0, -1.0, 0.4]).rotate([0, 0, 1], 25).scale(0.4),
            "bsdf": _diffuse(_bitmap(_stripes((0.1, 0.2, 0.6), (0.8, 0.8, 0.75), 3))),
        },
        "column": {
            "type": "cube",
            "to_world": T().translate([1.4, 1.2, 0.8]).scale([0.2, 0.2, 0.8]),
            "bsdf": _diffuse(_checker((0.2, 0.6, 0.25), (0.8, 0.8, 0.7), 2.0)),
        },
    }


def _value_noise(rng: np.random.Generator, size: int, octaves: int, falloff: float) -> np.ndarray:
    """Multi-scale value noise in colour [size,size,3], stretched so that its 1st..99th percentiles span
    [0,1]: grids of uniform random colours from 4 to 4 x 2^(octaves-1) cells, bilinearly upsampled,
    the k-th weighted ``falloff``^k (1: as much contrast at every scale; below 1: smoother)."""
    out = np.zeros((size, size, 3))
    total = 0.0
    for k in range(octaves):
        cells = 4 * 2**k
        grid = torch.from_numpy(rng.uniform(0.0, 1.0, size=(1, 3, cells, cells)))
        up = torch.nn.functional.interpolate(grid, size=(size, size), mode="bilinear", align_corners=False)
        w = falloff**k
        out += w * up[0].permute(1, 2, 0).numpy()
        total += w
    out /= total
    lo, hi = np.percentile(out, 1), np.percentile(out, 99)
    return (out - lo) / max(hi - lo, 1e-6)


def _noise(rng: np.random.Generator, size: int = 512, octaves: int = 6, patches: int = 160) -> np.ndarray:
    """A cluttered texture in colour [size,size,3] in [0.05,0.8]: multi-scale value noise (grids of
    random colours from 4 to 4 x 2^(octaves-1) cells, bilinearly upsampled, weights x0.7 per octave)
    under ``patches`` random rectangles of random colour, 1-12 % of the side, half opaque to fully
    opaque. Distinct at every scale and full of corners, like the prints, labels, wood and fabric of a
    real room (what a feature matcher needs, and what the room's smooth and periodic textures lack)."""
    out = _value_noise(rng, size, octaves, 0.7)
    for _ in range(patches):
        w, h = (rng.uniform(0.01, 0.12, size=2) * size).astype(int) + 1
        _paste_rectangle(out, w, h, rng)
    return np.clip(0.05 + 0.75 * out, 0.05, 0.8)


def capture_scene(rng: np.random.Generator) -> dict[str, Any]:
    """The room with the clutter of a lived-in one: a rug, a picture on each wall and three boxes, all
    with multi-scale noise textures (:func:`_noise`), over the room's smooth and periodic textures (which
    alone give a feature matcher few distinct points)."""
    mi = mitsuba_scalar()

    T = mi.ScalarTransform4f
    scene = room_scene(rng)
    scene["rug"] = {
        "type": "rectangle",
        "to_world": T().translate([0.2, 0.6, 0.005]).rotate([0, 0, 1], 10).scale([1.6, 1.1, 1.0]),
        "bsdf": _diffuse(_bitmap(_noise(rng))),
    }
    for k, angle in enumerate((0, 90, 180, 270)):
        scene[f"picture{k}"] = {
            "type": "rectangle",
            "to_world": T().rotate([0, 0, 1], angle).translate([3.99, 0.6 * (k - 1.5), 1.4])
            .rotate([0, 1, 0], -90).scale([0.55, 0.8, 1.0]),
            "bsdf": _diffuse(_bitmap(_noise(rng))),
        }  # fmt: skip
    for k, (x, y, s) in enumerate(((2.2, -1.8, 0.3), (-2.3, 0.4, 0.25), (0.9, 2.4, 0.35))):
        scene[f"box{k}"] = {
            "type": "cube",
            "to_world": T().translate([x, y, s]).rotate([0, 0, 1], 30.0 * k + 15.0).scale(s),
            "bsdf": _diffuse(_bitmap(_noise(rng, 256, 5, 60))),
        }
    return scene


def object_cameras(
    n: int, width: int, height: int, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor, tuple[float, float, float]]:
    """n cameras at distance 2.8 on a golden-angle spiral (elevations -15..65 degrees) looking at the
    origin, 40 degree horizontal field of view: viewmats [n,4,4] float64, K [3,3] float64, the target."""
    offset = rng.uniform(0, 360)
    views = []
    for i in range(n):
        el = math.radians(-15.0 + 80.0 * (i + 0.5) / n)
        az = math.radians(offset + GOLDEN_ANGLE_DEG * i)
        eye = (2.8 * math.cos(el) * math.cos(az), 2.8 * math.cos(el) * math.sin(az), 2.8 * math.sin(el))
        views.append(look_at(eye, (0.0, 0.0, 0.0), dtype=torch.float64))
    return torch.stack(views), intrinsics_from_fov(width, height, 40.0, dtype=torch.float64), (0.0, 0.0, 0.0)


def room_cameras(
    n: int, width: int, height: int, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor, tuple[float, float, float]]:
    """n cameras inside the room on a ring (radius 2.6-3.2, height 0.9-1.9) looking at (0,0,0.5),
    60 degree horizontal field of view."""
    offset = rng.uniform(0, 360)
    target = (0.0, 0.0, 0.5)
    views = []
    for i in range(n):
        az = math.radians(offset + GOLDEN_ANGLE_DEG * i)
        r = 2.6 + 0.6 * ((i * 0.618) % 1.0)
        z = 0.9 + 1.0 * (i + 0.5) / n
        views.append(look_at((r * math.cos(az), r * math.sin(az), z), target, dtype=torch.float64))
    return torch.stack(views), intrinsics_from_fov(width, height, 60.0, dtype=torch.float64), target


@dataclass(frozen=True)
class SyntheticScene:
    """A built-in scene: its Mitsuba description, its cameras and its default sizes. ``version``: raise
    it whenever the description or the cameras change, so cached renders of the old scene are not reused
    (the cache key hashes the parameters, not the description)."""

    build: Callable[[np.random.Generator], dict[str, Any]]
    cameras: Callable[
        [int, int, int, np.random.Generator], tuple[torch.Tensor, torch.Tensor, tuple[float, float, float]]
    ]
    width: int
    height: int
    n_train: int
    n_test: int
    spp: int
    version: int = 1


SYNTHETIC_SCENES = {
    "object": SyntheticScene(object_scene, object_cameras, width=160, height=160, n_train=24, n_test=8, spp=64),
    # lego-hard: fine repeated detail, thin parts, glossy highlights (the object's NeRF-synthetic cameras)
    "bricks": SyntheticScene(bricks_scene, object_cameras, width=160, height=160, n_train=24, n_test=8, spp=64,
                             version=3),
    "room": SyntheticScene(room_scene, room_cameras, width=160, height=120, n_train=20, n_test=4, spp=64),
    # the room, cluttered, as a distorted JPEG photo capture with COLMAP and nerfstudio files (simulated_capture.py)
    "capture": SyntheticScene(capture_scene, room_cameras, width=160, height=120, n_train=20, n_test=4, spp=64),
}
