"""The AVX2 rasterizer's alpha on two chunks at once (Alpha16, csrc/cpu/splat_simd.h) against Alpha8,
and its alphas row by row (Alpha16::rows, where rows_apply holds) against both and float64.

The forward computes its alphas two chunks a 512-bit vector where the CPU has AVX-512; the backward
takes them from Alpha8, 8 lanes at a time, and recovers every transmittance by division, so the two
must agree on every alpha bit for bit. A small driver (tests/cpp/alpha_lanes_driver.cpp) is built with
the extension's own compiler flags (its build record) and fed fresh random Gaussians and pixels, edge
cases included; both alphas are also checked against a float64 reference. Where a Gaussian's band of
rows on a 16 x 16 tile allows it (rows_apply), forward and backward both take its alphas row by row:
a second driver (tests/cpp/alpha_rows_driver.cpp) checks that form's two variants agree bit for bit,
that each chain's first row is Alpha8's, and every row's error against float64.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
import torch
from cpp_driver import MISSING, ROOT, build_driver
from splat_scenes import random_conics

DRIVER = ROOT / "tests" / "cpp" / "alpha_lanes_driver.cpp"
ROWS_DRIVER = ROOT / "tests" / "cpp" / "alpha_rows_driver.cpp"
LOG2E = 1.4426950408889634

pytestmark = pytest.mark.skipif(MISSING, reason="no C++ compiler or no build")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(DRIVER, tmp_path_factory.mktemp("alpha"))


def random_cases(n: int, g: torch.Generator) -> torch.Tensor:
    """[n, 38] float32: mx, my, A, B, C, L (a conic's terms in base 2) and 16 px, 16 py."""
    mean = torch.rand(n, 2, generator=g) * 16
    # conics of Gaussians 0.3 to 30 pixels wide, any orientation
    ca, cb, cc = random_conics(n, (-1.2, 3.4), g).unbind(-1)
    opac = torch.rand(n, generator=g).clamp_min(1e-3)
    terms = torch.stack([-0.5 * LOG2E * ca, -LOG2E * cb, -0.5 * LOG2E * cc, torch.log2(opac)], -1)
    px = torch.arange(16.0).expand(n, 16) % 8 + 0.5 + torch.randint(0, 2, (n, 1), generator=g) * 8
    py = torch.randint(0, 16, (n, 2), generator=g).float().repeat_interleave(8, dim=1) + 0.5
    x = torch.cat([mean, terms, px, py], -1)
    # edge cases: opacity 0 (L = -inf), opacity above 1 (t > 0), a NaN mean, far pixels (t below -126)
    x[0, 5] = -float("inf")
    x[1, 5] = 1.5
    x[2, 0] = float("nan")
    x[3, 0] = 1e4
    return x


def run(exe: Path, cases: torch.Tensor) -> torch.Tensor | None:
    """The driver's [n, 5, 16] as int32 bit patterns: alphas of Alpha8, Alpha16 and Alpha16 without
    raw, then raw of Alpha8 and Alpha16; None without Alpha16."""
    text = f"{cases.shape[0]}\n" + "\n".join(" ".join(f"{v:.9g}" for v in row) for row in cases.tolist())
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=60, check=True).stdout
    if out.strip() == "none":
        return None
    bits = [[int(h, 16) for h in line.split()] for line in out.splitlines()]
    return torch.tensor(bits, dtype=torch.int64).to(torch.int32).reshape(-1, 5, 16)


def test_alpha16_equals_alpha8_bit_for_bit(driver: Path, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    cases = random_cases(2000, g)
    bits = run(driver, cases)
    if bits is None:
        pytest.skip("this build has no AVX-512 alpha pass (Alpha16)")
    assert torch.equal(bits[:, 0], bits[:, 1]), "Alpha16 differs from Alpha8"
    assert torch.equal(bits[:, 0], bits[:, 2]), "Alpha16 without raw differs from Alpha8"
    assert torch.equal(bits[:, 3], bits[:, 4]), "Alpha16's raw differs from Alpha8's"
    # and both are the alpha: min(0.99, 2^t) where sigma >= 0, against float64 (fresh inputs, finite)
    alpha = bits[:, 0].view(torch.float32).double()
    x = cases.double()
    dx, dy = x[:, 0:1] - x[:, 6:22], x[:, 1:2] - x[:, 22:38]
    A, B, C, L = (x[:, k : k + 1] for k in range(2, 6))
    t = A * dx * dx + B * dx * dy + C * dy * dy + L
    ref = torch.where(t <= L, torch.exp2(t.clamp(max=0.0)).clamp(max=0.99), torch.zeros_like(t))
    ok = ref.isfinite() & (ref >= 1 / 255) & ((ref - 1 / 255).abs() > 1e-4)
    assert ok.sum() > 1000
    # float32 error model: a few roundings of each term of t (which cancel for wide Gaussians far from
    # the pixel), times ln 2, plus the polynomial's 2^f error
    size = (A * dx * dx).abs() + (B * dx * dy).abs() + (C * dy * dy).abs() + L.abs()
    bound = 1e-6 + 0.6931 * 8 * torch.finfo(torch.float32).eps * size
    ratio = (((alpha - ref).abs() / ref) / bound)[ok]
    assert ratio.max() <= 1.0, float(ratio.max())
    assert (alpha[2] == 0).all(), "a NaN mean blends nothing"
    assert (alpha[0] < 1 / 255).all(), "opacity 0 blends nothing (its alpha is under the cut)"
    assert (alpha[3] < 1 / 255).all(), "far pixels blend nothing"


@pytest.fixture(scope="module")
def rows_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(ROWS_DRIVER, tmp_path_factory.mktemp("alpha_rows"))


def tile_cases(n: int, W: int, H: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiles [n, 2] of 16 pixels and Gaussians [n, 6] (mean, conic, opacity; float32 values) near them:
    means up to a tile outside, footprints 2 to 60 pixels, any orientation, opacities 0.02 to 1."""
    tiles = torch.stack([torch.randint(0, -(-W // 16), (n,), generator=g),
                         torch.randint(0, -(-H // 16), (n,), generator=g)], -1)  # fmt: skip
    mean = (tiles + torch.rand(n, 2, generator=g) * 3 - 1) * 16
    conic = random_conics(n, (0.7, 4.1), g)
    opac = 0.02 + 0.98 * torch.rand(n, generator=g)
    return tiles, torch.cat([mean, conic, opac[:, None]], -1).float()


def run_rows(exe: Path, W: int, H: int, tiles: torch.Tensor, x: torch.Tensor) -> list | None:
    """Per case None (rows_apply does not hold) or (r0, r1, [rows, 5, 16] int32 bit patterns: alphas of
    rows<true>, rows<false>, raw of rows<true>, alphas and raw of Alpha8); None without the recurrence."""
    lines = [f"{tx} {ty} " + " ".join(f"{v:.9g}" for v in xr) for (tx, ty), xr in zip(tiles.tolist(), x.tolist())]
    text = f"{x.shape[0]} {W} {H}\n" + "\n".join(lines)
    out = subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=60, check=True).stdout
    if out.strip() == "none":
        return None
    res = []
    for line in out.splitlines():
        if line == "-":
            res.append(None)
            continue
        r0, r1, *hexes = line.split()
        bits = torch.tensor([int(h, 16) for h in hexes], dtype=torch.int64).to(torch.int32)
        res.append((int(r0), int(r1), bits.reshape(-1, 5, 16)))
    return res


def test_alphas_row_by_row(rows_driver: Path, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    W, H = 100, 72  # edge tiles on both sides: never row by row
    tiles, x = tile_cases(3000, W, H, g)
    res = run_rows(rows_driver, W, H, tiles, x)
    if res is None:
        pytest.skip("this build has no row recurrence (Alpha16)")
    used = [k for k, r in enumerate(res) if r is not None]
    assert len(used) > 300, len(used)
    worst = 0.0
    for k in used:
        r0, r1, bits = res[k]
        tx, ty = tiles[k].tolist()
        assert (tx + 1) * 16 <= W and (ty + 1) * 16 <= H, "an edge tile went row by row"
        assert r1 - r0 + 1 >= 8, "a band under kMinRecurrenceRows rows went row by row"
        assert torch.equal(bits[:, 0], bits[:, 1]), "the forward's rows (no raw) differ from the backward's"
        # the chain's first row is Alpha8's, alpha and raw
        assert torch.equal(bits[0, 0], bits[0, 3]) and torch.equal(bits[0, 2], bits[0, 4])
        # every row against float64: Alpha8's error model at the chain's first row, plus a few roundings
        # per row of the chain (two multiplies, and the ratio's own error, growing with the row)
        mx, my, ca, cb, cc, op = x[k].double().tolist()
        px = torch.arange(16, dtype=torch.float64) + tx * 16 + 0.5
        py = torch.arange(r0, r1 + 1, dtype=torch.float64)[:, None] + ty * 16 + 0.5
        dx, dy = mx - px, my - py
        sigma = 0.5 * (ca * dx * dx + cc * dy * dy) + cb * dx * dy
        assert (sigma.min() >= 0) and (torch.log2(op * torch.exp(-sigma)).min() >= -61), "rows_apply's bound"
        ref = (op * torch.exp(-sigma)).clamp(max=0.99)
        raw = bits[:, 2].view(torch.float32).double()
        alpha = bits[:, 0].view(torch.float32).double()
        assert torch.equal(alpha, raw.clamp(max=0.99).float().double())
        size = (0.5 * (ca * dx * dx + cc * dy * dy)).abs() + (cb * dx * dy).abs() + abs(math.log(op))
        step = torch.arange(r1 - r0 + 1, dtype=torch.float64)[:, None]  # rows from the chain's first
        eps = torch.finfo(torch.float32).eps
        bound = 1e-6 + 8 * eps * size + eps * (4 * step + step * (step + 1))
        ok = ref >= 1 / 255
        ratio = ((alpha - ref).abs() / ref / bound)[ok]
        if ratio.numel():
            worst = max(worst, float(ratio.max()))
    assert worst <= 1.0, worst
