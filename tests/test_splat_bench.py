"""The render benchmark suite runs (quick grid) and summarises; no timing assertions."""

from __future__ import annotations

from conftest import requires_ext


@requires_ext
def test_render_suite_quick_runs() -> None:
    from gsworkbench.bench import get_suite, run_suite

    assert "render" in get_suite("render").name
    df = run_suite("render", quick=True, min_run_time=0.01, progress=False)
    for col in ("backend", "num", "stage", "median_s", "fps", "n_isects", "first_call_peak_rss_mib"):
        assert col in df
    assert "speedup_vs_torch" in df
    assert set(df.backend) == {"ext", "torch"}
    assert "backward" in set(df.stage)
    fwd = df[(df.stage == "forward") & (df.backend == "ext")]
    assert (fwd.fps > 0).all() and (fwd.n_isects > 0).all()


def test_full_grid_is_declared_with_skips() -> None:
    from gsworkbench.bench.suites.render import cases

    full = cases(False)
    names = {c.name for c in full}
    assert "render/ext/n1000000/800x800/sh3/forward" in names
    assert any(c.skip for c in full if c.params["backend"] == "torch")
    assert not any(c.skip for c in full if c.params["backend"] == "ext" and c.params["stage"] == "forward")
