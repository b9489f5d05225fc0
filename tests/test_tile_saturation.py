"""Lists cut at saturation (csrc/include/gsw/tile_saturation.h, ``isect_tiles(cut_saturated=True)``):
each tile's list ends once a lower bound of every pixel's alpha shows that all of them have stopped
compositing. The bound's exp, the torch reference's cut against the whole lists (renders and gradients
unchanged, in float64), and the ext kernel against the reference (its lists between the reference's
with the margin moved by 0.1% either way, prefixes of its whole lists, the same renders and gradients),
on random crowded scenes; short lists are left whole."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import rel_err, requires_ext, to_device
from hypothesis import given, settings
from hypothesis import strategies as st
from splat_scenes import assert_sublists, tile_runs
from test_splat_tile_cover import _random_projections

from gsworkbench.splat import _torch_impl


@settings(max_examples=200, deadline=None)
@given(s=st.floats(0.0, 60.0))
def test_exp_lower_is_a_lower_bound(s: float) -> None:
    """exp_lower(s) <= exp(-s) up to rounding (the cut must never overstate an alpha; the kernel's 1%
    margin covers rounding), and within 10% of it up to s = 3, where the bound does its work."""
    t = torch.tensor([s], dtype=torch.float64)
    lo, e = float(_torch_impl.exp_lower(t)), math.exp(-s)
    assert 0.0 <= lo <= e * (1 + 1e-12)
    if s <= 3.0:
        assert lo >= 0.9 * e


def _crowded(seed: int, C: int, N: int, W: int, H: int, dtype: torch.dtype) -> tuple:
    """Random 2D Gaussians crowding a W x H image, lists long enough to saturate: means2d, 3-sigma radii,
    depths, conics and opacities [C,N]. Footprints of 8-20 px sigma, axis ratios up to 3, opacities
    0.3-0.95; a twentieth each faint (never alpha 1/255), not positive definite, and elongated past the
    bound's roundness limit, which the bound leaves out."""
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    m2 = torch.rand(C, N, 2, generator=g, dtype=f64) * torch.tensor([W + 20.0, H + 20.0]) - 10.0
    sig = 8.0 + 12.0 * torch.rand(C, N, 2, generator=g, dtype=f64)
    sig[..., 1] = torch.maximum(sig[..., 1], sig[..., 0] / 3)
    ang = math.pi * torch.rand(C, N, generator=g, dtype=f64)
    R = torch.stack([torch.cos(ang), -torch.sin(ang), torch.sin(ang), torch.cos(ang)], -1).reshape(C, N, 2, 2)
    cov = R @ torch.diag_embed(sig**2) @ R.transpose(-1, -2)
    pick = torch.rand(C, N, generator=g)
    cov[pick < 0.05] = torch.tensor([[100.0, 99.9], [99.9, 100.0]], dtype=f64)  # a c > 100 det
    inv = torch.linalg.inv(cov)
    conics = torch.stack([inv[..., 0, 0], inv[..., 0, 1], inv[..., 1, 1]], -1)
    conics[(pick >= 0.05) & (pick < 0.1)] = torch.tensor([0.05, 0.1, 0.05], dtype=f64)  # not positive definite
    radii = torch.ceil(3 * torch.linalg.eigvalsh(cov)[..., -1].sqrt()).to(torch.int32)
    opac = 0.3 + 0.65 * torch.rand(C, N, generator=g, dtype=f64)
    opac[(pick >= 0.1) & (pick < 0.15)] = 0.5 / 255
    depths = 0.1 + 10 * torch.rand(C, N, generator=g, dtype=f64)
    return tuple(t.to(dtype) if t.is_floating_point() else t for t in (m2, radii, depths, conics, opac))


def _render(m2, conics, colors, opac, W, H, ts, out, impl) -> tuple:  # noqa: ANN001
    """Colours, alphas and the gradients of all four inputs for the lists ``out``."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (m2, conics, colors, opac)]
    img, alpha = impl.rasterize_to_pixels(*leaves, W, H, ts, out[3], out[2])
    w = torch.linspace(-1, 1, img.numel(), dtype=img.dtype, device=img.device).reshape(img.shape)
    ((img * w).sum() + alpha.sum()).backward()
    return img.detach(), alpha.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("tile_size", [16, 5])
def test_reference_cut_renders_as_whole_lists(seed: int, tile_size: int) -> None:
    """float64, the torch rasterizer: the reference's cut lists are shorter, and render exactly as the
    whole lists (bitwise: the entries cut are never read), with the same gradients up to the order of
    the reference's sums (entries cut in mid-list move the others within them)."""
    W, H = 45, 37
    tw, th = math.ceil(W / tile_size), math.ceil(H / tile_size)
    m2, radii, depths, conics, opac = _crowded(seed, 1, 500, W, H, torch.float64)
    colors = torch.rand(1, 500, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    args = (m2, radii, depths, tile_size, tw, th, conics, opac)
    whole, cut = _torch_impl.isect_tiles(*args), _torch_impl.isect_tiles(*args, cut_saturated=True)
    assert cut[2].numel() < whole[2].numel()
    ref = _render(m2, conics, colors, opac, W, H, tile_size, whole, _torch_impl)
    got = _render(m2, conics, colors, opac, W, H, tile_size, cut, _torch_impl)
    assert torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])
    for a, b in zip(ref[2], got[2], strict=True):
        assert rel_err(b, a) < 1e-12, rel_err(b, a)


@requires_ext
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("tile_size", "C", "N", "W", "H"),
    [(16, 1, 3000, 160, 121), (5, 2, 1200, 160, 121), (16, 1, 20000, 160, 121), (2, 1, 1200, 300, 24)],
)
def test_ext_cut_matches_reference(device: str, seed: int, dtype: torch.dtype, tile_size: int, C: int,
                                   N: int, W: int, H: int) -> None:  # fmt: skip
    """ext against the reference on crowded random scenes: every tile's list a sublist of the whole one,
    shorter than the lists cut at saturation alone, its length between the reference's with the alpha
    margin 0.1% above and below the kernel's (float rounding of the bound) and the rows' support exact
    and 0.05 px wider; renders those of the whole lists, and gradients too up to the order in which
    the backward's threads sum them (its split of the tiles follows the lists' lengths). 20000
    Gaussians: two threads, each with its own rows of tiles. 150 tiles a row: rows of more than one
    64-bit word of saturation flags."""
    from gsworkbench.splat import ops

    tw, th = math.ceil(W / tile_size), math.ceil(H / tile_size)
    m2, radii, depths, conics, opac = _crowded(seed, C, N, W, H, dtype)
    args = (m2, radii, depths, tile_size, tw, th, conics, opac)
    whole = to_device(ops.isect_tiles(*to_device(args, device)), "cpu")
    cut = to_device(ops.isect_tiles(*to_device(args, device), cut_saturated=True), "cpu")
    assert torch.equal(whole[0], cut[0])  # tiles_per_gauss counts the whole boxes
    if device != "cpu":  # the CUDA kernel does not cut: whole lists are valid cut ones
        assert all(torch.equal(a, b) for a, b in zip(whole, cut, strict=True))
        return
    assert cut[2].numel() < whole[2].numel(), "a crowded scene's lists are cut"
    ref_whole = _torch_impl.isect_tiles(*args)
    assert all(torch.equal(a, b) for a, b in zip(ref_whole, whole, strict=True))
    tile, gid = ref_whole[1] >> 32, ref_whole[2].long()
    grid = (tile_size, tw, th)
    counts = []
    # the shortest lists: the alpha margin 0.1% above and the rows' support exact; the longest: 0.1%
    # below and the support 0.05 px wider (the kernel's 0.01 px, and its float terms' rounding)
    for margin, widen in ((0.99 * 1.001, 0.0), (0.99 * 0.999, 0.05)):
        keep = _torch_impl.saturation_keep(tile, gid, m2, conics, opac, *grid, margin=margin)
        keep &= _torch_impl.row_support_reach(tile, gid, m2, conics, opac, *grid, margin=widen)
        counts.append(torch.zeros(C * tw * th, dtype=torch.long).index_add_(0, tile[keep], torch.ones_like(tile[keep])))
    shortest, longest = counts
    saturated = _torch_impl.saturation_keep(tile, gid, m2, conics, opac, *grid, margin=0.99 * 0.999)
    assert cut[2].numel() < int(saturated.sum()), "the rows' support cuts entries the saturation keeps"
    assert_sublists(whole[2:], cut[2:])
    for t, k in enumerate(tile_runs(*cut[2:])):
        assert shortest[t] <= k.numel() <= longest[t], (t, k.numel(), int(shortest[t]), int(longest[t]))
    colors = torch.rand(C, N, 3, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    ref = _render(m2, conics, colors, opac, W, H, tile_size, whole, ops)
    got = _render(m2, conics, colors, opac, W, H, tile_size, cut, ops)
    assert torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])
    for a, b in zip(ref[2], got[2], strict=True):
        assert rel_err(b, a) < (1e-5 if dtype == torch.float32 else 1e-12), rel_err(b, a)


@requires_ext
@pytest.mark.parametrize(("N", "scale"), [(300, 1.0), (20000, 0.25)])
def test_ext_leaves_lists_whole_where_the_cut_cannot_pay(device: str, seed: int, N: int, scale: float) -> None:
    """Lists shorter on average than a tile's pixels (300 Gaussians), or long lists of small footprints
    (20000 Gaussians of a few tiles each), are not cut: the cut would cost more than it saves."""
    from gsworkbench.splat import ops

    m2, radii, depths, conics, opac = _random_projections(seed, 1, N, 90, 61, torch.float32)
    conics, radii = conics / scale**2, torch.ceil(radii * scale).to(torch.int32)
    args = to_device((m2, radii, depths, 16, 6, 4, conics, opac), device)
    whole, cut = ops.isect_tiles(*args), ops.isect_tiles(*args, cut_saturated=True)
    pairs, visible = whole[2].numel(), int((whole[0] > 0).sum())
    assert pairs < 256 * 24 if N == 300 else 256 * 24 <= pairs < 20 * visible
    assert all(torch.equal(a, b) for a, b in zip(whole, cut, strict=True))


@requires_ext
def test_cut_needs_conics_and_opacities(device: str) -> None:
    from gsworkbench.splat import ops

    m2, radii, depths, _, _ = _random_projections(0, 1, 10, 32, 32, torch.float32)
    with pytest.raises(ValueError, match="cut_saturated needs conics and opacities"):
        _torch_impl.isect_tiles(m2, radii, depths, 16, 2, 2, cut_saturated=True)
    with pytest.raises(RuntimeError, match="cut_saturated needs conics and opacities"):
        ops.isect_tiles(*to_device((m2, radii, depths), device), 16, 2, 2, cut_saturated=True)


@requires_ext
def test_opcheck_cut(device: str) -> None:
    from gsworkbench.splat import ops  # noqa: F401  (registers the fake kernels)

    m2, radii, depths, conics, opac = _crowded(1, 1, 400, 40, 30, torch.float32)
    args = to_device((m2, radii, depths, 8, 5, 4, conics, opac, True), device)
    torch.library.opcheck(torch.ops.gsworkbench.splat_isect_tiles, args)
