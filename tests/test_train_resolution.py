"""Coarse-to-fine training (TrainConfig.resolution_schedule) and the converge bench suite.

No timing is asserted: the time-to-target logic runs on a fake clock."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from conftest import ext_built, requires_ext

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet
from gsworkbench.train import TrainConfig, Trainer, preset, preset_scene
from gsworkbench.train.resolution import downsample, factor_at, parse_schedule, reduced_size, scale_intrinsics


@pytest.fixture(scope="module")
def scene():
    from gsworkbench.synthetic import builtin_scene

    return builtin_scene(**preset_scene("smoke"))  # 64x64, 24 + 4 views, RGBA (alphas), cached


def _backend() -> str:
    return "ext" if ext_built() else "torch"


def _smooth_splats(n: int = 12, seed: int = 0) -> SplatSet:
    """A few large, smooth, half-transparent Gaussians around the object scene's origin (sh degree 0)."""
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g) - 0.5) * 1.0
    quats = torch.randn(n, 4, generator=g)
    log_scales = torch.log(torch.full((n, 3), 0.18) * torch.exp(0.2 * torch.randn(n, 3, generator=g)))
    opac = gaussians.logit_from_opacity(torch.full((n,), 0.5))
    rgb = torch.rand(n, 3, generator=g)
    return SplatSet(means, quats, log_scales, opac, gaussians.rgb_to_sh_dc(rgb), torch.zeros(n, 0, 3))


# ---- the schedule -----------------------------------------------------------------------------------


def test_factor_at_follows_the_schedule():
    s = ((1000, 4), (2000, 2))
    assert [factor_at(s, k) for k in (0, 999, 1000, 1999, 2000, 10**6)] == [4, 4, 2, 2, 1, 1]
    assert factor_at((), 0) == factor_at((), 5000) == 1
    assert factor_at(((10, 3),), 9) == 3 and factor_at(((10, 3),), 10) == 1


def test_config_normalises_text_and_lists():
    assert TrainConfig().resolution_schedule == ()
    cfg = TrainConfig(resolution_schedule="1000:4, 2000:2")
    assert cfg.resolution_schedule == ((1000, 4), (2000, 2))
    assert parse_schedule("") == ()
    # a config read back from JSON (metrics.json) has lists: it comes back equal
    again = TrainConfig(**json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and again.resolution_schedule == ((1000, 4), (2000, 2))
    assert cfg.to_dict()["resolution_schedule"] == ((1000, 4), (2000, 2))  # recorded with the config


def test_command_line_text_reaches_the_config():
    from gsworkbench.cli import main as cli

    params = cli.profile_params([["resolution_schedule", "1000:4"], ["iterations", "20"]])
    assert params == {"resolution_schedule": "1000:4", "iterations": 20}  # not YAML's base-60 60004
    assert preset("smoke", **params).resolution_schedule == ((1000, 4),)


@pytest.mark.parametrize(
    "bad",
    [((1000, 0),), ((1000, 4), (500, 2)), ((1000, 4), (1000, 2)), ((1000, 2.0),), ((True, 2),), ((0, 2),),
     ((1000,),), (1000, 4), 5, "1000-4", "1000:x", "4"],
)  # fmt: skip
def test_bad_schedules_raise(bad):
    with pytest.raises(ValueError, match="resolution_schedule"):
        TrainConfig(resolution_schedule=bad)


def test_a_factor_below_the_ssim_window_is_refused(scene):
    with pytest.raises(ValueError, match="SSIM window"):
        Trainer(scene, preset("smoke", resolution_schedule=((10, 8),)))  # 64 / 8 = 8 px < 11


# ---- images and intrinsics --------------------------------------------------------------------------


def test_downsample_is_the_box_average():
    g = torch.Generator().manual_seed(0)
    img = torch.rand(2, 8, 12, 3, generator=g)
    want = F.avg_pool2d(img.permute(0, 3, 1, 2), 4).permute(0, 2, 3, 1)
    torch.testing.assert_close(downsample(img, 3, 2), want)
    odd = torch.rand(10, 14, 1, generator=g)  # sizes that do not divide: area interpolation
    w, h = reduced_size(14, 10, 4)
    assert (w, h) == (4, 3)
    got = downsample(odd, w, h)
    want = F.interpolate(odd.permute(2, 0, 1)[None], size=(h, w), mode="area")[0].permute(1, 2, 0)
    torch.testing.assert_close(got, want)
    assert downsample(img, 12, 8) is img


def test_scale_intrinsics_keeps_pixel_corners():
    K = torch.tensor([[100.0, 0.0, 32.0], [0.0, 90.0, 24.0], [0.0, 0.0, 1.0]])
    half = scale_intrinsics(K, 64, 48, 32, 24)
    torch.testing.assert_close(half, torch.tensor([[50.0, 0.0, 16.0], [0.0, 45.0, 12.0], [0.0, 0.0, 1.0]]))


@pytest.mark.parametrize("background", ["scene", "random"])
def test_targets_are_the_avg_pooled_images(scene, background):
    """The step's target at factor 2 is the box average of the full-size target, alpha masks included
    (a random background recomposites with the reduced masks)."""
    cfg = preset("smoke", background=background, resolution_schedule=((100, 2),))
    trainer = Trainer(scene, cfg)
    view = int(scene.train_ids[3])
    state = trainer.gen.get_state()
    full, bg_full = trainer._target(view, 1)
    trainer.gen.set_state(state)  # the same random background colour
    half, bg_half = trainer._target(view, 2)
    torch.testing.assert_close(bg_half, bg_full)
    assert half.shape == (32, 32, 3)
    want = F.avg_pool2d(full.permute(2, 0, 1)[None], 2)[0].permute(1, 2, 0)
    torch.testing.assert_close(half, want, atol=1e-6, rtol=1e-5)
    assert trainer._target(view, 1)[0].data_ptr() == scene.images[view].data_ptr() or background == "random"


def test_reduced_renders_match_the_full_render(scene):
    """At factor 2 the projected means are the full-size ones / 2 (exactly, up to float rounding), and
    the render of smooth Gaussians is close to the box average of the full-size render."""
    trainer = Trainer(scene, preset("smoke", backend=_backend(), sh_degree=0), _smooth_splats())
    view = int(scene.train_ids[0])
    with torch.no_grad():
        full, _, meta_full = trainer.render([view], sh_degree=0)
        half, _, meta_half = trainer.render([view], sh_degree=0, factor=2)
    assert (meta_half["width"], meta_half["height"]) == (32, 32) and half.shape == (1, 32, 32, 3)
    visible = (meta_full["radii"] > 0) & (meta_half["radii"] > 0)
    assert int(visible.sum()) >= 6
    torch.testing.assert_close(meta_half["means2d"][visible], meta_full["means2d"][visible] / 2, atol=1e-3, rtol=1e-5)
    pooled = F.avg_pool2d(full.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
    err = (half - pooled).abs()
    assert float(err.mean()) < 0.01 and float(err.max()) < 0.08, (float(err.mean()), float(err.max()))


# ---- training -----------------------------------------------------------------------------------------


def test_training_with_a_schedule_records_the_factor(scene):
    cfg = preset("smoke", iterations=30, refine_start=4, refine_every=5, refine_stop=28, sh_degree_interval=10,
                 backend=_backend(), resolution_schedule="10:4,20:2")  # fmt: skip
    trainer = Trainer(scene, cfg)
    hist = trainer.run()
    assert hist["resolution_factor"].tolist() == [4] * 10 + [2] * 10 + [1] * 10
    assert torch.isfinite(torch.tensor(hist["loss"].to_numpy())).all()
    evaluation, renders = trainer.evaluate()  # held-out views: always at full size
    assert all(img.shape == (64, 64, 3) for img in renders.values())
    assert evaluation["psnr_db"].notna().all()


def test_schedule_off_is_the_full_size_step(scene):
    """Off (the default) and a schedule of factor 1 train identically (same losses, same parameters),
    and the off path trains on the scene's own images at full size."""
    prev = torch.get_num_threads()
    torch.set_num_threads(1)  # the ext backward sums per thread: one thread makes runs bit-reproducible
    try:
        cfg = preset("smoke", iterations=8, refine_start=2, refine_every=3, seed=5, backend=_backend())
        runs = [Trainer(scene, c) for c in (cfg, replace(cfg, resolution_schedule=((6, 1),)))]
        hists = [t.run() for t in runs]
    finally:
        torch.set_num_threads(prev)
    assert hists[0]["loss"].tolist() == hists[1]["loss"].tolist()
    assert (hists[0]["resolution_factor"] == 1).all()
    for name, p in runs[0].model.params.items():
        assert torch.equal(p, runs[1].model.params[name]), name
    view = int(scene.train_ids[0])
    assert runs[0]._target(view)[0].data_ptr() == scene.images[view].data_ptr()


# ---- the converge suite ---------------------------------------------------------------------------------


class _Clock:
    """Seconds that only the wrapped training steps (1 s each) and evaluations (100 s each) advance."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_converge_run_counts_training_time_only(scene):
    from gsworkbench.studies.converge import ConvergeRun

    clock = _Clock()
    trainer = Trainer(scene, preset("smoke", iterations=40, backend=_backend()))
    step = trainer.step

    def timed_step():
        clock.now += 1.0
        return step()

    trainer.step = timed_step
    run = ConvergeRun(trainer, -1.0, eval_every=5, max_steps=40, probe_views=2, clock=clock)  # reached at once
    view_psnrs = run.view_psnrs

    def slow_eval(views):
        clock.now += 100.0 * len(views)
        return view_psnrs(views)

    run.view_psnrs = slow_eval
    out = run.run()
    assert out["reached"] and out["steps_to_target"] == 5 and out["seconds_to_target"] == 5.0
    assert out["minutes_to_-1db"] == 5.0 / 60 and out["steps_to_-1db"] == 5
    assert out["train_seconds"] == 5.0 and out["steps"] == 5
    # the first evaluation is of all 4 test views (the probe's 2, then the other 2): 400 s of evaluation
    assert out["eval_seconds"] == 400.0 and out["eval_share"] == pytest.approx(400.0 / 405.0)
    assert out["full_evals"] == 1 and out["probe_views"] == 2
    assert json.loads(out["curve"])[-1][3] == 4
    assert out["final_test_psnr_db"] == pytest.approx(run.test_psnr(), abs=1e-3)
    capped = ConvergeRun(Trainer(scene, preset("smoke", backend=_backend())), 99.0, eval_every=4, max_steps=10)
    res = capped.run()
    assert not res["reached"] and res["steps"] == 10 and res["steps_to_target"] != res["steps_to_target"]
    assert res["minutes_to_99db"] != res["minutes_to_99db"]  # NaN: not reached within the caps
    assert [c[0] for c in json.loads(res["curve"])] == [4, 8, 10]
    with pytest.raises(ValueError, match="eval_every"):
        ConvergeRun(trainer, 25.0, eval_every=0, max_steps=10)
    with pytest.raises(ValueError, match="targets_db"):
        ConvergeRun(trainer, [], eval_every=1, max_steps=10)
    with pytest.raises(ValueError, match="probe_views"):
        ConvergeRun(trainer, 25.0, eval_every=1, max_steps=10, probe_views=0)


class _ScriptedTrainer:
    """What ConvergeRun reads of a trainer, with steps that only count (1 s each on the run's clock)."""

    def __init__(self, scene, clock: _Clock) -> None:
        self.scene, self.clock = scene, clock
        self.eval_bg = torch.ones(3)
        self.step_index, self.rows, self.model = 0, [], [0] * 7

    def step(self) -> None:
        self.clock.now += 1.0
        self.step_index += 1
        self.rows.append({"t_step": 1.0, "resolution_factor": 1})


def _scripted_run(scene, targets, probe_bonus: float, **kwargs):
    """A run whose views' PSNR is steps / 2, plus ``probe_bonus`` on the probe's views and minus it on
    the others (so the whole set's mean is steps / 2)."""
    from gsworkbench.studies.converge import ConvergeRun

    clock = _Clock()
    trainer = _ScriptedTrainer(scene, clock)
    run = ConvergeRun(trainer, targets, clock=clock, **kwargs)
    evaluated = []

    def view_psnrs(views):
        evaluated.append((trainer.step_index, list(views)))
        return [trainer.step_index / 2 + (probe_bonus if v in run.probe else -probe_bonus) for v in views]

    run.view_psnrs = view_psnrs
    return run, evaluated


def test_converge_run_reaches_each_target_on_full_evaluations_only(scene):
    """Between full evaluations only the probe is rendered; a probe above a target is not a crossing;
    the whole set is evaluated when the probe (corrected by the last full offset) nears the next target."""
    from gsworkbench.studies.converge import spread_views

    run, evaluated = _scripted_run(scene, (15.0, 10.0), 1.0, eval_every=2, max_steps=40, probe_views=2,
                                   full_every=100, margin_db=0.5)  # fmt: skip
    out = run.run()
    test_ids = [int(v) for v in scene.test_ids]
    assert run.probe == spread_views(test_ids, 2) == [test_ids[1], test_ids[3]]
    curve = json.loads(out["curve"])
    full = [c for c in curve if c[3] == len(test_ids)]
    # the first evaluation, then where the predicted mean (probe - 1 dB) is within 0.5 dB of 10, then of 15
    assert [c[0] for c in full] == [2, 20, 30] and [c[2] for c in full] == [1.0, 10.0, 15.0]
    assert all(c[3] == 2 for c in curve if c not in full) and len(curve) == 15
    assert [c for c in curve if c[0] == 18][0][2] == 10.0  # the probe said 10 dB at step 18: no crossing
    assert out["steps_to_10db"] == 20 and out["minutes_to_10db"] == 20 / 60
    assert out["steps_to_15db"] == 30 and out["minutes_to_15db"] == 30 / 60
    assert out["steps_to_target"] == 20 and out["seconds_to_target"] == 20.0 and out["reached"]
    assert out["final_test_psnr_db"] == 15.0 and out["full_evals"] == 3 and out["steps"] == 30
    # a full evaluation renders only the views the probe did not
    assert all(len(views) == 2 for _, views in evaluated)
    assert out["eval_seconds"] == 0.0 and out["eval_share"] == 0.0  # the fake clock does not move in evaluations


def test_converge_run_refreshes_the_full_set_and_ends_on_one(scene):
    run, _ = _scripted_run(scene, 99.0, 0.0, eval_every=3, max_steps=20, probe_views=1, full_every=3)
    out = run.run()
    curve = json.loads(out["curve"])
    assert [c[0] for c in curve] == [3, 6, 9, 12, 15, 18, 20]
    # the first, then every third slice, and the last
    assert [c[0] for c in curve if c[3] == 4] == [3, 12, 20] and out["full_evals"] == 3
    assert not out["reached"] and out["minutes_to_99db"] != out["minutes_to_99db"]
    assert out["final_test_psnr_db"] == 10.0
    every, _ = _scripted_run(scene, 99.0, 0.0, eval_every=5, max_steps=10, probe_views=4)
    assert [c[3] for c in json.loads(every.run()["curve"])] == [4, 4]  # a probe of every view is the full set


def test_converge_curves_plot():
    import matplotlib.pyplot as plt
    import pandas as pd

    from gsworkbench.core.figures import FOOTER_LABEL
    from gsworkbench.studies.converge import plot_converge_curves

    rows = [dict(width=800, height=800, preset=p, schedule=s, init_scale=k, minutes_to_25db=1.0, minutes_to_35db=9.0,
                 curve=json.dumps([[100, 60.0, 20.0, 10], [200, 120.0, 24.0, 3], [300, 180.0, 26.0, 10]]))
            for p, s, k in (("nerf_synthetic", "off", 1.0), ("nerf_synthetic_800", "500:4,1000:2", 0.5))]  # fmt: skip
    rows.append(dict(width=800, height=800, preset="old", schedule="off", curve=json.dumps([[100, 30.0, 21.0]])))
    fig = plot_converge_curves(pd.DataFrame(rows), footer="machine | commit")
    ax = fig.axes[0]
    assert "minutes" in ax.get_xlabel() and "dB" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 3 and "nerf_synthetic_800" in labels[1] and "500:4,1000:2" in labels[1]
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # right of the axes
    data = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert list(data[0].get_xdata()) == [1.0, 2.0, 3.0] and list(data[0].get_ydata()) == [20.0, 24.0, 26.0]
    assert {round(line.get_ydata()[0], 3) for line in ax.get_lines() if line.get_linestyle() == ":"} == {25.0, 35.0}
    assert any(t.get_label() == FOOTER_LABEL for t in fig.texts)
    plt.close(fig)
    with pytest.raises(ValueError, match="no converge curves"):
        plot_converge_curves(pd.DataFrame({"case": ["a"]}))


def test_converge_full_grid_has_the_targets_and_the_preset_case():
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench.registry import get_suite
    from gsworkbench.bench.runner import _comparison_groups
    from gsworkbench.studies.suites.converge import BRICKS_VARIANTS

    cases = get_suite("converge").cases(False)
    by_size = {}
    for c in cases:
        by_size.setdefault((c.params["scene"], c.params["width"]), []).append(c)
    assert {c.params["targets_db"] for c in by_size["object-nerf", 800]} == {"25,30,33,35"}
    presets = [c for c in by_size["object-nerf", 800] if c.params["preset"] == "nerf_synthetic_800"]
    assert len(presets) == 1
    cfg = preset("nerf_synthetic_800")
    assert presets[0].params["init_scale"] == cfg.init_scale and presets[0].params["num"] == cfg.init_random_num
    assert parse_schedule(presets[0].params["schedule"]) == cfg.resolution_schedule
    # the lego-hard scene: the preset and each variant, with the overrides it runs and what they set
    bricks = by_size["bricks-nerf", 800]
    assert [c.params["variant"] for c in bricks] == list(BRICKS_VARIANTS)
    # and on its validation split (tuning never scores the test views), the same variants
    tuning = by_size["bricks-val", 800]
    assert [c.params["variant"] for c in tuning] == list(BRICKS_VARIANTS)
    assert {c.params["split"] for c in bricks} == {"test"} and {c.params["split"] for c in tuning} == {"validation"}
    assert len({c.name for c in bricks + tuning}) == 2 * len(BRICKS_VARIANTS)
    for c in bricks + tuning:
        overrides = json.loads(c.params["overrides"])
        assert overrides == BRICKS_VARIANTS[c.params["variant"]] and c.params["targets_db"] == "25,30,33,35,37"
        run = preset("nerf_synthetic_800", **overrides)
        assert (c.params["iterations"], c.params["init_scale"]) == (run.iterations, run.init_scale)
        assert c.params["max_steps"] >= run.iterations
    # each size's variants (schedule, initial scale, preset, overrides) are interleaved in one group
    groups = [{(cases[i].params["scene"], cases[i].params["width"]) for i in g} for g in _comparison_groups(cases)]
    assert groups == [{("object-nerf", 800)}, {("object-nerf", 400)}, {("bricks-nerf", 800)}, {("bricks-val", 800)}]
    assert len(by_size["object-nerf", 800]) == 5 and len(bricks) == len(BRICKS_VARIANTS)


def test_converge_validation_split_scores_training_views_only():
    from gsworkbench.studies.suites.converge import VALIDATION_EVERY, converge_scene

    scene = converge_scene(1, True)
    tuning = converge_scene(1, True, split="validation")
    train = scene.train_ids.tolist()
    assert len(tuning) == len(train) and len(tuning.test_ids) == len(train[::VALIDATION_EVERY])
    assert torch.equal(tuning.images, scene.images[train])  # the scene's test views are not in it
    with pytest.raises(ValueError, match="split must be"):
        converge_scene(1, True, split="train")


@requires_ext  # the suite trains with the ext backend
def test_converge_suite_quick_runs():
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import run_suite

    df = run_suite("converge", quick=True, threads=1, progress=False)
    assert len(df) == 4 and set(zip(df["schedule"], df["init_scale"])) == {
        ("off", 1.0), ("40:4,80:2", 1.0), ("off", 0.5), ("40:4,80:2", 0.5)}  # fmt: skip
    for col in ("seconds_to_target", "steps_to_target", "final_test_psnr_db", "ms_per_step", "reached",
                "x_time_to_target", "threads", "curve", "gaussians", "minutes_to_19db", "minutes_to_21db",
                "steps_to_21db", "eval_seconds", "eval_share", "full_evals", "probe_views", "preset"):  # fmt: skip
        assert col in df, col
    assert (df["threads"] == 1).all() and (df["probe_views"] == 2).all()
    assert ((df["eval_share"] > 0) & (df["eval_share"] < 1)).all()
    for r in df.itertuples():
        curve = json.loads(r.curve)
        assert curve and all(s % 10 == 0 or s == r.max_steps for s, _, _, _ in curve)
        full = [c for c in curve if c[3] == 4]
        assert curve[-1] == full[-1] and r.final_test_psnr_db == pytest.approx(full[-1][2], abs=1e-3)
        assert r.full_evals == len(full)
        for target, steps, minutes in ((19, r.steps_to_19db, r.minutes_to_19db), (21, r.steps_to_21db,
                                                                                  r.minutes_to_21db)):  # fmt: skip
            if steps == steps:  # reached: at the first full evaluation at or above the target
                first = next(c for c in full if c[2] >= target)
                assert first[0] == steps and minutes == pytest.approx(first[1] / 60, abs=1e-4)
            else:
                assert all(c[2] < target for c in full) and minutes != minutes
        if r.reached:
            assert r.steps_to_target == r.steps_to_19db and r.seconds_to_target > 0
        done = r.steps_to_21db == r.steps_to_21db  # every target reached: stops there; else at the step cap
        assert curve[-1][0] == (r.steps_to_21db if done else r.max_steps)
    off = df[(df["schedule"] == "off") & (df["init_scale"] == 1.0)].iloc[0]
    assert off["x_time_to_target"] == 1.0 or not off["reached"]
    for r in df.itertuples():  # every case against the plain one
        if r.reached and off["reached"]:
            assert r.x_time_to_target == pytest.approx(off["seconds_to_target"] / r.seconds_to_target)
