"""absgrad: the per-pixel absolute gradients of the projected means (gsplat's ``means2d.absgrad``),
ext against the torch reference, and the op's schema with the flag."""

from __future__ import annotations

import pytest
import torch
from conftest import requires_ext, to_device
from splat_scenes import random_scene, rel_err

from gsworkbench.splat import _torch_impl, rasterize


def _render_grads(scene: dict, backend: str, dtype: torch.dtype, absgrad: bool = True, device: str = "cpu"):
    """(means2d.grad, means2d.absgrad or None) of a weighted sum of the render, on the CPU."""
    leaves = {k: scene[k].to(device, dtype).clone().requires_grad_(k != "viewmats") for k in
              ("means", "quats", "scales", "opacities", "colors", "viewmats")}  # fmt: skip
    img, alpha, meta = rasterize(
        *leaves.values(), scene["Ks"].to(device, dtype), scene["width"], scene["height"], sh_degree=2,
        absgrad=absgrad, backend=backend,
    )  # fmt: skip
    meta["means2d"].retain_grad()
    gen = torch.Generator().manual_seed(scene["seed"])
    w = (torch.rand(img.shape, generator=gen, dtype=torch.float64) - 0.5).to(device, dtype)
    ((img * w).sum() + alpha.sum()).backward()
    return to_device((meta["means2d"].grad, getattr(meta["means2d"], "absgrad", None)), "cpu")


@requires_ext
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_absgrad_ext_matches_torch(dtype, device, seed):
    scene = random_scene(150, cameras=2, width=45, height=37, seed=seed)
    ref_g, ref_a = _render_grads(scene, "torch", torch.float64)
    g, a = _render_grads(scene, "ext", dtype, device=device)
    tol = 2e-3 if dtype == torch.float32 else 1e-9  # float32: a rare alpha-threshold flip moves a pixel
    assert a is not None and a.shape == g.shape == ref_a.shape
    assert rel_err(g, ref_g) < tol and rel_err(a, ref_a) < tol
    # the sum of absolute values bounds the absolute sum, and differs from it where signs mix
    assert bool((a >= g.abs() - 1e-5).all()) and float(a.sum()) > float(g.abs().sum()) * 1.01
    assert bool((a >= 0).all())


@pytest.mark.parametrize("backend", ["torch", pytest.param("ext", marks=requires_ext)])
def test_no_absgrad_unless_asked(backend, device):
    scene = random_scene(20, cameras=1, width=20, height=16)
    g, a = _render_grads(scene, backend, torch.float64, absgrad=False, device=device)
    assert a is None and g is not None


def test_absgrad_of_the_torch_stage_is_per_pixel():
    """One Gaussian, one pixel row: absgrad is the sum of |d loss / d mean2d| over pixels."""
    m2 = torch.tensor([[[8.0, 0.5]]], dtype=torch.float64, requires_grad=True)
    conics = torch.tensor([[[0.1, 0.0, 0.1]]], dtype=torch.float64)
    colors = torch.ones(1, 1, 1, dtype=torch.float64)
    opac = torch.full((1, 1), 0.5, dtype=torch.float64)
    toff = torch.zeros(1, 1, 1, dtype=torch.int32)
    fid = torch.zeros(1, dtype=torch.int32)
    img, _ = _torch_impl.rasterize_to_pixels(m2, conics, colors, opac, 16, 1, 16, toff, fid, absgrad=True)
    img.sum().backward()  # symmetric about x = 8: the x-gradients cancel, their absolute values do not
    assert abs(float(m2.grad[0, 0, 0])) < 1e-12 * float(m2.absgrad[0, 0, 0]) + 1e-3
    assert float(m2.absgrad[0, 0, 0]) > 0.1


@requires_ext
def test_opcheck_rasterize_with_absgrad(device):
    from gsworkbench.splat import ops

    s = to_device(random_scene(30, width=24, height=20), device)
    radii, m2, depths, conics, _ = _torch_impl.project_gaussians(
        s["means"], s["quats"], s["scales"], s["viewmats"], s["Ks"], 24, 20
    )
    _, _, fid, toff = ops.isect_tiles(m2, radii, depths, 8, 3, 3)
    colors = torch.rand(2, 30, 3, dtype=torch.float64, device=device)
    opac = torch.rand(2, 30, dtype=torch.float64, device=device)
    rargs = (m2, conics, colors, opac, 24, 20, 8, toff, fid, True)
    torch.library.opcheck(torch.ops.gsworkbench.splat_rasterize, rargs)
    out = torch.ops.gsworkbench.splat_rasterize(*rargs)
    bargs = (*rargs[:9], out[2], out[3], torch.rand_like(out[0]), torch.rand_like(out[1]), True)
    torch.library.opcheck(torch.ops.gsworkbench.splat_rasterize_backward, bargs)
    assert torch.ops.gsworkbench.splat_rasterize_backward(*bargs)[4].shape == m2.shape
