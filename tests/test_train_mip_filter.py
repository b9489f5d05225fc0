"""Mip-Splatting's 3D filter (gsworkbench.train.mip_filter) and the trainer's anti-aliasing settings
(filter_3d, rasterize_mode): the rates against a loop over cameras in float64, the filter's gradients,
the baked export, resuming, evaluation at another image size and the settings' checks."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import ext_built

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet
from gsworkbench.splat import rasterize
from gsworkbench.train import TrainConfig, Trainer, preset, preset_scene
from gsworkbench.train.mip_filter import FRUSTUM_MARGIN, filtered_scales_opacities, max_sampling_rate
from gsworkbench.train.resolution import downsample


@pytest.fixture(scope="module")
def scene():
    from gsworkbench.synthetic import builtin_scene

    return builtin_scene(**preset_scene("smoke"))  # 64x64, 24 + 4 views, cached


def _backend() -> str:
    return "ext" if ext_built() else "torch"


def _cameras(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n cameras above the z = 0 plane at distance 3..5, looking at the origin (OpenCV axes), and their
    intrinsics: a point high above the origin is behind all of them."""
    viewmats, Ks = [], []
    for _ in range(n):
        eye = torch.randn(3, generator=g, dtype=torch.float64)
        eye[2] = eye[2].abs() + 0.3
        eye = eye / eye.norm() * (3 + 2 * torch.rand(1, generator=g, dtype=torch.float64))
        fwd = -eye / eye.norm()
        right = torch.linalg.cross(fwd, torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
        right = right / right.norm()
        down = torch.linalg.cross(fwd, right)
        R = torch.stack([right, down, fwd])
        m = torch.eye(4, dtype=torch.float64)
        m[:3, :3], m[:3, 3] = R, -R @ eye
        viewmats.append(m)
        f = 40 + 30 * float(torch.rand(1, generator=g))
        Ks.append(torch.tensor([[f, 0, 32.0], [0, 1.1 * f, 24.0], [0, 0, 1]], dtype=torch.float64))
    return torch.stack(viewmats), torch.stack(Ks)


def _rate_by_loop(means, viewmats, Ks, width, height, near):
    """The highest sampling rate, one camera and one Gaussian at a time (the definition)."""
    out = torch.zeros(len(means), dtype=torch.float64)
    for vm, K in zip(viewmats, Ks):
        for i, x in enumerate(means):
            p = vm[:3, :3] @ x + vm[:3, 3]
            if p[2] <= near:
                continue
            u, v = K[0, 0] * p[0] / p[2] + K[0, 2], K[1, 1] * p[1] / p[2] + K[1, 2]
            mw, mh = FRUSTUM_MARGIN * width, FRUSTUM_MARGIN * height
            if -mw <= u <= width + mw and -mh <= v <= height + mh:
                out[i] = max(out[i], max(K[0, 0], K[1, 1]) / p[2])
    return out


def test_sampling_rate_matches_the_loop_over_cameras(seed):
    g = torch.Generator().manual_seed(seed)
    viewmats, Ks = _cameras(5, g)
    means = torch.randn(60, 3, generator=g, dtype=torch.float64) * 1.5
    means[0] = torch.tensor([0.0, 0.0, 1e3])  # behind every camera
    got = max_sampling_rate(means, viewmats, Ks, 64, 48, near_plane=0.01)
    want = _rate_by_loop(means, viewmats, Ks, 64, 48, 0.01)
    assert (want > 0).any() and (want == 0).any()  # some seen, some not: both branches tested
    assert torch.equal(got == 0, want == 0)
    seen = want > 0
    assert ((got[seen] - want[seen]).abs() / want[seen]).max() < 1e-12


def test_filter_widens_scales_and_keeps_the_integral(seed):
    g = torch.Generator().manual_seed(seed)
    scales = torch.rand(20, 3, generator=g, dtype=torch.float64) * 0.1 + 1e-3
    opacities = torch.rand(20, generator=g, dtype=torch.float64)
    rate = torch.rand(20, generator=g, dtype=torch.float64) * 100 + 1
    quats = torch.randn(20, 4, generator=g, dtype=torch.float64)
    s, o = filtered_scales_opacities(scales, opacities, rate, 0.2)
    cov = gaussians.covariance_from_scales_quats(scales, quats)
    blurred = cov + (0.2 / rate.square())[:, None, None] * torch.eye(3, dtype=torch.float64)
    # the filtered Gaussian is the convolution: its covariance, and opacity x sqrt(det ratio)
    assert torch.allclose(gaussians.covariance_from_scales_quats(s, quats), blurred, rtol=1e-10, atol=1e-14)
    want = opacities * torch.sqrt(torch.linalg.det(cov) / torch.linalg.det(blurred))
    assert ((o - want).abs() / want).max() < 1e-10
    # the peak-normalised integral o * sqrt(det Sigma) is kept
    integral = opacities * torch.linalg.det(cov).sqrt()
    assert torch.allclose(o * torch.linalg.det(blurred).sqrt(), integral, rtol=1e-10)


def test_filter_gradients_in_float64(seed):
    g = torch.Generator().manual_seed(seed)
    scales = (torch.rand(6, 3, generator=g, dtype=torch.float64) * 0.1 + 0.01).requires_grad_(True)
    opacities = torch.rand(6, generator=g, dtype=torch.float64).requires_grad_(True)
    rate = torch.tensor([0.0, 5.0, 20.0, 50.0, 0.0, 100.0], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda s, o: filtered_scales_opacities(s, o, rate, 0.2), (scales, opacities))


def test_a_gaussian_no_camera_sees_is_unchanged():
    viewmats, Ks = _cameras(3, torch.Generator().manual_seed(1))
    means = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 1e3]], dtype=torch.float64)  # the origin, behind them all
    rate = max_sampling_rate(means, viewmats, Ks, 64, 48)
    assert rate[0] > 0 and rate[1] == 0
    scales = torch.tensor([[0.01, 0.02, 0.03]] * 2, dtype=torch.float64)
    opacities = torch.tensor([0.7, 0.7], dtype=torch.float64)
    s, o = filtered_scales_opacities(scales, opacities, rate, 0.2)
    assert torch.equal(s[1], scales[1]) and o[1] == 0.7
    assert (s[0] > scales[0]).all() and o[0] < 0.7


def test_no_cameras_give_rate_zero():
    means = torch.randn(4, 3)
    assert torch.equal(max_sampling_rate(means, torch.zeros(0, 4, 4), torch.zeros(0, 3, 3), 8, 8), torch.zeros(4))


@pytest.mark.parametrize(
    "bad",
    [{"filter_3d": 1}, {"filter_3d_variance": 0.0}, {"filter_3d_variance": -1}, {"filter_3d_every": 0},
     {"rasterize_mode": "mip"}, {"eps2d": -0.1}],
)  # fmt: skip
def test_bad_settings_raise_one_line(bad):
    with pytest.raises(ValueError) as err:
        TrainConfig(**bad)
    assert "\n" not in str(err.value) and next(iter(bad)) in str(err.value)


def _splats(n: int = 40, seed: int = 0) -> SplatSet:
    """Small Gaussians around the smoke scene's origin (a few far outside every view)."""
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g) - 0.5) * 1.2
    means[:3] = 500.0  # seen by no camera
    log_scales = torch.log(torch.full((n, 3), 0.004) * torch.exp(0.5 * torch.randn(n, 3, generator=g)))
    opac = gaussians.logit_from_opacity(torch.rand(n, generator=g) * 0.8 + 0.1)
    rgb = torch.rand(n, 3, generator=g)
    return SplatSet(means, torch.randn(n, 4, generator=g), log_scales, opac, gaussians.rgb_to_sh_dc(rgb),
                    torch.zeros(n, 0, 3))  # fmt: skip


@pytest.mark.parametrize(("mode", "eps2d"), [("classic", 0.3), ("antialiased", 0.1)])
def test_exported_splats_render_as_training_does(scene, mode, eps2d):
    cfg = preset("smoke", backend=_backend(), sh_degree=0, filter_3d=True, rasterize_mode=mode, eps2d=eps2d)
    trainer = Trainer(scene, cfg, _splats())
    assert trainer.sampling_rate is not None and (trainer.sampling_rate[:3] == 0).all()
    out = trainer.splats()
    raw = trainer.model.splats()
    assert torch.equal(out.log_scales[:3], raw.log_scales[:3])  # unseen: unchanged
    assert (out.log_scales[3:] > raw.log_scales[3:]).all()  # small splats widened by the filter
    view = int(scene.test_ids[0])
    with torch.no_grad():
        want = trainer.render([view])[0][0]
        got = rasterize(out.means, out.quats, gaussians.scales_from_log(out.log_scales),
                        gaussians.opacity_from_logit(out.opacity_logits), out.sh_dc[:, None, :],
                        scene.viewmats[view : view + 1], scene.Ks[view : view + 1], scene.width, scene.height,
                        sh_degree=0, backgrounds=trainer._bg[None], backend=cfg.backend,
                        rasterize_mode=mode, eps2d=eps2d)[0][0]  # fmt: skip
        unfiltered = rasterize(raw.means, raw.quats, gaussians.scales_from_log(raw.log_scales),
                               gaussians.opacity_from_logit(raw.opacity_logits), raw.sh_dc[:, None, :],
                               scene.viewmats[view : view + 1], scene.Ks[view : view + 1], scene.width,
                               scene.height, sh_degree=0, backgrounds=trainer._bg[None], backend=cfg.backend,
                               rasterize_mode=mode, eps2d=eps2d)[0][0]  # fmt: skip
    assert (got - want).abs().max() < 1e-5
    assert (unfiltered - want).abs().max() > 1e-3  # the filter changes this render: the test can tell


def test_training_recomputes_rates_and_resumes_with_them(scene, tmp_path):
    cfg = preset("smoke", backend=_backend(), iterations=8, filter_3d=True, filter_3d_every=4, refine_start=2,
                 refine_every=4, refine_stop=8)  # fmt: skip
    trainer = Trainer(scene, cfg)
    for _ in range(4):
        trainer.step()
    # step 3 recomputed the rates: they are those of the centres now
    train = scene.train_ids
    fresh = max_sampling_rate(trainer.model.means.detach(), scene.viewmats[train], scene.Ks[train], scene.width,
                              scene.height, cfg.near_plane)  # fmt: skip
    assert len(trainer.sampling_rate) == len(trainer.model)
    assert torch.equal(trainer.sampling_rate, fresh)
    trainer.step()  # step 4: densification; the rates follow the new count
    assert len(trainer.sampling_rate) == len(trainer.model)
    trainer.step()  # step 5: no recomputation, so the rates lag the centres; a checkpoint keeps them
    path = trainer.save_checkpoint(tmp_path / "ck.pt")
    again = Trainer.from_checkpoint(path, scene)
    assert torch.equal(again.sampling_rate, trainer.sampling_rate)
    rows = [trainer.step(), again.step()]
    assert rows[0]["loss"] == rows[1]["loss"]


def test_without_the_filter_nothing_changes(scene):
    trainer = Trainer(scene, preset("smoke", backend=_backend(), sh_degree=0), _splats())
    assert trainer.sampling_rate is None
    out, raw = trainer.splats(), trainer.model.splats()
    assert torch.equal(out.log_scales, raw.log_scales) and torch.equal(out.opacity_logits, raw.opacity_logits)


def test_evaluate_at_another_size(scene):
    trainer = Trainer(scene, preset("smoke", backend=_backend(), sh_degree=0), _splats())
    views = scene.test_ids.tolist()[:2]
    refs = {v: downsample(scene.images[v], scene.width // 4, scene.height // 4) for v in views}
    table, renders = trainer.evaluate(references=refs)
    assert table["view"].tolist() == views
    assert renders[views[0]].shape == (scene.height // 4, scene.width // 4, 3)
    assert table["psnr_db"].notna().all() and table["psnr_background_db"].isna().all()
    # at the scene's own size the scores are evaluate()'s
    full, _ = trainer.evaluate(views)
    same, _ = trainer.evaluate(references={v: scene.images[v] for v in views})
    assert same["psnr_db"].tolist() == pytest.approx(full["psnr_db"].tolist(), abs=1e-9)
    assert math.isfinite(float(same["ssim"].mean()))


def test_the_capture_preset_renders_with_mip_splatting_filters():
    # the measured choice (docs/training.md, "Anti-aliasing: other image sizes")
    for strategy in ("default", "mcmc"):
        cfg = preset("capture", strategy=strategy)
        assert cfg.rasterize_mode == "antialiased" and cfg.eps2d == 0.1 and cfg.filter_3d
    assert preset("short").rasterize_mode == "classic" and not preset("short").filter_3d
