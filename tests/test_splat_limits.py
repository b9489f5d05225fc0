"""rasterize at the limits: calls that cannot fit in memory are refused before allocating, and both
backends agree on Gaussians whose covariances overflow float32 (finite, equal gradients)."""

from __future__ import annotations

import resource

import pytest
import torch
from conftest import backend_params, ext_built, requires_ext

from gsworkbench.core.limits import MemoryBudgetError, available_bytes, check_fits
from gsworkbench.splat import _torch_impl, rasterize
from gsworkbench.splat.memory_estimate import rasterize_bytes

BACKENDS = backend_params(["torch", "ext"])


def _scene(n: int = 10, size: int = 64, dtype: torch.dtype = torch.float32, grad: bool = False) -> dict:
    g = torch.Generator().manual_seed(0)
    vm = torch.eye(4, dtype=dtype)[None].clone()
    vm[0, 2, 3] = 3.0
    K = torch.tensor([[[size * 0.8, 0, size / 2], [0, size * 0.8, size / 2], [0, 0, 1]]], dtype=dtype)
    s = dict(means=torch.randn(n, 3, generator=g, dtype=dtype) * 0.3, quats=torch.randn(n, 4, generator=g, dtype=dtype),
             scales=torch.full((n, 3), 0.05, dtype=dtype), opacities=torch.full((n,), 0.8, dtype=dtype),
             colors=torch.rand(n, 3, generator=g, dtype=dtype), viewmats=vm, Ks=K)  # fmt: skip
    if grad:
        for k in ("means", "scales", "opacities", "colors"):
            s[k].requires_grad_(True)
    return s


def _render(s: dict, size: int, backend: str, **kw):
    return rasterize(s["means"], s["quats"], s["scales"], s["opacities"], s["colors"], s["viewmats"], s["Ks"],
                     size, size, backend=backend, **kw)  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_image_that_cannot_fit_is_refused_before_allocating(backend):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(MemoryBudgetError, match=rf"rasterize \({backend}\) of 1 camera\(s\) at 200000x200000 px"):
        _render(_scene(size=200_000), 200_000, backend)  # ~0.5 TB of images
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 200 * 1024  # KiB: nothing big was touched


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_limit_follows_the_memory_available(backend, monkeypatch):
    s = _scene(size=2000)
    monkeypatch.setenv("GSW_MEMORY_LIMIT", str(10 * 2**20))  # 10 MiB
    with pytest.raises(MemoryBudgetError, match="would allocate about .* but only 0.0 GiB of memory is available"):
        _render(s, 2000, backend, backgrounds=torch.ones(1, 3))
    monkeypatch.setenv("GSW_MEMORY_LIMIT", str(2**30))
    img, _, _ = _render(s, 2000, backend, backgrounds=torch.ones(1, 3))
    assert img.shape == (1, 2000, 2000, 3)


def test_the_torch_reference_checks_its_per_pair_tensors_under_autograd(monkeypatch):
    s = _scene(n=40, size=256, grad=True)
    s["scales"] = torch.full((40, 3), 0.5, requires_grad=True)  # large splats: many tile pixels each
    monkeypatch.setattr(_torch_impl, "CHUNK_ISECTS", 1024)  # chunks of ~40 MB of pairs, the call's ~300 MB
    need_images = rasterize_bytes(1, 256, 256, 3, 4, "torch", 16, False, True)
    monkeypatch.setenv("GSW_MEMORY_LIMIT", str(need_images + 64 * 2**20))  # the images fit, the pairs do not
    with pytest.raises(MemoryBudgetError, match=r"rasterize \(torch\) with autograd over \d+ tile intersections"):
        _render(s, 256, "torch")
    with torch.no_grad():  # without autograd it works in bounded chunks
        _render(s, 256, "torch")
    monkeypatch.setattr(_torch_impl, "CHUNK_ISECTS", 1 << 20)  # one chunk of every intersection
    with torch.no_grad(), pytest.raises(MemoryBudgetError, match=r"over chunks of up to \d+ tile intersections"):
        _render(s, 256, "torch")


def test_available_bytes_and_check_fits(monkeypatch):
    assert available_bytes() > 0
    monkeypatch.setenv("GSW_MEMORY_LIMIT", "1000")
    assert available_bytes() == 1000
    check_fits(999, "x")
    with pytest.raises(MemoryBudgetError, match="^thing would allocate about 0.0 GiB.*; try less$"):
        check_fits(1001, "thing", hint="try less")


@pytest.mark.parametrize("log10_scale", [6, 8, 12, 20, 38])
def test_huge_scales_give_finite_equal_gradients_on_both_backends(log10_scale):
    """Scales whose covariance overflows float32 (1e20 gave NaN gradients for the means with torch and
    zeros with ext): the pair is culled alike, with finite gradients; smaller huge ones render alike."""
    results = {}
    for backend in ["torch"] + (["ext"] if ext_built() else []):
        s = _scene(n=5, grad=True)
        with torch.no_grad():
            s["scales"][0] = 10.0**log10_scale
        img, _, meta = _render(s, 64, backend)
        img.sum().backward()
        grads = {k: s[k].grad for k in ("means", "scales", "opacities", "colors")}
        assert torch.isfinite(img).all() and all(torch.isfinite(g).all() for g in grads.values()), backend
        results[backend] = (img.detach(), meta["radii"].clone(), grads)
    if "ext" in results:
        (ti, tr, tg), (ei, er, eg) = results["torch"], results["ext"]
        # the huge Gaussian is culled alike, or gets the same radius (clamped at 2^30, or float32-rounded)
        assert torch.equal(tr[:, 0] > 0, er[:, 0] > 0)
        assert ((tr[:, 0].double() - er[:, 0].double()).abs() <= 1e-6 * tr[:, 0].double() + 1).all()
        torch.testing.assert_close(ei, ti, rtol=1e-4, atol=1e-5)
        for k in tg:
            torch.testing.assert_close(eg[k], tg[k], rtol=1e-3, atol=1e-3)


@requires_ext
def test_ext_is_present_for_the_comparison():
    """The agreement test above compares with ext only when it is built; make sure it is here."""
    assert ext_built()
