"""The render benchmark suite runs (quick grid) and summarises; no timing assertions."""

from __future__ import annotations

from conftest import requires_ext


@requires_ext
def test_render_suite_quick_runs() -> None:
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import run_suite

    df = run_suite("render", quick=True, min_run_time=0.01, progress=False)
    for col in ("backend", "num", "stage", "median_s", "fps", "n_isects", "first_call_peak_rss_mib"):
        assert col in df
    assert "speedup_vs_torch" in df
    assert set(df.backend) == {"ext", "torch"}
    assert "backward" in set(df.stage)
    fwd = df[(df.stage == "forward") & (df.backend == "ext") & df.skipped.isna()]
    assert (fwd.fps > 0).all() and (fwd.n_isects > 0).all()
    # the real-size scenes: each kind runs small here, and its real-size cases are listed as skipped
    assert set(fwd.scene) == {"synthetic", "surface", "dense", "random-init", "volumetric", "cloud", "trained"}
    kinds = ["surface", "dense", "random-init", "volumetric", "cloud", "trained"]
    big = df[df.scene.isin(kinds) & (df.num >= 100_000)]
    assert len(big) == 16 and big.skipped.str.contains("full grid only").all()  # 8 scenes x 2 sizes
    # a trained run may end below the count asked for; the rendered count says so
    trained = fwd[fwd.scene == "trained"]
    assert len(trained) == 1 and 0 < trained.gaussians.iloc[0] <= 2_000
    assert {(w, h) for w, h in zip(big.width, big.height)} == {(800, 800), (1920, 1080)}


def test_full_grid_skips_only_the_large_end() -> None:
    """The full grid: unique names; ext forward runs everywhere, up to the largest configuration; each
    skip says why; the torch reference is sub-sampled from the large end only (where a torch case
    runs, every smaller one of its kind runs too), so every torch timing has ext beside it."""
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import get_suite

    full = get_suite("render").cases(False)
    names = [c.name for c in full]
    assert len(set(names)) == len(names)
    ext_fwd = [c.params for c in full if c.params["backend"] == "ext" and c.params["stage"] == "forward"]
    assert not any(c.skip for c in full if c.params["backend"] == "ext" and c.params["stage"] == "forward")
    top = max((c.params for c in full), key=lambda p: (p["num"], p["width"] * p["height"], p["sh_degree"]))
    assert any(all(p[k] == top[k] for k in ("num", "width", "height", "sh_degree")) for p in ext_fwd)
    assert all(isinstance(c.skip, str) and c.skip for c in full if c.skip is not None)
    torch_cases = [c for c in full if c.params["backend"] == "torch"]
    assert any(c.skip for c in torch_cases) and any(not c.skip for c in torch_cases)
    kind = ("stage", "sh_degree", "compile")
    for ran in (c.params for c in torch_cases if not c.skip):
        for c in torch_cases:
            p = c.params
            smaller = p["num"] <= ran["num"] and p["width"] * p["height"] <= ran["width"] * ran["height"]
            if smaller and all(p[k] == ran[k] for k in kind):
                assert not c.skip, (c.name, c.skip, "skipped, though the larger", ran, "runs")
    ext_names = {n.replace("render/ext/", "") for n in names if n.startswith("render/ext/")}
    assert all(c.name.replace("render/torch/", "") in ext_names for c in torch_cases if not c.skip)


def test_full_grid_has_the_real_size_scenes() -> None:
    """The real-size scenes run (unskipped) in the full grid: ext forward of each kind at 800x800 and
    1920x1080, surface at 300k and 1M Gaussians, dense at 100k (issue 21's render target) and 300k."""
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import get_suite

    full = [c for c in get_suite("render").cases(False) if c.params["scene"] != "synthetic"]
    got = {(c.params["scene"], c.params["num"], c.params["width"], c.params["height"]) for c in full}
    sizes = ((800, 800), (1920, 1080))
    kinds = (
        ("surface", 300_000), ("surface", 1_000_000), ("dense", 100_000), ("dense", 300_000), ("random-init", 100_000),
        ("volumetric", 100_000), ("cloud", 100_000), ("trained", 100_000),
    )  # fmt: skip
    assert got == {(k, n, w, h) for k, n in kinds for w, h in sizes}
    assert all(c.skip is None and c.params["stage"] == "forward" and c.params["backend"] == "ext" for c in full)


@requires_ext
def test_stage_cases_list_tiles_as_rasterize_does() -> None:
    """The isect and rasterize stage cases time the lists ``rasterize`` makes: on a crowded view the ext
    lists are cut at saturation there, so the stage's intersections are the forward's, fewer than the
    whole lists'."""
    import torch

    from gsworkbench.core.cameras import intrinsics_from_fov, look_at
    from gsworkbench.splat import _torch_impl, ops, rasterize
    from gsworkbench.studies.suites.render import _stage_call

    g = torch.Generator().manual_seed(3)
    n, width, height = 600, 128, 128
    means = 0.3 * torch.randn(n, 3, generator=g)
    quats = torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1)
    scales = torch.full((n, 3), 0.4)
    opac = torch.full((n,), 0.9)
    sh = 0.3 * torch.randn(n, 16, 3, generator=g)
    vm = look_at((0.0, 0.0, 3.0), (0.0, 0.0, 0.0))[None]
    Ks = intrinsics_from_fov(width, height, 60.0)[None]
    inputs = (means, quats, scales, opac, sh, vm)
    _, n_stage, _ = _stage_call("isect", inputs, Ks, width, height, 3, "ext")
    with torch.no_grad():
        meta = rasterize(means, quats, scales, opac, sh, vm, Ks, width, height, sh_degree=3)[2]
    assert n_stage == meta["n_isects"]
    radii, m2, depths, conics, _ = ops.project_gaussians(means, quats, scales, vm, Ks, width, height)
    whole = _torch_impl.isect_tiles(m2, radii, depths, 16, 8, 8, conics, opac[None])[2]
    assert n_stage < whole.numel(), "the view is crowded enough for the cut"
