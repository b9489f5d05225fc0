"""The roofline: the ceiling ops against their torch references, the ceilings' structure and their
record in a run's metadata, the work counts against hand counts, the roofline columns on a fake table,
the plot, and the table command at toy sizes. Nothing here asserts on a clock."""

from __future__ import annotations

import json
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import requires_ext

from gsworkbench import _ext
from gsworkbench.bench import ceilings as ceil
from gsworkbench.bench.ceilings import MachineCeilings
from gsworkbench.bench.roofline import add_roofline_columns

matplotlib.use("Agg")

FAKE = MachineCeilings(peak_gflops=100.0, bandwidth_gbs=10.0, threads=2, simd="avx2-fma", lanes=8, how="fake")


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


# ---- the ops against their references ----


@requires_ext
@pytest.mark.parametrize("seed", [0, 1])
def test_fma_chains_match_the_float64_recurrence(seed: int) -> None:
    acc, lanes = ceil.fma_shape()
    threads = min(2, torch.get_num_threads())
    g = torch.Generator().manual_seed(seed)
    start = torch.randn(threads, acc, lanes, generator=g)
    a, b = 0.5 + 0.4 * float(torch.rand(1, generator=g)), float(torch.randn(1, generator=g))
    got = ceil.fma_chains(start, a, b, 37)
    # the op rounds a and b to float32: the reference uses the same values, in float64
    a32, b32 = float(torch.tensor(a, dtype=torch.float32)), float(torch.tensor(b, dtype=torch.float32))
    want = ceil.fma_chains_reference(start.double(), a32, b32, 37)
    assert got.shape == start.shape and got.dtype == torch.float32
    assert _rel(got, want) < 1e-5
    assert torch.equal(ceil.fma_chains(start, a, b, 0), start)  # 0 iterations: the start itself


@requires_ext
@pytest.mark.parametrize("n", [0, 1, 1000, 4097])
def test_triad_matches_b_plus_s_c(n: int) -> None:
    g = torch.Generator().manual_seed(n)
    b, c = torch.randn(n, generator=g), torch.randn(n, generator=g)
    out = torch.full((n,), float("nan"))
    ceil.triad(out, b, c, 2.5)
    want = ceil.triad_reference(b.double(), c.double(), 2.5)
    assert out.shape == (n,)
    if n:
        assert _rel(out, want) < 1e-6


@requires_ext
def test_bad_inputs_get_clear_errors() -> None:
    acc, lanes = ceil.fma_shape()
    with pytest.raises(RuntimeError, match="must be float32"):
        ceil.fma_chains(torch.zeros(1, acc, lanes, dtype=torch.float64), 0.5, 0.1, 1)
    with pytest.raises(RuntimeError, match=rf"must be \[threads, {acc}, {lanes}\]"):
        ceil.fma_chains(torch.zeros(1, acc + 1, lanes), 0.5, 0.1, 1)
    with pytest.raises(RuntimeError, match="iterations must be >= 0"):
        ceil.fma_chains(torch.zeros(1, acc, lanes), 0.5, 0.1, -1)
    with pytest.raises(RuntimeError, match="threads"):
        ceil.fma_chains(torch.zeros(torch.get_num_threads() + 1, acc, lanes), 0.5, 0.1, 1)
    x = torch.zeros(8)
    with pytest.raises(RuntimeError, match="one length"):
        ceil.triad(x, torch.zeros(8), torch.zeros(7), 1.0)
    with pytest.raises(RuntimeError, match="must be float32"):
        ceil.triad(x, torch.zeros(8, dtype=torch.float64), torch.zeros(8), 1.0)
    with pytest.raises(RuntimeError, match="1-D and contiguous"):
        ceil.triad(torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(2, 4), 1.0)


@requires_ext
def test_opcheck_ceiling_ops() -> None:
    acc, lanes = ceil.fma_shape()
    torch.library.opcheck(torch.ops.gsworkbench.ceiling_fma, (torch.rand(1, acc, lanes), 0.9, 0.1, 5))
    b, c = torch.randn(100), torch.randn(100)
    torch.library.opcheck(torch.ops.gsworkbench.ceiling_triad, (torch.empty(100), b, c, 3.0))


# ---- the ceilings: structure only ----


@requires_ext
def test_measure_ceilings_structure_and_cache() -> None:
    found = ceil.measure_ceilings(1, repeats=2, repeat_seconds=0.01, triad_bytes=1 << 20)
    assert found is not None
    assert math.isfinite(found.peak_gflops) and found.peak_gflops > 0
    assert math.isfinite(found.bandwidth_gbs) and found.bandwidth_gbs > 0
    assert found.threads == 1 and found.lanes == ceil.fma_shape()[1] and found.simd
    assert ceil.measure_ceilings(1, repeats=2, repeat_seconds=0.01, triad_bytes=1 << 20) is found  # cached
    assert MachineCeilings.from_dict(found.to_dict()) == found
    with pytest.raises(ValueError, match="threads must be >= 1"):
        ceil.measure_ceilings(0)


def test_ceilings_without_the_extension_are_none_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ext, "_LOAD_ERROR", "No module named 'gsworkbench._C'")
    ceil.measure_ceilings.cache_clear()
    try:
        assert "not built" in (ceil.ceilings_unavailable() or "")
        assert ceil.measure_ceilings(1) is None
        assert ceil.ceilings_metadata(1) == {"skipped": "the gsworkbench._C extension is not built"}
    finally:
        ceil.measure_ceilings.cache_clear()
    assert MachineCeilings.from_dict({"skipped": "x"}) is None


@requires_ext
def test_a_run_records_its_ceilings_and_gsw_ceilings_0_skips_them(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gsworkbench.bench.store import load_bench_run, save_run

    measured = ceil.measure_ceilings(1, repeats=2, repeat_seconds=0.01, triad_bytes=1 << 20)
    monkeypatch.setattr(ceil, "measure_ceilings", lambda threads: measured if threads == 1 else None)
    df = pd.DataFrame({"case": ["a"], "median_s": [0.1], "threads": [1]})
    run = save_run("unit", df, {"threads": 1}, root=tmp_path)
    recorded = json.loads((run / "metadata.json").read_text())["ceilings"]
    assert recorded == measured.to_dict()
    assert load_bench_run(run).ceilings == measured

    monkeypatch.setenv("GSW_CEILINGS", "0")
    run = save_run("unit", df, {"threads": 1}, root=tmp_path)
    assert json.loads((run / "metadata.json").read_text())["ceilings"] == {"skipped": "GSW_CEILINGS=0"}
    assert load_bench_run(run).ceilings is None
    assert ceil.run_ceilings(1) is None


# ---- the counts against hand counts ----


def test_field_work_hand_count() -> None:
    from gsworkbench.field.ops import field_work

    # B = 2 points, N = 3 Gaussians: 6 pairs; forward reads 6 + 9 + 27 + 3 values and writes 2
    assert field_work(2, 3) == {"flops_per_call": 42.0 * 6, "bytes_per_call": 4.0 * 47}
    # the backward reads those 45 and 2 gradients again and writes 6 + 9 + 27 + 3 gradients
    fb = field_work(2, 3, "forward+backward")
    assert fb == {"flops_per_call": (42.0 + 76.0) * 6, "bytes_per_call": 4.0 * (47 + 47 + 45)}
    with pytest.raises(ValueError, match="mode"):
        field_work(2, 3, "backward")


def test_render_work_hand_count() -> None:
    from gsworkbench.splat import ops

    # 2 intersections at 16x16 (one tile): at most 2 x 256 evaluations of 34 + 2 x 3 flops; records of
    # 4 + 9 x 4 bytes, and 256 pixels of 3 colours and alpha (4 bytes each); keeping the state for a
    # backward, also a transmittance and a last id
    r = ops.rasterize_work(2, 16, 16)
    assert r == {"flops_per_call": 40.0 * 512, "bytes_per_call": 2.0 * 40 + 256 * 16, "evaluations": 512.0}
    assert ops.rasterize_work(2, 16, 16, keep_state=True)["bytes_per_call"] == 2.0 * 40 + 256 * 24
    assert ops.rasterize_work(2, 16, 16, evaluations=7)["flops_per_call"] == 40.0 * 7
    # degree 1: basis 3, K = 4: 24 products and sums, 3 for the clamp; 12 + 6 values of 4 bytes
    assert ops.sh_work(5, 1) == {"flops_per_call": 5.0 * 30, "bytes_per_call": 5.0 * 18 * 4}
    assert ops.project_work(2)["bytes_per_call"] == 2 * (40 + 32)
    assert math.isnan(ops.project_work(2)["flops_per_call"])
    assert ops.isect_work(3, 10, 32, 16)["bytes_per_call"] == 3 * 36 + 10 * 12 + 2 * 4
    fwd = ops.render_stage_work("forward", 3, 32, 16, 1, 10)
    parts = [ops.render_stage_work(s, 3, 32, 16, 1, 10) for s in ("project", "sh", "isect", "rasterize")]
    assert fwd["bytes_per_call"] == sum(p["bytes_per_call"] for p in parts)
    assert fwd["flops_per_call"] == parts[1]["flops_per_call"] + parts[3]["flops_per_call"]
    # the backward of the compositing: 55 + 4 x 3 flops an evaluation; records, 256 pixels' T, last id
    # and incoming gradients (3 colours, alpha), and 3 Gaussians' 9 gradients (4 bytes each)
    b = ops.rasterize_backward_work(3, 2, 16, 16, evaluations=7)
    assert b == {"flops_per_call": 67.0 * 7, "bytes_per_call": 2.0 * 40 + 256 * 24 + 3 * 36, "evaluations": 7.0}
    both = ops.render_stage_work("forward+backward", 3, 32, 16, 1, 10, evaluations=7)
    fwd7 = ops.render_stage_work("forward", 3, 32, 16, 1, 10, evaluations=7)
    bwd7 = ops.rasterize_backward_work(3, 10, 32, 16, evaluations=7)
    assert both["flops_per_call"] == fwd7["flops_per_call"] + bwd7["flops_per_call"]
    # the forward of a forward+backward also writes the state for the backward: 512 pixels' T and last id
    assert both["bytes_per_call"] == fwd7["bytes_per_call"] + bwd7["bytes_per_call"] + 512 * 8
    assert math.isnan(ops.render_stage_work("backward", 3, 32, 16, 1, 10)["flops_per_call"])


def test_blended_evaluations_hand_count() -> None:
    from gsworkbench.splat.ops import blended_evaluations

    # two 2x2 tiles side by side (W=4, H=2); lists start at 0 and 5; last ids: -1 (nothing blended), the
    # tile's first entry, its third, and the second tile's entry 6 (its second)
    offsets = torch.tensor([[[0, 5]]], dtype=torch.int32)
    last = torch.tensor([[[-1, 0, 5, 6], [2, 2, -1, 5]]], dtype=torch.int32)
    assert blended_evaluations(offsets, last, tile_size=2) == 0 + 1 + 1 + 2 + 3 + 3 + 0 + 1


@pytest.mark.requires_ext
def test_blended_evaluations_match_a_pixel_loop() -> None:
    """On a random scene, the count from the ext forward's last ids equals a per-pixel walk of the tile
    lists in the torch reference's blend order, stopping at each pixel's last contributor; the last ids
    do not depend on the colours."""
    from gsworkbench.core import cameras
    from gsworkbench.core.splats import synthetic_splats
    from gsworkbench.splat import _torch_impl
    from gsworkbench.splat.ops import blended_evaluations, last_contributors

    s = synthetic_splats(300, 0, seed=3)
    vm, Ks = cameras.orbit_cameras(1, 40, 24, distance=3.0)
    radii, m2, depths, conics, _ = _torch_impl.project_gaussians(s.means, s.quats, s.scales, vm, Ks, 40, 24)
    colors = torch.rand(1, 300, 3)
    _, _, fid, toff = _torch_impl.isect_tiles(m2, radii, depths, 16, 3, 2)
    o = s.opacities[None].contiguous()
    last = torch.ops.gsworkbench.splat_rasterize(m2, conics, colors, o, 40, 24, 16, toff, fid, False)[3]
    ends = torch.cat([toff.flatten()[1:].long(), torch.tensor([fid.numel()])])
    walked = 0
    for y in range(24):
        for x in range(40):
            t = (y // 16) * 3 + x // 16
            lid = int(last[0, y, x])
            assert lid == -1 or int(toff.flatten()[t]) <= lid < int(ends[t])
            walked += lid - int(toff.flatten()[t]) + 1 if lid >= 0 else 0
    assert walked > 0 and blended_evaluations(toff, last, 16) == walked
    # the colours do not decide which splats blend: the forward on zero colours has the same last ids
    assert torch.equal(last_contributors(m2, conics, o, 40, 24, 16, toff, fid), last)


def test_transform_and_adam_bytes_hand_count() -> None:
    from gsworkbench.train.adam import adam_step_bytes
    from gsworkbench.transforms.ops import transform_bytes

    assert transform_bytes(10, 0) == 10 * 10 * 4 * 2  # means, quats, log-scales read and written
    assert transform_bytes(1, 3) == (10 + 45) * 4 * 2
    assert adam_step_bytes(59) == 59 * 7 * 4


def test_step_stage_work_hand_count() -> None:
    from gsworkbench.splat import ops
    from gsworkbench.train.step_work import STEP, parameter_values, step_stage_work
    from gsworkbench.train.timers import STAGES

    def same(got: dict[str, float], want: dict[str, float]) -> bool:  # NaN (not counted) equal to NaN
        return all(np.isclose(got[k], want[k], equal_nan=True) for k in ("flops_per_call", "bytes_per_call"))

    w = step_stage_work(5, 32, 16, 1, 10, evaluations=7)
    assert set(w) == {*STAGES, STEP}
    assert same(w["project"], ops.project_work(5)) and same(w["sh"], ops.sh_work(5, 1))
    assert same(w["isect"], ops.isect_work(5, 10, 32, 16))
    assert same(w["rasterize"], ops.rasterize_work(10, 32, 16, evaluations=7, keep_state=True))  # state kept
    assert same(w["backward"], ops.rasterize_backward_work(5, 10, 32, 16, evaluations=7))
    # the loss: the image and its target read, the SSIM gradient written: 3 images of 512 pixels x 3 x 4 bytes
    assert math.isnan(w["loss"]["flops_per_call"]) and w["loss"]["bytes_per_call"] == 3 * 512 * 12
    # Adam over 3 + 4 + 3 + 1 + 3 x 4 values a Gaussian at degree 1: 7 x 4 bytes each
    assert parameter_values(5, 1) == 5 * 23 and w["optimizer"]["bytes_per_call"] == 5 * 23 * 28
    assert parameter_values(1, 3) == 59
    for s in ("prepare", "densify"):
        assert all(math.isnan(v) for v in w[s].values())
    assert w[STEP]["flops_per_call"] == sum(w[s]["flops_per_call"] for s in ("sh", "rasterize", "backward"))
    assert w[STEP]["bytes_per_call"] == sum(
        w[s]["bytes_per_call"] for s in ("project", "sh", "isect", "rasterize", "loss", "backward", "optimizer")
    )
    # no measured evaluations (None or NaN): the rasterizer's bound, 256 per intersection
    bound = step_stage_work(5, 32, 16, 1, 10, evaluations=math.nan)["rasterize"]["flops_per_call"]
    assert bound == ops.rasterize_work(10, 32, 16)["flops_per_call"]


# ---- the roofline columns ----


def test_roofline_columns_exact_on_a_fake_table() -> None:
    df = pd.DataFrame({"median_s": [0.5, 2.0, 1.0, 1.0], "flops_per_call": [1e9, 4e9, np.nan, np.nan],
                       "bytes_per_call": [1e8, 1e10, 2e9, np.nan]})  # fmt: skip
    out = add_roofline_columns(df, FAKE)
    np.testing.assert_allclose(out.gflops[:2], [2.0, 2.0])
    np.testing.assert_allclose(out.gbs[:3], [0.2, 5.0, 2.0])
    np.testing.assert_allclose(out.intensity[:2], [10.0, 0.4])
    # roof: min(100, 10 x 10) = 100 -> 2%; min(100, 0.4 x 10) = 4 -> 50%; bytes only: 2 of 10 GB/s -> 20%
    np.testing.assert_allclose(out.pct_of_peak[:3], [2.0, 50.0, 20.0])
    assert math.isnan(out.pct_of_peak[3])
    assert add_roofline_columns(df, None).pct_of_peak.isna().all()
    assert "gflops" not in add_roofline_columns(pd.DataFrame({"median_s": [1.0]}), FAKE)


def test_compare_and_history_show_the_share_of_the_roof(tmp_path) -> None:
    from gsworkbench.bench.compare import compare_bench_runs
    from gsworkbench.bench.history import history_table
    from gsworkbench.bench.store import BenchRun

    def run(name: str, pct: float) -> BenchRun:
        table = pd.DataFrame({"case": ["k"], "median_s": [1.0], "samples_s": [[1.0] * 8], "pct_of_peak": [pct]})
        return BenchRun(tmp_path / name, "unit", {"parameters": {}}, table)

    shown = compare_bench_runs(run("a", 10.0), run("b", 20.0)).display_table()
    assert list(shown["baseline % of roof"]) == [10.0] and list(shown["candidate % of roof"]) == [20.0]
    assert list(history_table([run("a", 10.0), run("b", 20.0)]).pct_of_peak) == [10.0, 20.0]


def test_plot_roofline_draws_the_roofs_and_one_point_per_case() -> None:
    from gsworkbench.bench.roofline import plot_roofline

    table = pd.DataFrame({"case": ["fast", "slow", "no flops"], "intensity": [10.0, 0.4, np.nan],
                          "gflops": [2.0, 2.0, np.nan], "pct_of_peak": [2.0, 50.0, 20.0]})  # fmt: skip
    fig = plot_roofline(table, FAKE, footer="test machine")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "intensity" in ax.get_xlabel() and "GFLOP/s" in ax.get_ylabel()
    assert len(ax.collections) == 2  # the two cases with flops
    roof = ax.lines[0].get_ydata()
    assert roof.max() == pytest.approx(FAKE.peak_gflops) and roof.min() < FAKE.peak_gflops
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("fast (2% of roof)" in t for t in labels) and any("GB/s" in t for t in labels)
    assert any(t.get_text() == "test machine" for t in fig.texts)
    import matplotlib.pyplot as plt

    plt.close(fig)


@requires_ext
def test_the_roofline_table_command_at_toy_sizes(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gsworkbench.studies import roofline_table as roofline
    from gsworkbench.train.timers import STAGES

    monkeypatch.setattr(roofline, "roofline_table", _tiny_table(roofline.roofline_table))
    out = tmp_path / "roofline.csv"
    assert roofline.main([str(out), "--tiny", "--threads", "1", "--min-run-time", "0.01", "--rounds", "2"]) == 0
    table = pd.read_csv(out)
    kernels = list(table.kernel)
    assert any(k.startswith("field/ext/") and k.endswith("/forward") for k in kernels)
    assert any("/dense/" in k and k.endswith("/rasterize") for k in kernels)
    assert any("/volumetric/" in k and k.endswith("/isect") for k in kernels)
    assert any(k.startswith("transforms/ext/") for k in kernels) and any(k.startswith("adam/fused/") for k in kernels)
    assert {"intensity", "gflops", "gbs", "pct_of_peak", "iqr_s", "commit", "cpu", "threads", "command"} <= set(table)
    assert (table.threads == 1).all() and (table.pct_of_peak.dropna() > 0).all()
    assert (table.command == f"{roofline.COMMAND} {out} --threads 1 --min-run-time 0.01 --rounds 2 --tiny").all()
    assert (table.rounds == 2).all() and table.kernel.is_unique  # one row a case: its quietest pass
    assert any("/cloud/" in k and k.endswith("/rasterize") for k in kernels)
    # the training step, then one row a stage and one of the time outside them, each with its share of
    # the step; prepare, densify and the unstaged time have no count, every other row is counted
    step = next(k for k in kernels if k.startswith("train/ext/trained/"))
    stages = table[table.kernel.str.startswith(step + "/")]
    assert [k.removeprefix(step + "/") for k in stages.kernel] == [*STAGES, "unstaged"]
    timed = stages[stages.kernel != step + "/unstaged"]  # the unstaged time is a difference: any sign
    assert (timed.median_s >= 0).all() and (timed.pct_of_step >= 0).all() and stages.iqr_s.isna().all()
    uncounted = {step + "/prepare", step + "/densify", step + "/unstaged"}
    assert set(table.kernel[table.pct_of_peak.isna()]) == uncounted
    by = table.set_index("kernel")
    for s in ("project", "isect", "loss", "optimizer"):  # bytes only
        assert np.isnan(by.flops_per_call[f"{step}/{s}"]) and by.bytes_per_call[f"{step}/{s}"] > 0
    for s in ("sh", "rasterize", "backward"):
        assert by.flops_per_call[f"{step}/{s}"] > 0
    assert by.flops_per_call[step] == pytest.approx(sum(by.flops_per_call[f"{step}/{s}"]
                                                        for s in ("sh", "rasterize", "backward")))  # fmt: skip
    # the step over the render forward+backward of the same splats and size, timed in the same table
    fwd_bwd = next(k for k in kernels if "/trained/" in k and k.endswith("/forward+backward"))
    assert fwd_bwd.split("/")[3:5] == step.split("/")[3:5]  # count and image size
    assert by.step_over_forward_backward[step] == pytest.approx(by.median_s[step] / by.median_s[fwd_bwd])
    assert table.step_over_forward_backward.notna().sum() == 1
    # the field and the transform beside their numba peers, timed in the same run
    peers = table.set_index("kernel").speedup_vs_numba
    assert {"field/numba", "transforms/numba"} <= {"/".join(k.split("/")[:2]) for k in kernels}
    for k in kernels:
        if k.startswith(("field/ext/", "transforms/ext/")):
            assert peers[k] > 0 and np.isfinite(peers[k]), k
        else:
            assert np.isnan(peers[k]), k


def test_step_stage_rows_break_a_step_into_its_stages() -> None:
    """On a fake table: the step's row gets its counts and its ratio to the render forward+backward of
    the same splats and size; one row follows a stage with its share of the step; a step without stage
    times keeps its one row; other rows pass unchanged."""
    from gsworkbench.studies.roofline_table import step_stage_rows
    from gsworkbench.train.step_work import STEP, step_stage_work
    from gsworkbench.train.timers import STAGES

    ms = {f"ms_{s}": float(i + 1) for i, s in enumerate(STAGES)} | {"ms_unstaged": 0.5}
    key = {"scene": "trained", "num": 100, "width": 32, "height": 16}
    df = pd.DataFrame([
        {"case": "render/ext/trained/n100/32x16/sh3/forward+backward", **key, "stage": "forward+backward",
         "median_s": 0.04},
        {"case": "train/ext/trained/n100/32x16", **key, "median_s": 0.1, "gaussians": 90, "sh_degree": 3,
         "mean_n_isects": 10.0, "mean_evaluations": 7.0, **ms},
        {"case": "train/ext/dense/n100/32x16", **key, "scene": "dense", "median_s": math.nan},
    ])  # fmt: skip
    out = step_stage_rows(df).set_index("case")
    step = "train/ext/trained/n100/32x16"
    assert list(out.index) == [df.case[0], step, *(f"{step}/{s}" for s in (*STAGES, "unstaged")), df.case[2]]
    assert out.step_over_forward_backward[step] == pytest.approx(0.1 / 0.04)
    assert out.step_over_forward_backward.notna().sum() == 1
    works = step_stage_work(90, 32, 16, 3, 10.0, 7.0)  # the rendered count, not the one asked for
    assert out.flops_per_call[step] == works[STEP]["flops_per_call"]
    for s in STAGES:
        assert out.median_s[f"{step}/{s}"] == pytest.approx(ms[f"ms_{s}"] / 1e3)
        assert out.pct_of_step[f"{step}/{s}"] == pytest.approx(ms[f"ms_{s}"] / 1e3 / 0.1 * 100)
        assert np.isclose(out.bytes_per_call[f"{step}/{s}"], works[s]["bytes_per_call"], equal_nan=True)
    assert math.isnan(out.bytes_per_call[f"{step}/unstaged"]) and math.isnan(out.iqr_s[f"{step}/sh"])


def test_peer_speedups_pair_each_ext_row_with_its_numba_row() -> None:
    from gsworkbench.studies.roofline_table import peer_speedups

    kernels = pd.Series(["field/numba/x/forward", "field/ext/x/forward", "render/ext/y/forward", "adam/fused/z"])
    got = peer_speedups(kernels, pd.Series([3.0, 1.5, 2.0, 1.0]))
    assert got[1] == 2.0 and all(np.isnan(got[i]) for i in (0, 2, 3))


def _tiny_table(real):  # noqa: ANN001, ANN202
    """The table with small, fast ceilings (the real measurement is sized for a quiet machine)."""

    def table(threads, tiny=False, min_run_time=0.3, ceilings=None, progress=True, rounds=3):  # noqa: ANN001, ANN202
        found = ceil.measure_ceilings(threads, repeats=2, repeat_seconds=0.01, triad_bytes=1 << 20)
        return real(threads, tiny, min_run_time, found, progress=False, rounds=rounds)

    return table


def test_hardware_counters_status_names_what_is_missing(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gsworkbench.profiling import counters

    paranoid = tmp_path / "paranoid"
    sources = tmp_path / "devices"
    sources.mkdir()
    monkeypatch.setattr(counters.shutil, "which", lambda name: None)
    assert counters.hardware_counters_status(sources, paranoid) == (
        False, "hardware counters unavailable: the perf tool is not installed (Debian: linux-perf)")
    monkeypatch.setattr(counters.shutil, "which", lambda name: "/usr/bin/perf")
    paranoid.write_text("3\n")
    assert "perf_event_paranoid is 3" in counters.hardware_counters_status(sources, paranoid)[1]
    paranoid.write_text("2\n")
    ok, why = counters.hardware_counters_status(sources, paranoid)
    assert not ok and "no CPU performance-monitoring unit" in why
    (sources / "cpu").mkdir()
    assert counters.hardware_counters_status(sources, paranoid)[0]


def test_highest_ceilings_keeps_the_most_each_roof_was_seen_to_do() -> None:
    a = ceil.MachineCeilings(100.0, 30.0, 2, "avx2", 8, "m")
    b = ceil.MachineCeilings(200.0, 20.0, 2, "avx2", 8, "m")
    got = ceil.highest_ceilings([a, b])
    assert (got.peak_gflops, got.bandwidth_gbs, got.threads) == (200.0, 30.0, 2) and "highest of 2" in got.how
    with pytest.raises(ValueError, match="no measurements"):
        ceil.highest_ceilings([])
