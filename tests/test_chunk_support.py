"""Which chunks of a tile a Gaussian can reach, as the CPU rasterizer decides it (TileChunks in
csrc/cpu/splat_tiles.h): ``support_bits`` (mask registers on AVX-512) against ``mark_range`` +
``marked_bits``, the float flags it stands for elsewhere, and both against every pixel's alpha in float64.

A chunk left out where a pixel's alpha reaches 1/255 would change the image; a chunk let in needlessly
costs time only. So each form must keep every chunk where the float64 alpha reaches the cut; the two may
differ only on chunks far under it (their float tests round differently). ``covers_tile`` (every chunk,
with no test) must hold only where the support holds every pixel of the tile. A small driver
(tests/cpp/chunk_support_driver.cpp), built with the extension's own flags, is fed fresh random
Gaussians around tiles inside the image and on its right and bottom edges.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import requires_ext
from cpp_driver import MISSING, ROOT, build_driver
from splat_scenes import random_conics

DRIVER = ROOT / "tests" / "cpp" / "chunk_support_driver.cpp"
ALPHA_MIN = 1.0 / 255.0  # kAlphaMin (csrc/include/gsw/blend.h)
W, H = 150, 140  # the last tile column and row are partial for tile sizes 16 and 13

pytestmark = pytest.mark.skipif(MISSING, reason="no C++ compiler or no build")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(DRIVER, tmp_path_factory.mktemp("chunk_support"))


def random_cases(n: int, ts: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiles [n, 2] (tx, ty) and Gaussians [n, 6] (mean, conic, opacity; float32 values) near them."""
    tw, th = math.ceil(W / ts), math.ceil(H / ts)
    tiles = torch.stack([torch.randint(0, tw, (n,), generator=g), torch.randint(0, th, (n,), generator=g)], -1)
    # means up to 1.5 tiles outside the tile; footprints 0.3 to 60 pixels, any orientation
    mean = (tiles + torch.rand(n, 2, generator=g) * 4 - 1.5) * ts
    conic = random_conics(n, (-1.2, 4.1), g)
    opac = torch.where(torch.rand(n, generator=g) < 0.1, torch.ones(n), 0.02 + 0.98 * torch.rand(n, generator=g))
    return tiles, torch.cat([mean, conic, opac[:, None]], -1).float()


def run(exe: Path, ts: int, tiles: torch.Tensor, x: torch.Tensor) -> tuple[int, list[list[int] | None]]:
    """The driver's chunk lanes and, per case, None (no row reached) or [qlo, qhi, support_bits,
    marked_bits, covers_tile]."""
    rows = [f"{tx} {ty} " + " ".join(f"{v:.9g}" for v in xr) for (tx, ty), xr in zip(tiles.tolist(), x.tolist())]
    text = f"{x.shape[0]} {ts} {W} {H}\n" + "\n".join(rows)
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=60, check=True).stdout
    lines = out.splitlines()
    res = []
    for line in lines[1:]:
        if line == "-":
            res.append(None)
        else:
            qlo, qhi, fast, flags, covers = line.split()
            res.append([int(qlo), int(qhi), int(fast, 16), int(flags, 16), int(covers)])
    return int(lines[0]), res


def chunk_alpha_max(ts: int, lanes: int, tx: int, ty: int, x: list[float]) -> tuple[list[float], list[bool]]:
    """Per chunk of the tile: the largest float64 alpha of the Gaussian x over its pixels inside the
    image (0 for a chunk with none), and whether it has such a pixel."""
    p = torch.arange(math.ceil(ts * ts / lanes) * lanes)
    px = (tx * ts + p % ts).double() + 0.5
    py = (ty * ts + p // ts).double() + 0.5
    inside = (p < ts * ts) & (px < W) & (py < H)
    mx, my, a, b, c, op = x
    dx, dy = mx - px, my - py
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    alpha = torch.where(sigma >= 0, (op * torch.exp(-sigma)).clamp(max=0.99), torch.zeros(()))
    amax = torch.where(inside, alpha, torch.zeros(())).reshape(-1, lanes).amax(-1)
    return amax.tolist(), inside.reshape(-1, lanes).any(-1).tolist()


@requires_ext
def test_the_driver_has_the_lanes_of_the_imported_build(driver: Path) -> None:
    """The driver's chunks are the rasterizer's: 16 lanes in ``make test-raster16``'s run, where the
    AVX-512 form of support_bits is what is checked."""
    import gsworkbench._C as ext

    lanes, _ = run(driver, 16, torch.zeros(0, 2, dtype=torch.long), torch.zeros(0, 6))
    assert lanes == ext.raster_lanes, f"driver {lanes} lanes, {ext.__file__} {ext.raster_lanes}"


@pytest.mark.parametrize("ts", [16, 13])
def test_chunk_reach_keeps_every_chunk_the_alpha_reaches(driver: Path, seed: int, ts: int) -> None:
    g = torch.Generator().manual_seed(seed)
    tiles, x = random_cases(4000, ts, g)
    lanes, res = run(driver, ts, tiles, x)
    counts = dict(reached=0, differ=0, covers=0)
    for (tx, ty), xr, r in zip(tiles.tolist(), x.double().tolist(), res, strict=True):
        amax, has_inside = chunk_alpha_max(ts, lanes, tx, ty, xr)
        need = sum(1 << q for q, a in enumerate(amax) if a >= ALPHA_MIN * (1 + 1e-5))
        if r is None:
            assert need == 0, f"chunk_rows dropped chunks {need:#x} the alpha reaches"
            continue
        qlo, qhi, fast, flags, covers = r
        assert need & ~fast == 0, f"support_bits dropped chunks {need & ~fast:#x}"
        assert need & ~flags == 0, f"marked_bits dropped chunks {need & ~flags:#x}"
        # the two forms differ only on chunks far under the cut
        for q in range(len(amax)):
            if (fast ^ flags) >> q & 1:
                assert amax[q] < ALPHA_MIN * 0.5, f"the forms differ on chunk {q}, alpha {amax[q]}"
        counts["reached"] += fast != 0
        counts["differ"] += fast != flags
        if covers:
            counts["covers"] += 1
            # every pixel of the tile inside the image lies in the support, whose edge is within 15% of
            # the cut (alpha_sigma_max), so every chunk with such a pixel reaches well past half of it
            inside = [a for a, i in zip(amax, has_inside, strict=True) if i]
            assert min(inside) >= ALPHA_MIN * 0.5, f"covers_tile holds, but a chunk reaches only {min(inside)}"
    # the cases reach every outcome; the forms rarely differ
    assert counts["reached"] > 1000 and counts["covers"] > 50
    assert counts["differ"] <= len(res) // 100, counts
