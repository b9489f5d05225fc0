"""rasterize's memory estimate holds: the ext estimate bounds the peak resident memory measured in a
fresh process (and is not loose), and GSW_MEMORY_LIMIT refuses what it does not bound, by pixels, by
Gaussians or by tile intersections, with one line naming the sizes."""

from __future__ import annotations

import resource

import pytest
import torch
from conftest import requires_ext

from gsworkbench.bench.peak_rss import rss_measurable
from gsworkbench.core import limits
from gsworkbench.core.limits import MemoryBudgetError, check_fits
from gsworkbench.splat import rasterize
from gsworkbench.splat.memory_estimate import rasterize_bytes
from gsworkbench.studies.rasterize_memory import MemoryCase, measure

LOOSEST = 2.0  # estimate / measured peak: an upper bound, but not one that holds for anything


@requires_ext
@pytest.mark.skipif(not rss_measurable(), reason="needs Linux /proc and glibc")
@pytest.mark.parametrize(
    "case",
    [
        MemoryCase(1_000, 2000, 2000),  # pixel-heavy
        MemoryCase(1_000, 2000, 2000, grad=True),
        MemoryCase(200_000, 128, 128),  # Gaussian-heavy
        MemoryCase(200_000, 128, 128, sh_degree=3, grad=True),
        MemoryCase(1_000, 1000, 1000, backgrounds=True, grad=True),
    ],
    ids=str,
)
def test_the_ext_estimate_bounds_the_measured_peak(case):
    row = measure(case)
    peak, estimate = row["peak_bytes"], row["estimate_bytes"]
    assert peak > 0, row
    assert peak <= estimate <= LOOSEST * peak, row
    if case.num > 100_000:  # the Gaussians' share is needed: the pixels and intersections alone fall short
        pixels_only = rasterize_bytes(
            case.cameras, case.width, case.height, 3, 4, "ext", 16, case.backgrounds, case.grad,
            n_isects=row["n_isects"], threads=row["threads"],
        )  # fmt: skip
        assert pixels_only < peak, row


def _scene(n: int, size: int, scale: float = 0.05) -> dict:
    g = torch.Generator().manual_seed(0)
    vm = torch.eye(4)[None].clone()
    vm[0, 2, 3] = 3.0
    K = torch.tensor([[[size * 0.8, 0, size / 2], [0, size * 0.8, size / 2], [0, 0, 1]]])
    return dict(means=torch.randn(n, 3, generator=g) * 0.3, quats=torch.randn(n, 4, generator=g),
                scales=torch.full((n, 3), scale), opacities=torch.full((n,), 0.8),
                colors=torch.rand(n, 3, generator=g), viewmats=vm, Ks=K)  # fmt: skip


def _render(s: dict, size: int, **kw):
    return rasterize(s["means"], s["quats"], s["scales"], s["opacities"], s["colors"], s["viewmats"], s["Ks"],
                     size, size, backend="ext", **kw)  # fmt: skip


def _refusal(s: dict, size: int) -> str:
    with pytest.raises(MemoryBudgetError) as info:
        _render(s, size)
    message = str(info.value)
    assert "\n" not in message
    return message


@requires_ext
def test_the_limit_refuses_a_render_by_its_pixels_with_one_line_naming_the_sizes(monkeypatch):
    s = _scene(10, 3000)
    need = rasterize_bytes(1, 3000, 3000, 3, 4, "ext", 16, False, False, n_gaussians=10)
    monkeypatch.setenv("GSW_MEMORY_LIMIT", str(need - 1))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    message = _refusal(s, 3000)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 100 * 1024  # KiB: nothing big touched
    assert message.startswith("rasterize (ext) of 1 camera(s) at 3000x3000 px with 3 channel(s), 10 Gaussians")
    assert "tile intersections" not in message  # refused up front, before the intersections
    monkeypatch.setenv("GSW_MEMORY_LIMIT", str(2 * need))
    assert _render(s, 3000)[0].shape == (1, 3000, 3000, 3)


@requires_ext
def test_the_gaussian_count_alone_can_refuse_a_render(monkeypatch):
    n = 600_000  # at 64x64 px the images are 100 KB; the Gaussians' buffers some 80 MB
    s = _scene(n, 64, scale=0.001)
    pixels = rasterize_bytes(1, 64, 64, 3, 4, "ext", 16, False, False)
    need = rasterize_bytes(1, 64, 64, 3, 4, "ext", 16, False, False, n_gaussians=n)
    assert need > pixels + n * 100
    monkeypatch.setenv("GSW_MEMORY_LIMIT", str((pixels + need) // 2))
    assert f"at 64x64 px with 3 channel(s), {n} Gaussians" in _refusal(s, 64)
    # without GSW_MEMORY_LIMIT the check still runs for this many Gaussians (above ALWAYS_FITS), against
    # the free memory
    monkeypatch.delenv("GSW_MEMORY_LIMIT")
    monkeypatch.setattr(limits, "_free_bytes", lambda device: pixels + 2**20)
    assert f"{n} Gaussians" in _refusal(s, 64)


@requires_ext
def test_the_intersections_are_checked_once_known(monkeypatch):
    s = _scene(2_000, 512, scale=0.3)  # large splats: hundreds of tiles each
    with torch.no_grad():
        m = int(_render(s, 512)[2]["n_isects"])
    before = rasterize_bytes(1, 512, 512, 3, 4, "ext", 16, False, False, n_gaussians=2_000)
    after = rasterize_bytes(1, 512, 512, 3, 4, "ext", 16, False, False, n_gaussians=2_000, n_isects=m)
    assert after - before > 2**20, (m, before, after)
    monkeypatch.setenv("GSW_MEMORY_LIMIT", str((before + after) // 2))
    message = _refusal(s, 512)
    assert f"2000 Gaussians and {m} tile intersections" in message


def test_a_check_part_way_through_a_call_counts_what_it_holds(monkeypatch):
    monkeypatch.setattr(limits, "_free_bytes", lambda device: 60 * 2**20)
    monkeypatch.delenv("GSW_MEMORY_LIMIT", raising=False)
    check_fits(100 * 2**20, "call", allocated=50 * 2**20)  # 50 MiB more, 60 MiB free
    with pytest.raises(MemoryBudgetError, match="^call would allocate about 0.1 GiB"):
        check_fits(100 * 2**20, "call", allocated=30 * 2**20)
    monkeypatch.setenv("GSW_MEMORY_LIMIT", str(90 * 2**20))  # the limit caps the whole call
    with pytest.raises(MemoryBudgetError):
        check_fits(100 * 2**20, "call", allocated=50 * 2**20)
