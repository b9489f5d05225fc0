"""The CPU rasterizer's counting twin (``splat_rasterize_lane_counts``) against a per-pixel torch loop,
its structure, opcheck, and the command that tabulates it (``gsworkbench.studies.rasterize_lanes``)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from conftest import requires_ext
from splat_scenes import random_scene

from gsworkbench.splat import _torch_impl

ALPHA_MIN, ALPHA_MAX, T_MIN = 1.0 / 255.0, 0.99, 1e-4  # csrc/include/gsw/blend.h


def _inputs(seed: int, W: int = 45, H: int = 37, n: int = 150, channels: int = 3) -> tuple:
    s = random_scene(n, width=W, height=H, seed=seed)
    radii, m2, depths, conics, _ = _torch_impl.project_gaussians(
        s["means"], s["quats"], s["scales"], s["viewmats"], s["Ks"], W, H, 0.3, 0.01, 1e10
    )
    C, N = radii.shape
    g = torch.Generator().manual_seed(seed)
    colors = torch.rand(C, N, channels, generator=g, dtype=torch.float64)
    opac = torch.rand(C, N, generator=g, dtype=torch.float64) * 0.98 + 0.01
    ts = 16
    _, _, fid, toff = _torch_impl.isect_tiles(m2, radii, depths, ts, math.ceil(W / ts), math.ceil(H / ts))
    return m2, conics, colors, opac, W, H, ts, toff, fid


def _composited_pairs(m2, conics, opac, W, H, ts, toff, fid) -> int:  # noqa: ANN001
    """Pixel-Gaussian pairs composited, by the forward's rule, one tile's pixels at a time in torch."""
    C, th, tw = toff.shape
    flat_off = toff.flatten().long().tolist() + [fid.numel()]
    N = m2.shape[1]
    total = 0
    for t in range(C * th * tw):
        c, ty, tx = t // (th * tw), (t // tw) % th, t % tw
        ys, xs = torch.meshgrid(torch.arange(ty * ts, min((ty + 1) * ts, H)),
                                torch.arange(tx * ts, min((tx + 1) * ts, W)), indexing="ij")  # fmt: skip
        px, py = xs.flatten().double() + 0.5, ys.flatten().double() + 0.5
        T = torch.ones_like(px)
        done = torch.zeros_like(px, dtype=torch.bool)
        for k in range(flat_off[t], flat_off[t + 1]):
            i = int(fid[k]) - c * N
            dx, dy = m2[c, i, 0] - px, m2[c, i, 1] - py
            a, b, cc = conics[c, i]
            sigma = 0.5 * (a * dx * dx + cc * dy * dy) + b * dx * dy
            alpha = torch.where(sigma >= 0, torch.clamp(opac[c, i] * torch.exp(-sigma), max=ALPHA_MAX), 0.0)
            ok = ~done & (alpha >= ALPHA_MIN)
            nT = T * (1 - alpha)
            term = ok & (nT <= T_MIN)
            con = ok & ~term
            total += int(con.sum())
            T = torch.where(con, nT, T)
            done |= term
    return total


@requires_ext
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_lane_counts_match_a_per_pixel_loop(seed: int, dtype: torch.dtype) -> None:
    from gsworkbench.splat import ops

    m2, conics, colors, opac, W, H, ts, toff, fid = _inputs(seed)
    args = [t.to(dtype) if t.is_floating_point() else t for t in (m2, conics, colors, opac)]
    counts = ops.rasterize_lane_counts(*args, W, H, ts, toff, fid)
    want = _composited_pairs(m2, conics, opac, W, H, ts, toff, fid)
    if dtype == torch.float64:
        assert counts.blended == want
    else:  # float32: an alpha at the 1/255 cut may land on the other side
        assert abs(counts.blended - want) <= max(3, want // 500)
    C, th, tw = toff.shape
    assert counts.tiles == C * th * tw and 1 <= counts.threads <= torch.get_num_threads()
    assert counts.lanes_per_blend in (8, 16) and counts.lanes == counts.lanes_per_blend * counts.blends
    assert counts.blended <= counts.active <= counts.lanes
    assert counts.pairs <= fid.numel() and counts.blends >= counts.pairs > 0
    assert 0 <= counts.busy_max_s <= counts.busy_sum_s and math.isfinite(counts.busy_sum_s)
    # the image the counting twin drops is the plain forward's: its last contributors bound the blends
    last = torch.ops.gsworkbench.splat_rasterize(*args, W, H, ts, toff, fid)[3]
    assert counts.blended <= ops.blended_evaluations(toff, last, ts)


@requires_ext
def test_lane_counts_of_an_empty_list_and_opcheck() -> None:
    from gsworkbench.splat import ops

    m2, conics, colors, opac, W, H, ts, toff, fid = _inputs(3, W=20, H=18, n=20)
    empty = ops.rasterize_lane_counts(m2, conics, colors, opac, W, H, ts, torch.zeros_like(toff), fid[:0])
    assert (empty.pairs, empty.blends, empty.active, empty.blended) == (0, 0, 0, 0)
    assert empty.tiles == toff.numel()
    # the counts hold seconds, which differ between calls: schema and fake kernel only
    torch.library.opcheck(torch.ops.gsworkbench.splat_rasterize_lane_counts,
                          (m2, conics, colors, opac, W, H, ts, toff, fid),
                          test_utils=("test_schema", "test_faketensor"))  # fmt: skip


@requires_ext
def test_lanes_table_structure() -> None:
    from gsworkbench.studies.rasterize_lanes import lanes_table

    table = lanes_table(_tiny_kinds(), reps=3, size=64, peak_gflops=100.0)
    assert isinstance(table, pd.DataFrame) and len(table) == 1
    row = table.iloc[0]
    assert 0 < row.blended_pct <= row.active_pct <= 100
    assert row.lanes >= row.lanes_active >= row.lanes_blended > 0
    assert row.lane_pct_of_peak > 0 and row.model_pct_of_peak > 0 and row.imbalance >= 1
    assert row.command.startswith("python -m gsworkbench.studies.rasterize_lanes") and row.commit


def _tiny_kinds() -> dict[str, dict[str, torch.Tensor]]:
    s = random_scene(300, width=64, height=64, cameras=1, sh_degree=None, seed=5, dtype=torch.float32)
    return {"random": dict(means=s["means"].float(), quats=s["quats"].float(), scales=s["scales"].float(),
                           opacities=s["opacities"].float(), colors=s["colors"].float(),
                           viewmats=s["viewmats"].float(), Ks=s["Ks"].float())}  # fmt: skip
