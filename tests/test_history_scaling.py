"""Scaling exponents, suite history over runs, and implementation line-ups."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest
from fake_clock import FakeClock

from gsworkbench.bench import Case, run_cases, save_run
from gsworkbench.bench.history import plot_history, suite_history
from gsworkbench.bench.scaling import SPECS, ScalingSpec, departure_note, fit_exponent, plot_scaling, scaling_fits

matplotlib.use("Agg")


def test_fitted_exponents_of_linear_and_quadratic_workloads():
    """Synthetic O(n) and O(n^2) workloads timed through the runner on a FakeClock (calls of c*n and
    c*n^2 seconds with a 2% spread, whatever the machine's load): the fitted exponents come out near 1
    and 2."""
    clock = FakeClock()
    cases = []
    for n in (1, 2, 4):
        for backend, seconds in (("linear", 8e-3 * n), ("quadratic", 2e-3 * n * n)):
            cases.append(Case(f"{backend}/{n}", {"backend": backend, "n": n}, clock.case(seconds)))
    df = run_cases(cases, threads=1, min_run_time=0.2, progress=False, clock=clock)
    k_lin, _ = fit_exponent(df[df.backend == "linear"].n, df[df.backend == "linear"].median_s)
    k_quad, _ = fit_exponent(df[df.backend == "quadratic"].n, df[df.backend == "quadratic"].median_s)
    assert 0.9 < k_lin < 1.1, k_lin
    assert 1.8 < k_quad < 2.2, k_quad


def test_fit_exponent_exact_and_notes(seed):
    rng = np.random.default_rng(seed)
    x = np.geomspace(1e3, 1e6, 6)
    k, se = fit_exponent(x, 3e-9 * x**1.5 * rng.lognormal(0, 0.01, x.size))
    assert k == pytest.approx(1.5, abs=0.03) and se < 0.03
    with pytest.raises(ValueError, match="two distinct"):
        fit_exponent([5, 5], [1, 2])
    assert departure_note(-1.02, -1.0) == ""
    assert "super-linear" in departure_note(-1.4, -1.0)  # FPS falls faster than the work grows
    assert "super-linear" in departure_note(1.4, 1.0, rate=False)  # time grows faster than the work
    assert "overheads" in departure_note(-0.5, -1.0)


def test_scaling_plot_of_a_render_like_table():
    nums = np.array([1e4, 1e5, 1e6])
    df = pd.DataFrame({"backend": "ext", "sh_degree": 3, "width": 128, "height": 128, "stage": "forward",
                       "num": nums, "fps": 1e6 / nums**1.3})  # fmt: skip
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    fits = plot_scaling(ax, df, SPECS["render"][0])
    plt.close(fig)
    assert len(fits) == 1 and fits.exponent[0] == pytest.approx(-1.3)
    assert "super-linear" in fits.note[0]
    spec = ScalingSpec("t", "pixels", "fps", -1.0, "px", "fps", [], {}, lambda d: d.width * d.height)
    assert scaling_fits(df, spec).empty  # one resolution: nothing to fit


def _run(tmp_path, delay: float, seed: int):
    clock = FakeClock(seed)
    cases = [Case("h/a", {"backend": "a"}, clock.case(delay))]
    df = run_cases(cases, threads=1, min_run_time=0.3, progress=False, clock=clock)
    return save_run("hist", df, {"suite": "hist"}, root=tmp_path)


def test_history_marks_significant_changes(tmp_path):
    old = [_run(tmp_path, delay, seed) for seed, delay in enumerate((0.01, 0.01, 0.02))][0]
    table = pd.read_csv(old / "hist.csv").drop(columns="samples_s")  # an old run without samples
    table.to_csv(old / "hist.csv", index=False)
    h = suite_history("hist", tmp_path)
    assert list(h.run_index) == [0, 1, 2]
    assert list(h.has_samples) == [False, True, True]
    assert h.change.tolist()[:2] == ["first run", "no samples"]
    assert h.change.tolist()[2] == "slower"
    fig = plot_history(h, footer="unit test")
    assert fig.axes[0].get_ylabel() == "time per call (ms)"
    with pytest.raises(ValueError, match="no runs of suite 'nope'"):
        suite_history("nope", tmp_path)


def test_external_rasterizer_in_the_render_lineup():
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import get_suite
    from gsworkbench.splat import rasterize
    from gsworkbench.studies import lineup

    def mine(*args, **kw):
        return rasterize(*args, backend="torch", **kw)

    def wrong(*args, **kw):
        img, alpha, meta = rasterize(*args, backend="torch", **kw)
        return img * 1.01, alpha, meta

    with pytest.raises(ValueError, match="unknown op"):
        lineup.register_implementation("nope", "x", mine)
    with pytest.raises(ValueError, match="taken"):
        lineup.register_implementation("rasterize", "ext", mine)
    lineup.register_implementation("rasterize", "mine", mine)
    lineup.register_implementation("rasterize", "wrong", wrong)
    try:
        cases = [c for c in get_suite("render").cases(True) if c.params["sh_degree"] == 0]
        ours = {c.name: c for c in cases if c.params["backend"] in ("mine", "wrong")}
        assert all(c.skip is None for n, c in ours.items() if "/mine/" in n)
        assert all("differs from the torch reference" in c.skip for n, c in ours.items() if "/wrong/" in n)
        picked = [c for c in cases if c.params["stage"] == "forward" and c.params["backend"] in ("torch", "mine")]
        df = run_cases(picked, threads=1, min_run_time=0.02, progress=False)
        assert df.median_s.notna().all() and set(df.backend) == {"torch", "mine"}
    finally:
        lineup.unregister_implementation("rasterize", "mine")
        lineup.unregister_implementation("rasterize", "wrong")
