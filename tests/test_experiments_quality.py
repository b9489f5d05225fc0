"""The quality table (gsworkbench quality): rows with the named columns, kept after each run."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import ext_built

from gsworkbench.studies import quality as q
from gsworkbench.synthetic import SYNTHETIC_SCENES
from gsworkbench.train import PRESETS, preset, preset_scene


def test_every_run_names_a_preset():
    assert set(q.RUNS) >= {"nerf_synthetic", "nerf_synthetic_cube", "nerf_synthetic_400", "nerf_synthetic_800",
                           "capture", "capture_pinhole"}  # fmt: skip
    assert all(r.preset in PRESETS for r in q.RUNS.values())
    for run in q.RUNS.values():  # every run's overrides are training parameters (preset raises otherwise)
        cfg = preset(run.preset, **run.overrides)
        # each lands on the config, or on its strategy (refine_stop, reset_every, ...)
        assert all(getattr(cfg.strategy if hasattr(cfg.strategy, k) else cfg, k) == v for k, v in run.overrides.items())
        scene = {**preset_scene(run.preset), **run.scene_overrides}  # a built-in scene the generator knows
        assert scene["name"] in SYNTHETIC_SCENES, run
    assert q.RUNS["bricks_400"].scene_overrides["name"] == "bricks"
    with pytest.raises(ValueError, match="unknown quality run"):
        q.quality_table(["nope"])


def test_a_tiny_table(tmp_path, monkeypatch):
    backend = "ext" if ext_built() else "torch"
    tiny = q.QualityRun("smoke", {"iterations": 6, "backend": backend},
                        {"width": 32, "height": 32, "n_train": 4, "n_test": 2, "n_points": 0})  # fmt: skip
    monkeypatch.setitem(q.RUNS, "tiny", tiny)
    monkeypatch.setenv("GSW_SCENE_CACHE", str(tmp_path / "cache"))
    table, folder = q.quality_table(["tiny"], tmp_path / "out")
    stored = pd.read_csv(folder / "quality.csv")
    assert list(stored.columns) == ["run", "seed", "layout", "views", "size", "init_rule", "init_scale", "steps",
                                    "minutes", "gaussians", "psnr_db", "ssim", "lpips", "psnr_cc_db",
                                    "psnr_background_db", "ssim_background", "scene_sha256", "commit"]  # fmt: skip
    row = stored.iloc[0]
    assert row.run == "tiny" and row.steps == 6 and row.views == "4 + 2" and row["size"] == "32x32"
    assert row.init_rule == "hull" and row.init_scale == 1.0  # the object without a cloud starts in its hull
    assert row.psnr_db > 0
    assert (folder / "tiny" / "checkpoint.pt").is_file() and (folder / "metadata.json").is_file()


def test_a_zoomed_run_scores_the_other_sizes(tmp_path, monkeypatch):
    backend = "ext" if ext_built() else "torch"
    tiny = q.QualityRun("smoke", {"iterations": 4, "backend": backend, "filter_3d": True},
                        {"width": 32, "height": 32, "n_train": 4, "n_test": 2, "n_points": 0},
                        zooms=(0.5,))  # fmt: skip
    monkeypatch.setitem(q.RUNS, "tiny_zoom", tiny)
    monkeypatch.setenv("GSW_SCENE_CACHE", str(tmp_path / "cache"))
    table, _ = q.quality_table(["tiny_zoom"], tmp_path / "out")
    row = table.iloc[0]
    assert row["psnr_x0.5_db"] > 0 and 0 < row["ssim_x0.5"] <= 1
    assert row["psnr_x0.5_db"] != row["psnr_db"]  # scored on other images than the full-size ones
    assert q.RUNS["capture_zoom_both"].overrides["filter_3d"] and q.RUNS["capture_zoom_both"].zooms == q.ZOOMS
    with pytest.raises(ValueError, match="1/zoom an integer"):
        q.zoom_references(None, 0.3)
