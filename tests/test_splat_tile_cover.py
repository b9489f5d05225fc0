"""The tile cover of the intersection stage (csrc/include/gsw/tile_cover.h): given conics and
opacities, each Gaussian's 3-sigma box of tiles is cut to the bounding box of its alpha >= 1/255
support. ext (every device of the ``device`` fixture) against the torch reference on random and
edge-case Gaussians; no tile with a contributing pixel dropped (brute force over the pixels); renders
and gradients those of the box's lists; opcheck and the input checks."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import requires_ext, to_device
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from splat_scenes import random_scene, rel_err

from gsworkbench.splat import _torch_impl


def _random_projections(seed: int, C: int, N: int, W: int, H: int, dtype: torch.dtype) -> tuple:
    """Random 2D Gaussians over (and past) a W x H image: means2d, 3-sigma radii, depths, conics and
    opacities [C,N], with every case of the cover among them (a tenth each of faint opacities, conics
    that are not positive definite, and Gaussians elongated past the row interval's precision, cut in y
    only)."""
    g = torch.Generator().manual_seed(seed)
    m2 = torch.rand(C, N, 2, generator=g, dtype=torch.float64) * torch.tensor([W + 40.0, H + 40.0]) - 20.0
    L = torch.randn(C, N, 2, 2, generator=g, dtype=torch.float64) * 4.0
    cov = L @ L.transpose(-1, -2) + 0.3 * torch.eye(2, dtype=torch.float64)
    stretch = torch.rand(C, N, generator=g) < 0.1  # a c > 10^4 det: long, thin footprints
    cov[stretch] = torch.tensor([[400.0, 399.99], [399.99, 400.0]], dtype=torch.float64)
    inv = torch.linalg.inv(cov)
    conics = torch.stack([inv[..., 0, 0], inv[..., 0, 1], inv[..., 1, 1]], -1)
    radii = torch.ceil(3 * torch.linalg.eigvalsh(cov)[..., -1].sqrt()).to(torch.int32)
    radii[torch.rand(C, N, generator=g) < 0.05] = 0  # culled by the projection
    opac = torch.rand(C, N, generator=g, dtype=torch.float64)
    opac[torch.rand(C, N, generator=g) < 0.1] = 0.5 / 255  # never reaches alpha 1/255
    bad = torch.rand(C, N, generator=g) < 0.1  # not positive definite: the box decides
    conics[bad] = torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64)
    depths = 0.1 + 10 * torch.rand(C, N, generator=g, dtype=torch.float64)
    return tuple(t.to(dtype) if t.is_floating_point() else t for t in (m2, radii, depths, conics, opac))


@requires_ext
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**31 - 1),
    tile_size=st.sampled_from([8, 13, 16]),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_cover_ext_matches_torch(device: str, seed: int, tile_size: int, dtype: torch.dtype) -> None:
    from gsworkbench.splat import ops

    W, H = 90, 61
    tw, th = math.ceil(W / tile_size), math.ceil(H / tile_size)
    m2, radii, depths, conics, opac = _random_projections(seed, 2, 600, W, H, dtype)
    args = (m2, radii, depths, tile_size, tw, th, conics, opac)
    ref = _torch_impl.isect_tiles(*args)
    out = to_device(ops.isect_tiles(*to_device(args, device)), "cpu")
    for r, o in zip(ref, out, strict=True):
        assert torch.equal(r, o)
    assert int(out[0].sum()) == out[1].numel() and bool((out[1][1:] >= out[1][:-1]).all())


def _pairs(out: tuple) -> set[tuple[int, int]]:
    """The (camera * N + Gaussian, camera * ntiles + tile) pairs of an intersection list."""
    tiles = (out[1] >> 32).tolist()
    return set(zip(out[2].tolist(), tiles, strict=True))


def test_no_tile_with_a_contributing_pixel_is_dropped() -> None:
    """Brute force over every pixel centre: a (Gaussian, tile) pair of the box's list leaves the cover
    only if the rasterizer's alpha (csrc/include/gsw/blend.h) stays below 1/255 at every pixel of the
    tile; and the cover drops pairs (the scene has faint Gaussians and elongated ones to cut)."""
    W, H, ts = 70, 45, 16
    tw, th = math.ceil(W / ts), math.ceil(H / ts)
    m2, radii, depths, conics, opac = _random_projections(11, 1, 300, W, H, torch.float64)
    box = _torch_impl.isect_tiles(m2, radii, depths, ts, tw, th)
    cover = _torch_impl.isect_tiles(m2, radii, depths, ts, tw, th, conics, opac)
    box_pairs, cover_pairs = _pairs(box), _pairs(cover)
    assert cover_pairs <= box_pairs and len(cover_pairs) < 0.8 * len(box_pairs)
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float64) + 0.5, torch.arange(W, dtype=torch.float64) + 0.5,
                            indexing="ij")  # fmt: skip
    for gid, tile in box_pairs - cover_pairs:
        ty, tx = divmod(tile, tw)
        px = xs[ty * ts:(ty + 1) * ts, tx * ts:(tx + 1) * ts]
        py = ys[ty * ts:(ty + 1) * ts, tx * ts:(tx + 1) * ts]
        a, b, c = conics[0, gid].tolist()
        dx, dy = m2[0, gid, 0] - px, m2[0, gid, 1] - py
        sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
        alpha = torch.where(sigma >= 0, (opac[0, gid] * torch.exp(-sigma)).clamp_max(0.99), 0.0)
        assert float(alpha.max()) < 1 / 255, (gid, tile)


@requires_ext
@pytest.mark.parametrize("backend", ["torch", "ext"])
def test_renders_and_gradients_are_those_of_the_box(device: str, backend: str) -> None:
    """The same pixels from the cover's lists as from the box's: colours and alphas equal to the bit
    (the dropped Gaussians were skipped at every pixel), gradients to float64 rounding."""
    from gsworkbench.splat import ops

    if backend == "torch" and device != "cpu":
        pytest.skip("the torch reference runs on the CPU here")
    impl = ops if backend == "ext" else _torch_impl
    s = random_scene(150, cameras=2, width=57, height=40, scale=0.2)
    pa = (s["means"], s["quats"], s["scales"], s["viewmats"], s["Ks"], 57, 40, 0.3, 0.01, 1e10)
    radii, m2, depths, conics, _ = _torch_impl.project_gaussians(*pa)
    C, N = radii.shape
    g = torch.Generator().manual_seed(2)
    colors = torch.rand(C, N, 3, generator=g, dtype=torch.float64)
    opac = torch.rand(C, N, generator=g, dtype=torch.float64) ** 3  # many faint ones
    results = []
    for extra in ((), (conics, opac)):
        _, _, fid, toff = _torch_impl.isect_tiles(m2, radii, depths, 16, 4, 3, *extra)
        leaves = [t.detach().to(device).requires_grad_(True) for t in (m2, conics, colors, opac)]
        img, alpha = impl.rasterize_to_pixels(*leaves, 57, 40, 16, toff.to(device), fid.to(device))
        w = torch.rand(img.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(device)
        ((img * w).sum() + alpha.sum()).backward()
        results.append(to_device((img.detach(), alpha.detach(), [t.grad for t in leaves], fid.numel()), "cpu"))
    (bi, ba, bg, bn), (ci, ca, cg, cn) = results
    assert cn < bn
    assert torch.equal(ci, bi) and torch.equal(ca, ba)
    for a, b in zip(cg, bg, strict=True):
        assert rel_err(a, b) < 1e-12


@requires_ext
def test_rasterize_passes_the_cover(device: str) -> None:
    """rasterize() lists only the covered tiles (its tiles_per_gauss is the cover's count)."""
    from gsworkbench.splat import rasterize

    s = to_device(random_scene(60, width=40, height=28, sh_degree=None), device)
    _, _, meta = rasterize(s["means"], s["quats"], s["scales"], s["opacities"], s["colors"], s["viewmats"],
                           s["Ks"], 40, 28, backend="ext")  # fmt: skip
    box = _torch_impl.isect_tiles(*to_device((meta["means2d"], meta["radii"], meta["depths"]), "cpu"), 16, 3, 2)
    assert int(meta["tiles_per_gauss"].sum()) == meta["flatten_ids"].numel() < box[2].numel()


@requires_ext
def test_opcheck_and_input_checks(device: str) -> None:
    m2, radii, depths, conics, opac = to_device(_random_projections(5, 2, 40, 30, 20, torch.float64), device)
    op = torch.ops.gsworkbench.splat_isect_tiles
    torch.library.opcheck(op, (m2, radii, depths, 8, 4, 3, conics, opac),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))  # fmt: skip
    with pytest.raises(RuntimeError, match="conics and opacities together"):
        op(m2, radii, depths, 8, 4, 3, conics, None)
    with pytest.raises(RuntimeError, match=r"conics must be \[C,N,3\]"):
        op(m2, radii, depths, 8, 4, 3, conics[..., :2], opac)
    with pytest.raises(RuntimeError, match="opacities must have dtype Float"):
        op(m2.float(), radii, depths, 8, 4, 3, conics.float(), opac)
    with pytest.raises(ValueError, match="conics and opacities together"):
        _torch_impl.isect_tiles(m2.cpu(), radii.cpu(), depths.cpu(), 8, 4, 3, conics.cpu(), None)


@requires_ext
def test_the_cover_table_compares_the_lists_in_one_run() -> None:
    """python -m gsworkbench.studies.tile_cover_table, on toy splats: a row per kind and list, the cover's
    list shorter than the box's and the saturated one no longer, the intersections read no more than
    listed, images equal to the bit, times positive, the run recorded."""
    from gsworkbench.studies.tile_cover_table import cover_table

    s = random_scene(300, cameras=1, width=64, height=64, sh_degree=None, dtype=torch.float32, seed=4)
    splats = {"toy": dict(means=s["means"].float(), quats=s["quats"].float(), scales=s["scales"].float(),
                          opacities=s["opacities"].float() ** 3, colors=s["colors"].float(),
                          viewmats=s["viewmats"].float(), Ks=s["Ks"].float())}  # fmt: skip
    table = cover_table(splats, "cpu", reps=3, size=64)
    assert table["list"].tolist() == ["box", "cover", "saturated"] and table["images_equal"].all()
    box, cover, saturated = table["intersections"].tolist()
    assert 0 < saturated <= cover < box
    assert (0 < table["read_by_rasterizer"]).all() and (table["read_by_rasterizer"] <= table["intersections"]).all()
    assert (table[["isect_ms", "rasterize_ms", "both_ms"]] > 0).all().all()
    assert {"commit", "device", "threads", "torch", "command"} <= set(table.columns)
