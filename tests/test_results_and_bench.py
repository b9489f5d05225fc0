"""Run folders and metadata, atomic writes, and the benchmark core."""

from __future__ import annotations

import json
import math
import os
import platform
from collections import defaultdict
from importlib.metadata import version

import pandas as pd
import pytest
import torch
from fake_clock import FakeClock

import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
from gsworkbench.bench import Case, get_suite, list_suites, run_cases, run_suite, save_run
from gsworkbench.bench.store import load_run
from gsworkbench.core import atomic, runs
from gsworkbench.field import BACKENDS


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "table.csv"
    atomic.atomic_write_text(path, "old\n")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic.atomic_write_text(path, "new\n")
    assert path.read_text() == "old\n"
    assert not [p for p in tmp_path.iterdir() if p.name != "table.csv"]  # no temporaries left


def test_metadata_records_environment(tmp_path):
    run = runs.new_run_dir("unit", tmp_path)
    assert run.parent == tmp_path and run.name.split("-")[1] == "unit"
    meta = json.loads(runs.write_metadata(run, {"a": 1}).read_text())
    assert meta["parameters"] == {"a": 1}
    for key in ("git_commit", "git_dirty", "packages", "cpu_model", "threads", "time_utc", "python"):
        assert key in meta
    assert meta["packages"]["torch"] == version("torch")  # the versions running, not the pins
    assert meta["python"] == platform.python_version()
    prev = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if prev > 1 else 2)
        threads = json.loads(runs.write_metadata(run, {}).read_text())["threads"]
        assert threads["torch_threads"] == torch.get_num_threads() != prev  # read when written
    finally:
        torch.set_num_threads(prev)
    assert runs.new_run_dir("unit", tmp_path) != run


def test_registry_knows_the_field_suite():
    assert "field" in list_suites()
    with pytest.raises(ValueError, match="unknown benchmark suite 'nope'"):
        get_suite("nope")


def test_run_cases_and_store(tmp_path):
    calls = []

    def setup():
        calls.append("setup")
        return lambda: sum(range(100))

    cases = [Case("a", {"backend": "x", "n": 1}, setup), Case("b", {"backend": "y", "n": 2}, setup, skip="not here")]
    df = run_cases(cases, threads=1, min_run_time=0.01, progress=False)
    assert calls == ["setup"]
    assert df.loc[0, "median_s"] > 0 and df.loc[0, "runs"] >= 1 and df.loc[0, "threads"] == 1
    assert df.loc[1, "skipped"] == "not here" and pd.isna(df.loc[1, "median_s"])
    run = save_run("unit", df, {"threads": 1}, root=tmp_path)
    tables = load_run(run)
    assert list(tables) == ["unit"] and len(tables["unit"]) == 2
    assert json.loads((run / "metadata.json").read_text())["suite"] == "unit"


def test_backends_on_one_input_are_timed_in_interleaved_rounds():
    """On a fake clock (the call counts and the medians must not depend on how busy the machine is)."""
    log = []
    clock = FakeClock()

    def make(tag, seconds):
        def setup():
            log.append(("setup", tag))
            return lambda: log.append(tag) or clock.work(seconds)

        return setup

    cases = [
        Case("x1", {"backend": "x", "n": 1}, make("x1", 1e-5)),
        Case("x2", {"backend": "x", "n": 2}, make("x2", 1e-5)),
        Case("y1", {"backend": "y", "n": 1}, make("y1", 1e-4)),
    ]
    df = run_cases(cases, threads=1, min_run_time=0.02, progress=False, clock=clock)
    assert list(df["case"]) == ["x1", "x2", "y1"]  # rows in the given order
    assert [e for e in log if isinstance(e, tuple)] == [("setup", "x1"), ("setup", "y1"), ("setup", "x2")]
    calls = [e for e in log if not isinstance(e, tuple)]
    # x1 and y1 alternate block by block (after their warm-up and sizing calls): y1 runs between x1's blocks
    first_y1, last_x1 = calls.index("y1"), len(calls) - 1 - calls[::-1].index("x1")
    assert first_y1 < last_x1
    assert (df.runs == 10).all() and (df.median_s > 0).all()
    assert df.set_index("case").median_s["y1"] > df.set_index("case").median_s["x1"]


def test_field_suite_quick_runs_every_backend():
    df = run_suite("field", quick=True, threads=1, min_run_time=0.01, progress=False)
    timed = df[df.median_s.notna()]
    assert {"loop", "vectorized", "torch"} <= set(timed.backend)
    assert (timed.pairs_per_s > 0).all()
    assert (df[df.backend == "loop"].speedup_vs_loop == 1.0).all()
    assert set(df["mode"]) == {"forward", "forward+backward", "train-step"}


def test_field_suite_full_grid_compares_like_with_like():
    """Every row of the full grid can be told apart and compared: unique names; at every size and mode
    both torch and ext run eagerly (the comparison the suite is for); every compiled case has its eager
    twin (speedup_vs_eager); every field backend runs somewhere."""
    cases = get_suite("field").cases(False)
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "duplicate case names would merge rows of the results table"
    runs = defaultdict(set)
    for c in cases:
        p = c.params
        runs[(p["N"], p["B"], p["covariance"], p["mode"])].add((p["backend"], p["compile"]))
    for key, group in runs.items():
        assert {("torch", "eager"), ("ext", "eager")} <= group, key
        assert all((backend, "eager") in group for backend, _ in group), key
    assert {c.params["backend"] for c in cases} == set(BACKENDS)



@pytest.mark.requires_ext
def test_train_suite_quick_runs_each_scene_and_marks_the_real_size_cases():
    """The quick grid trains each scene kind at 2,000 Gaussians (ext, and torch on the surface case)
    and records the stage times, the views' counts and the first step's memory per stage; the real-size
    cases are in its table, skipped as full-grid only. No timing is asserted."""
    from gsworkbench.bench.peak_rss import rss_measurable
    from gsworkbench.train.timers import STAGES

    df = run_suite("train", quick=True, threads=1, min_run_time=0.01, progress=False)
    ran = df[df.skipped.isna()] if "skipped" in df else df
    assert set(ran.scene) == {"surface", "dense", "random-init", "volumetric", "trained"}
    assert set(ran.backend) == {"ext", "torch"}
    assert (ran.median_s > 0).all() and (ran.n_isects > 0).all()
    # the built kinds have the count asked for; a trained run may end below it
    assert (ran[ran.scene != "trained"].gaussians == 2_000).all()
    assert ran[ran.scene == "trained"].gaussians.between(1, 2_000).all()
    for s in STAGES:
        assert f"ms_{s}" in ran and f"peak_rss_mib_{s}" in ran
    assert "ms_unstaged" in ran and (ran.sh_degree == 3).all()
    # the roofline's view counts: means over the train views, the blended evaluations from the ext forward
    ext = ran[ran.backend == "ext"]
    assert (ext.mean_n_isects > 0).all() and (ext.mean_evaluations > 0).all()
    assert ran[ran.backend == "torch"].mean_evaluations.isna().all()
    if rss_measurable():
        assert (ran.first_step_peak_rss_mib > 0).all()
        stages = ran[[f"peak_rss_mib_{s}" for s in STAGES]]
        assert (stages.max(axis=1) <= ran.first_step_peak_rss_mib + 1e-9).all()
        assert (ran.first_step_peak_rss_total_mib > ran.first_step_peak_rss_mib).all()
    big = df[df.num >= 100_000]
    assert len(big) == 8 and big.skipped.str.contains("full grid only").all()
    assert {(k, n) for k, n in zip(big.scene, big.num)} == {
        ("surface", 300_000), ("surface", 1_000_000), ("dense", 300_000), ("random-init", 100_000),
        ("volumetric", 100_000), ("trained", 100_000)}  # fmt: skip
    assert set(zip(big.width, big.height)) == {(800, 800)}


def test_train_suite_full_grid_runs_the_real_size_cases():
    """In the full grid the real-size cases run (ext): 300k and 1M on surfaces, the trained-like and
    the random-init scenes, all at 800x800; only the torch reference is sub-sampled."""
    cases = get_suite("train").cases(False)
    names = [c.name for c in cases]
    assert len(set(names)) == len(names)
    ext = {(c.params["scene"], c.params["num"], c.params["width"]) for c in cases if c.params["backend"] == "ext"}
    assert {("surface", 300_000, 800), ("surface", 1_000_000, 800), ("dense", 300_000, 800),
            ("random-init", 100_000, 800), ("volumetric", 100_000, 800), ("trained", 100_000, 800)} <= ext  # fmt: skip
    assert all(c.skip is None for c in cases if c.params["backend"] == "ext")
    assert all("torch reference" in c.skip for c in cases if c.skip)


def test_scaling_specs_fit_each_scene_separately():
    """The train suite's scaling specs fit one exponent per scene kind: the surface cases from 10k to
    1M at 800x800 form one series; a kind measured at one size is not fitted into it."""
    from gsworkbench.bench.scaling import SPECS, scaling_fits

    rows = [dict(backend="ext", scene="surface", num=n, width=800, height=800, ms_per_step=1e-3 * n)
            for n in (10_000, 100_000, 300_000, 1_000_000)]  # fmt: skip
    rows += [dict(backend="ext", scene="dense", num=300_000, width=800, height=800, ms_per_step=900.0)]
    fits = scaling_fits(pd.DataFrame(rows), SPECS["train"][0])
    assert len(fits) == 1 and "scene=surface" in fits.series[0]
    assert fits.exponent[0] == pytest.approx(1.0)


def test_adam_suite_quick_runs():
    """The adam suite steps the splat groups with each implementation (no timing asserted)."""
    df = run_suite("adam", quick=True, threads=1, min_run_time=0.01, progress=False)
    assert set(df.backend) == {"fused", "foreach", "single", "visible"}
    assert (df.median_s > 0).all() and (df[df.backend == "fused"].x_fused == 1.0).all()
    assert set(df[df.backend == "visible"].visible) == {1.0, 0.5}


def test_cli_bench_writes_results(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "GSW_RESULTS_DIR": str(tmp_path)}
    cmd = [
        sys.executable,
        "-m",
        "gsworkbench.cli.main",
        "bench",
        "field",
        "--quick",
        "--threads",
        "1",
        "--min-run-time",
        "0.01",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert "speedup_vs_vectorized" in out.stdout and "pairs_per_s" in out.stdout
    (run,) = list(tmp_path.iterdir())
    assert (run / "field.csv").exists() and (run / "metadata.json").exists()
    bad = subprocess.run([sys.executable, "-m", "gsworkbench.cli.main", "bench", "nope"], capture_output=True,
                         text=True)  # fmt: skip
    assert bad.returncode == 2 and "invalid choice: 'nope'" in bad.stderr and "'all'" in bad.stderr


def test_a_cases_extras_join_its_row():
    """A setup returns the callable with its extras: a mapping now, or a callable read after the timing."""
    from gsworkbench.bench import Prepared

    calls = []

    def counted():
        calls.append(1)

    cases = [
        Case("fixed", {"backend": "x", "n": 1}, lambda: Prepared(lambda: None, {"n_items": 7})),
        Case("late", {"backend": "x", "n": 2}, lambda: Prepared(counted, lambda: {"calls_seen": len(calls)})),
        Case("bare", {"backend": "x", "n": 3}, lambda: (lambda: None)),
    ]
    df = run_cases(cases, threads=1, min_run_time=0.01, progress=False).set_index("case")
    assert df.loc["fixed", "n_items"] == 7 and pd.isna(df.loc["late", "n_items"])
    assert df.loc["late", "calls_seen"] == len(calls) > 3  # counted after the warm-up and every round
    assert pd.isna(df.loc["bare", "n_items"]) and df.loc["bare", "median_s"] > 0
    with pytest.raises(TypeError, match="must return a Prepared or a callable"):
        run_cases([Case("bad", {}, lambda: 3)], threads=1, min_run_time=0.01, progress=False)


def test_timing_stats_are_torch_benchmarks_median_and_iqr():
    from gsworkbench.bench import timing_stats

    s = timing_stats([4.0, 1.0, 3.0, 2.0, 5.0], calls_per_run=7)
    assert (s["median_s"], s["iqr_s"], s["runs"], s["calls_per_run"]) == (3.0, 2.0, 5, 7)
    assert s["samples_s"] == [4.0, 1.0, 3.0, 2.0, 5.0]  # in round order, for the significance tests
    one = timing_stats([2.5])
    assert one["median_s"] == 2.5 and math.isnan(one["iqr_s"])  # one round: no spread, not 0
    with pytest.raises(ValueError, match="at least one sample"):
        timing_stats([])


def test_overhead_suite_times_single_calls():
    """Each case: the median and IQR of single calls (quick: 50), with the threads it ran on."""
    from gsworkbench._ext import has_ext

    if not has_ext():
        pytest.skip("gsworkbench._C not built")
    df = run_suite("overhead", quick=True, threads=1, progress=False)
    assert list(zip(df.op, df["mode"])) == [(op, m) for op in ("field", "rasterize")
                                            for m in ("forward", "forward+backward")]  # fmt: skip
    assert (df.runs == 50).all() and (df.calls_per_run == 1).all() and (df.threads == 1).all()
    assert (df.median_us > 0).all() and df.iqr_us.notna().all()
    assert all(len(s) == 50 for s in df.samples_s)
