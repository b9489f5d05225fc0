"""The saturation bound four tiles at once (saturate_tiles4, csrc/cpu/tile_saturation_simd.h) against
the one-tile form (saturate_tile<float>) it replaces where the CPU has AVX-512.

The tile intersection cuts each tile's list where these bounds say every pixel has stopped, so the two
forms must agree bit for bit for the lists to be the same on every CPU. A small driver
(tests/cpp/tile_saturation_lanes_driver.cpp), built with the extension's own compiler flags, is fed
fresh random Gaussians around a row of four tiles, edge cases included; the lists themselves are
checked against the torch reference in tests/test_tile_saturation.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from cpp_driver import MISSING, ROOT, build_driver
from splat_scenes import random_conics

DRIVER = ROOT / "tests" / "cpp" / "tile_saturation_lanes_driver.cpp"
SATURATION_T = 0.5e-4  # kSaturationT (csrc/include/gsw/tile_saturation.h)

pytestmark = pytest.mark.skipif(MISSING, reason="no C++ compiler or no build")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(DRIVER, tmp_path_factory.mktemp("saturation"))


def random_cases(n: int, ts: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gaussians [n, 6] (mean, conic, opacity) around four tiles of a row, the tiles [n, 3] (first
    column, row, open tiles as bits) and their quarter bounds [n, 16] (float32)."""
    c = torch.randint(0, 20, (n,), generator=g)
    ty = torch.randint(0, 20, (n,), generator=g)
    mean = torch.stack([c + torch.rand(n, generator=g) * 6 - 1, ty + torch.rand(n, generator=g) * 3 - 1], -1) * ts
    # footprints 1 to 60 pixels wide, any orientation
    conic = random_conics(n, (0.0, 4.1), g)
    opac = 0.2 + 0.8 * torch.rand(n, generator=g)
    x = torch.cat([mean, conic, opac[:, None]], -1)
    # edge cases, which the record zeroes: opacity 0, a NaN mean, a conic not positive definite, one too
    # elongated for the bound; and opacity 1
    x[0, 5] = 0.0
    x[1, 0] = float("nan")
    x[2, 2:5] = torch.tensor([0.05, 0.1, 0.05])
    x[3, 2:5] = torch.tensor([1.0, 0.999, 1.0])
    x[4, 5] = 1.0
    tiles = torch.stack([c, ty, torch.randint(0, 16, (n,), generator=g)], -1)
    # bounds: fresh tiles (1), part-way, and near the threshold where a tile saturates
    kind = torch.randint(0, 3, (n, 1), generator=g)
    tb = torch.where(kind == 0, torch.ones(n, 16), torch.rand(n, 16, generator=g))
    tb = torch.where(kind == 2, SATURATION_T * (1 + 0.3 * torch.rand(n, 16, generator=g)), tb)
    return x, tiles, tb


def run(exe: Path, ts: int, x: torch.Tensor, tiles: torch.Tensor, tb: torch.Tensor) -> torch.Tensor | None:
    """The driver's [n, 2, 17] int64: per form (four tiles, one tile) the saturated tiles and the 16
    bounds' bit patterns; None where the build has no four-tile form."""

    def fmt(vals: list) -> str:
        return " ".join(f"{v:.9g}" for v in vals)

    rows = [f"{fmt(xr)} {' '.join(map(str, tr))} {fmt(br)}"
            for xr, tr, br in zip(x.tolist(), tiles.tolist(), tb.tolist(), strict=True)]  # fmt: skip
    text = f"{x.shape[0]} {ts}\n" + "\n".join(rows)
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=60, check=True).stdout
    if out.strip() == "none":
        return None
    vals = [[int(h, 16) for h in line.split()] for line in out.splitlines()]
    return torch.tensor(vals, dtype=torch.int64).reshape(-1, 2, 17)


@pytest.mark.parametrize("ts", [16, 13])
def test_four_tiles_equal_one_tile_at_a_time(driver: Path, seed: int, ts: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x, tiles, tb = random_cases(3000, ts, g)
    res = run(driver, ts, x, tiles, tb)
    if res is None:
        pytest.skip("this build has no four-tile saturation bound (AVX-512)")
    assert torch.equal(res[:, 0], res[:, 1]), "saturate_tiles4 differs from saturate_tile"
    sat, bits = res[:, 0, 0], res[:, 0, 1:].to(torch.int32)
    after = bits.view(torch.float32)
    todo = tiles[:, 2]
    lane_open = ((todo[:, None] >> (torch.arange(16) // 4)) & 1).bool()
    # closed tiles keep their bounds; open ones only shrink
    assert torch.equal(bits[~lane_open], tb.view(torch.int32)[~lane_open])
    assert (after[lane_open] <= tb[lane_open]).all()
    # a tile is saturated exactly when it is open and its four bounds are below the threshold
    below = (after < SATURATION_T).reshape(-1, 4, 4).all(-1) & lane_open.reshape(-1, 4, 4)[..., 0]
    want = (below.long() << torch.arange(4)).sum(-1)
    assert torch.equal(sat, want)
    # the record zeroes the edge cases (rows 0-3): their bounds stay as they were
    assert torch.equal(bits[:4], tb[:4].view(torch.int32))
    # the cases reach both outcomes. Over fresh seeds about 115 rows (ts 16, spread 9) saturate a tile
    # and about 1200 (spread 28) shrink a bound: the floors sit far below, so only a generator that
    # stopped reaching an outcome trips them
    assert (sat != 0).sum() > 40 and ((after < tb) & lane_open).any(-1).sum() > 900
