"""The AVX2 rasterizer's alpha on two chunks at once (Alpha16, csrc/cpu/splat_simd.h) against Alpha8.

The forward computes its alphas two chunks a 512-bit vector where the CPU has AVX-512; the backward
takes them from Alpha8, 8 lanes at a time, and recovers every transmittance by division, so the two
must agree on every alpha bit for bit. A small driver (tests/cpp/alpha_lanes_driver.cpp) is built with
the extension's own compiler flags (its build record) and fed fresh random Gaussians and pixels, edge
cases included; both alphas are also checked against a float64 reference.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from cpp_driver import MISSING, ROOT, build_driver

DRIVER = ROOT / "tests" / "cpp" / "alpha_lanes_driver.cpp"
LOG2E = 1.4426950408889634

pytestmark = pytest.mark.skipif(MISSING, reason="no C++ compiler or no build")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(DRIVER, tmp_path_factory.mktemp("alpha"))


def random_cases(n: int, g: torch.Generator) -> torch.Tensor:
    """[n, 38] float32: mx, my, A, B, C, L (a conic's terms in base 2) and 16 px, 16 py."""
    mean = torch.rand(n, 2, generator=g) * 16
    # conics of Gaussians 0.3 to 30 pixels wide, any orientation
    sig = torch.exp(torch.empty(n, 2).uniform_(-1.2, 3.4, generator=g))
    th = torch.rand(n, generator=g) * torch.pi
    c, s = th.cos(), th.sin()
    ia, ib = 1 / sig[:, 0] ** 2, 1 / sig[:, 1] ** 2
    ca, cb, cc = c * c * ia + s * s * ib, c * s * (ia - ib), s * s * ia + c * c * ib
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
