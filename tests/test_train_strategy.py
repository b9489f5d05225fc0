"""Densification (adaptive density control, MCMC), the optimiser bookkeeping, SSIM and the config."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import rel_err, requires_ext
from hypothesis import given, settings
from hypothesis import strategies as st

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet
from gsworkbench.train import TrainConfig, preset, preset_scene
from gsworkbench.train.evaluate import ssim_reference
from gsworkbench.train.losses import ssim
from gsworkbench.train.model import NAMES, SplatModel
from gsworkbench.train.strategy import DefaultStrategy, MCMCStrategy, relocation

LRS = {"means": 1e-3, "quats": 1e-3, "log_scales": 5e-3, "opacity_logits": 5e-2, "sh_dc": 2.5e-3, "sh_rest": 1e-4}


def random_splats(n: int, gen: torch.Generator, scale: float = 0.05) -> SplatSet:
    return SplatSet(
        torch.randn(n, 3, generator=gen),
        torch.randn(n, 4, generator=gen),
        math.log(scale) + 0.3 * torch.randn(n, 3, generator=gen),
        torch.randn(n, generator=gen),
        torch.randn(n, 3, generator=gen),
        torch.randn(n, 15, 3, generator=gen),
    )


def stepped_model(n: int, seed: int) -> SplatModel:
    """A model whose Adam moments are non-zero (two steps of a random loss)."""
    gen = torch.Generator().manual_seed(seed)
    model = SplatModel(random_splats(n, gen), LRS)
    for _ in range(2):
        loss = sum((model.params[k] * torch.randn(model.params[k].shape, generator=gen)).sum() for k in NAMES)
        loss.backward()
        model.optimizer.step()
        model.optimizer.zero_grad()
    return model


def moments(model: SplatModel, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    s = model.optimizer.state[model.params[name]]
    return s["exp_avg"], s["exp_avg_sq"]


def assert_aligned(model: SplatModel) -> None:
    n = len(model)
    for name in NAMES:
        p = model.params[name]
        assert p.shape[0] == n and p.is_leaf and p.requires_grad
        assert model.optimizer.param_groups[NAMES.index(name)]["params"][0] is p
        for m in moments(model, name):
            assert m.shape == p.shape
        assert torch.isfinite(p).all()


def test_model_row_operations_keep_adam_state_aligned(seed):
    model = stepped_model(50, seed)
    before = {n: (model.params[n].detach().clone(), *(m.clone() for m in moments(model, n))) for n in NAMES}
    mask = torch.rand(50) > 0.3
    model.keep(mask)
    assert_aligned(model)
    for n in NAMES:
        p, m1, m2 = before[n]
        assert torch.equal(model.params[n].detach(), p[mask])
        assert torch.equal(moments(model, n)[0], m1[mask]) and torch.equal(moments(model, n)[1], m2[mask])
    k = int(mask.sum())
    rows = {n: model.params[n].detach()[:3] * 2 for n in NAMES}
    model.append(rows)
    assert len(model) == k + 3
    assert_aligned(model)
    for n in NAMES:
        assert torch.equal(model.params[n].detach()[k:], rows[n])
        assert not moments(model, n)[0][k:].any() and moments(model, n)[0][:k].equal(before[n][1][mask])
    idx = torch.tensor([0, 2])
    model.assign(idx, {"means": torch.zeros(2, 3)})
    assert not model.means[idx].any() and not moments(model, "means")[0][idx].any()
    assert moments(model, "means")[0][1].equal(before["means"][1][mask][1])
    # Adam still steps on the rewritten parameters
    model.means.sum().backward()
    model.optimizer.step()
    assert_aligned(model)


def test_append_with_keep_equals_keep_then_append(seed):
    """append(rows, keep=mask) (one new tensor per parameter and moment) leaves what keep(mask) and then
    append(rows) leave; assign writes in place (the same tensors) and zeroes only the moments it names."""
    a, b = stepped_model(40, seed), stepped_model(40, seed)
    mask = torch.rand(40, generator=torch.Generator().manual_seed(seed)) > 0.4
    rows = {n: a.params[n].detach()[:6] * 3 for n in NAMES}
    a.keep(mask)
    a.append(rows)
    b.append(rows, keep=mask)
    assert_aligned(b)
    for n in NAMES:
        assert torch.equal(a.params[n].detach(), b.params[n].detach()), n
        for ma, mb in zip(moments(a, n), moments(b, n), strict=True):
            assert torch.equal(ma, mb), n
    means, before = b.params["means"], moments(b, "means")[0].clone()
    idx = torch.tensor([1, 4])
    b.assign(idx, {"means": torch.full((2, 3), 7.0)})
    assert b.params["means"] is means and bool((means[idx] == 7).all())
    assert not moments(b, "means")[0][idx].any()
    others = torch.ones(len(b), dtype=torch.bool)
    others[idx] = False
    assert torch.equal(moments(b, "means")[0][others], before[others])
    assert_aligned(b)


def fake_meta(model: SplatModel, grad2d: torch.Tensor, width: int = 100, height: int = 80) -> dict:
    """A render meta of one camera whose means2d carries the given pixel-space gradients [N,2]."""
    m2 = torch.zeros(1, len(model), 2, requires_grad=True)
    m2.grad = grad2d[None].clone()
    m2.absgrad = grad2d[None].abs() * 2
    radii = torch.ones(1, len(model), dtype=torch.int32)
    return {"means2d": m2, "radii": radii, "width": width, "height": height, "n_cameras": 1}


@pytest.mark.parametrize("absgrad", [False, True])
def test_clone_split_prune_change_the_count_as_specified(seed, absgrad):
    n, scene_scale = 200, 2.0
    model = stepped_model(n, seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # half small (cloned when hot), half large (split when hot); a few transparent
        model.log_scales[: n // 2] = math.log(0.005)
        model.log_scales[n // 2 :] = math.log(0.05)
        model.opacity_logits[:] = 2.0
        model.opacity_logits[::10] = -8.0
    strat = DefaultStrategy(refine_start=0, refine_every=1, reset_every=1000, absgrad=absgrad)
    # NDC-scaled gradient norm: pixel gradient x width/2; threshold 2e-4 (8e-4 with absgrad)
    hot = torch.rand(n, generator=gen) < 0.4
    g = torch.zeros(n, 2)
    g[hot, 0] = 1e-4
    out = strat.step(model, {}, 1, fake_meta(model, g), gen, scene_scale)
    small = torch.arange(n) < n // 2
    transparent = torch.zeros(n, dtype=torch.bool)
    transparent[::10] = True
    n_clone, n_split = int((hot & small).sum()), int((hot & ~small).sum())
    assert out["cloned"] == n_clone and out["split"] == n_split
    # split children and clones inherit the opacity, so the transparent ones go along with their copies
    pruned = int((transparent & ~hot).sum() + 2 * (transparent & hot).sum())
    assert out["pruned"] == pruned
    assert len(model) == n + n_clone + n_split - pruned
    assert_aligned(model)
    # split children are smaller by 1.6 and no NaN anywhere
    assert torch.isfinite(model.log_scales).all()


def test_growth_stops_at_max_gaussians(seed):
    model = stepped_model(100, seed)
    with torch.no_grad():
        model.opacity_logits[:] = 3.0
    strat = DefaultStrategy(refine_start=0, refine_every=1, max_gaussians=130)
    gen = torch.Generator().manual_seed(seed)
    out = strat.step(model, {}, 1, fake_meta(model, torch.full((100, 2), 1.0)), gen, 1.0)
    assert out["cloned"] + out["split"] == 30 and len(model) == 130


@settings(max_examples=60, deadline=None)
@given(start=st.integers(0, 400), every=st.integers(1, 150), windows=st.integers(1, 30), n0=st.integers(1, 10_000),
       ratio=st.floats(1.0, 20.0))  # fmt: skip
def test_budget_curve_meets_the_budget_at_the_last_refinement(start, every, windows, n0, ratio):
    """The budget's counts: never shrinking, never past the budget, and on it after the window's last
    refinement (against a loop over the window's steps)."""
    budget = max(round(n0 * ratio), 1)
    strat = DefaultStrategy(refine_start=start, refine_stop=start + every * windows + 1, refine_every=every,
                            budget=budget)  # fmt: skip
    steps = [s for s in range(start + 1, strat.refine_stop) if s % every == 0]
    count = n0
    for s in steps:
        add = strat.budget_growth(count, s)
        assert add >= 0 and count + add <= max(budget, n0)
        count += add
    assert count == max(budget, n0)
    assert DefaultStrategy().budget_growth(n0, 600) == 0  # no budget: the threshold decides
    assert strat.budget_growth(0, strat.refine_stop - 1) == 0  # nothing to grow from


def test_budget_prunes_then_grows_the_highest_scores(seed):
    """One refinement under a budget: the transparent are pruned, then exactly the curve's count of the
    highest mean gradients (among those seen) are cloned or split, whatever the threshold says."""
    n = 120
    model = stepped_model(n, seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.opacity_logits[:] = 3.0
        model.opacity_logits[:10] = -10.0  # transparent: pruned
    grads = torch.rand(n, 2, generator=gen) * 1e-6  # all far below the threshold
    grads[10:40] += 1.0  # the highest scores, but only 20 of them can grow
    strat = DefaultStrategy(refine_start=0, refine_stop=102, refine_every=100, budget=130, grow_scale3d=0.0)
    meta = fake_meta(model, grads)
    meta["radii"][0, 30:40] = 0  # not seen: no score, whatever its gradient
    state: dict = {}
    strat.step(model, state, 99, meta, gen, 1.0)
    expected = strat.budget_growth(n - 10, 100)
    assert expected == 20  # the window's only refinement lands on the budget
    before = model.means.detach().clone()
    out = strat.step(model, state, 100, fake_meta(model, torch.zeros(n, 2)), gen, 1.0)
    assert out["pruned"] == 10 and out["split"] == expected and out["cloned"] == 0 and len(model) == 130
    # rows 10..29 (the seen high scores) were split: the rest keep their order, the 40 samples follow
    assert torch.equal(model.means.detach()[: n - 30], before[30:])
    assert_aligned(model)


def test_opacity_reset_clamps_and_zeroes_moments(seed):
    model = stepped_model(40, seed)
    strat = DefaultStrategy(refine_start=10_000, reset_every=5)
    strat.step(model, {}, 5, fake_meta(model, torch.zeros(40, 2)), torch.Generator(), 1.0)
    assert gaussians.opacity_from_logit(model.opacity_logits).max() <= 0.01 + 1e-6
    assert not moments(model, "opacity_logits")[0].any()


@settings(max_examples=40, deadline=None)
@given(o=st.floats(0.01, 0.99), n=st.integers(1, 12), s=st.floats(0.01, 2.0))
def test_relocation_preserves_opacity_and_scale_of_one_copy(o, n, s):
    new_o, new_s = relocation(torch.tensor([o], dtype=torch.float64), torch.full((1, 3), s, dtype=torch.float64),
                              torch.tensor([n]))  # fmt: skip
    # n copies at one place composite to the original opacity
    assert abs(1 - (1 - float(new_o)) ** n - o) < 1e-9
    if n == 1:
        assert abs(float(new_o) - o) < 1e-12 and torch.allclose(new_s, torch.tensor(s, dtype=torch.float64))
    else:
        assert float(new_o) < o


def test_mcmc_relocates_dead_and_keeps_the_count_within_its_cap(seed):
    model = stepped_model(100, seed)
    with torch.no_grad():
        model.opacity_logits[:] = 1.0
        model.opacity_logits[:20] = -10.0  # dead
    cfg = preset("smoke", strategy="mcmc", refine_start=0, refine_stop=1000, refine_every=1, cap_max=112)
    strat, gen = cfg.strategy, torch.Generator().manual_seed(seed)
    assert isinstance(strat, MCMCStrategy) and strat.cap_max == 112 and strat.refine_stop == 1000
    out = strat.step(model, {}, 1, fake_meta(model, torch.zeros(100, 2)), gen, 1.0)
    assert out["relocated"] == 20 and out["added"] == 5 and len(model) == 105
    assert gaussians.opacity_from_logit(model.opacity_logits).min() > strat.min_opacity * 0.999
    for step in range(2, 8):
        strat.step(model, {}, step, fake_meta(model, torch.zeros(len(model), 2)), gen, 1.0)
        assert len(model) <= 112
    assert len(model) == 112
    assert_aligned(model)


def test_ssim_matches_scikit_image(seed):
    img, ref = torch.rand(2, 37, 45, 3, dtype=torch.float64).unbind(0)
    ref = 0.5 * ref + 0.5 * img  # correlated, so SSIM is far from 0
    assert abs(float(ssim(img, ref)) - ssim_reference(img, ref)) < 1e-10
    assert float(ssim(ref, ref)) == pytest.approx(1.0)
    x = img[:14, :13].clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a: ssim(a, ref[:14, :13]), (x,), eps=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="H, W >= 11"):
        ssim(img[:5], ref[:5])


def test_config_checks_and_presets():
    with pytest.raises(ValueError, match="strategy must be one of"):
        TrainConfig(strategy="adc")
    with pytest.raises(ValueError, match="iterations must be an int >= 0"):
        TrainConfig(iterations=-1)
    with pytest.raises(ValueError, match="init_opacity must lie in"):
        TrainConfig(init_opacity=1.0)
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        preset("huge")
    with pytest.raises(ValueError, match="unknown training parameter.*lr_mean\\b"):
        preset("smoke", lr_mean=1.0)
    micro = preset("micro")
    assert micro.iterations == 100 and micro.strategy.refine_every == 25 and micro.strategy.max_gaussians == 5000
    assert preset_scene("micro")["n_train"] == 12 and preset_scene("micro")["n_test"] == 3
    assert preset("short", strategy="mcmc").opacity_reg == 0.01
    assert TrainConfig().strategy.refine_stop == 15_000 and TrainConfig(strategy="mcmc").strategy.refine_stop == 25_000
    assert DefaultStrategy(absgrad=True).grow_grad2d_threshold == 8e-4
    assert rel_err(torch.tensor(1.0), torch.tensor(1.0)) == 0


@requires_ext  # the fused SSIM kernel is CPU-only
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_ssim_matches_the_torch_reference(seed, dtype):
    from gsworkbench.train import fused_losses
    from gsworkbench.train.losses import ssim_torch

    # up to 110 rows: several of the kernel's 32-row bands, and partial last bands
    h, w, c = int(torch.randint(11, 110, ())), int(torch.randint(11, 50, ())), int(torch.randint(1, 5, ()))
    img, ref = torch.rand(2, h, w, c, dtype=torch.float64).unbind(0)
    ref = 0.6 * ref + 0.4 * img
    x = img.clone().requires_grad_()
    want = ssim_torch(x, ref)
    want.backward()
    y = img.to(dtype).requires_grad_()
    got = ssim(y, ref.to(dtype))
    (got * 1.0).backward()
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert abs(float(got.detach()) - float(want.detach())) < tol and rel_err(y.grad, x.grad) < tol * 10
    if dtype == torch.float64:
        small = img[:13, :12].clone().requires_grad_()
        assert torch.autograd.gradcheck(lambda a: fused_losses.ssim(a, ref[:13, :12]), (small,), eps=1e-6, atol=1e-8)
        torch.library.opcheck(torch.ops.gsworkbench.ssim, (small, ref[:13, :12]))
