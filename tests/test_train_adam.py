"""The splat optimisers (gsworkbench.train.adam): the visible Adam against torch's dense Adam, row by row."""

from __future__ import annotations

import pytest
import torch

from gsworkbench.train.adam import OPTIMIZERS, VisibleAdam, make_optimizer, visible_rows

SHAPES = ((3,), (4,), (), (15, 3))  # means, quats, opacity logits, higher SH: rows of several widths
LRS = (1e-2, 1e-3, 5e-2, 1e-4)
EPS32 = torch.finfo(torch.float32).eps


def _tight(lr: float | None = None, steps: int = 1) -> dict[str, float]:
    """A few float32 ulps (the fused kernel's vector body and scalar tail round differently): relative
    to the value, and absolute at the scale of what was added to it (``steps`` updates of at most
    about ``lr`` each for parameters; O(1) gradients for the moments, ``lr=None``), so values that
    cross zero are not held to a relative bound."""
    return {"rtol": 1e-6, "atol": 4 * EPS32 * (steps * lr if lr is not None else 4.0)}


def _params(n: int, gen: torch.Generator) -> list[torch.Tensor]:
    return [torch.randn(n, *s, generator=gen) for s in SHAPES]


def _grads(n: int, steps: int, gen: torch.Generator) -> list[list[torch.Tensor]]:
    return [[torch.randn(n, *s, generator=gen) for s in SHAPES] for _ in range(steps)]


def _optimizer(kind: str, values: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.optim.Optimizer]:
    ps = [v.clone().requires_grad_(True) for v in values]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(ps, LRS)]
    if kind == "visible":
        return ps, VisibleAdam(groups, eps=1e-15)
    if kind == "selective":
        return ps, VisibleAdam(groups, eps=1e-15, bias_correction=False)
    kw = {"fused": True} if kind == "fused" else {"foreach": False, "fused": False}
    return ps, torch.optim.Adam(groups, eps=1e-15, **kw)


def _run(opt: torch.optim.Optimizer, ps: list[torch.Tensor], grads: list[list[torch.Tensor]], mask=None) -> None:
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = g.clone() if p.shape[0] == g.shape[0] else g[mask].clone()
        opt.step(mask) if isinstance(opt, VisibleAdam) else opt.step()


def _moments(opt: torch.optim.Optimizer, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]


def test_every_row_visible_is_torch_adam_to_the_bit(seed):
    gen = torch.Generator().manual_seed(seed)
    values, grads = _params(257, gen), _grads(257, 6, gen)
    ours, opt = _optimizer("visible", values)
    ref, ref_opt = _optimizer("fused", values)
    loop, loop_opt = _optimizer("single", values)
    _run(opt, ours, grads)  # no mask: every row
    _run(ref_opt, ref, grads)
    _run(loop_opt, loop, grads)
    for a, b, c, lr in zip(ours, ref, loop, LRS):
        assert torch.equal(a, b)  # torch's fused Adam (the trainer's dense default)
        torch.testing.assert_close(a, c, **_tight(lr, 6))  # torch's per-tensor loop: the same update
        for ma, mb in zip(_moments(opt, a), _moments(ref_opt, b)):
            assert torch.equal(ma, mb)
        assert float(opt.state[a]["step"]) == 6
    ours2, opt2 = _optimizer("visible", values)  # an all-True mask is the same as none
    _run(opt2, ours2, grads, torch.ones(257, dtype=torch.bool))
    assert all(torch.equal(a, b) for a, b in zip(ours2, ref))


@pytest.mark.parametrize("share", [0.3, 0.8])  # gathering the visible rows / saving the hidden ones
def test_masked_rows_are_dense_adam_on_those_rows_and_the_rest_untouched(seed, share):
    """Three dense steps, then five with a fixed mask: the visible rows end as dense Adam run on those
    rows alone (parameters and moments); the hidden rows keep the values and moments they had."""
    gen = torch.Generator().manual_seed(seed)
    n = 301
    values, warm, grads = _params(n, gen), _grads(n, 3, gen), _grads(n, 5, gen)
    mask = torch.rand(n, generator=gen) < share
    ours, opt = _optimizer("visible", values)
    _run(opt, ours, warm)
    before = [p.detach().clone() for p in ours]
    moments_before = [[t.clone() for t in _moments(opt, p)] for p in ours]
    _run(opt, ours, grads, mask)
    ref, ref_opt = _optimizer("fused", [v[mask] for v in values])  # dense Adam on the visible rows only
    _run(ref_opt, ref, [[g[mask] for g in gs] for gs in warm], mask)
    _run(ref_opt, ref, [[g[mask] for g in gs] for gs in grads], mask)
    for p, r, was, m_was, lr in zip(ours, ref, before, moments_before, LRS):
        torch.testing.assert_close(p.detach()[mask], r.detach(), **_tight(lr, 8))
        for m, m_ref in zip(_moments(opt, p), _moments(ref_opt, r)):
            torch.testing.assert_close(m[mask], m_ref, **_tight())
        assert torch.equal(p.detach()[~mask], was[~mask])  # hidden: values and moments untouched
        for m, m0 in zip(_moments(opt, p), m_was):
            assert torch.equal(m[~mask], m0[~mask])
        assert float(opt.state[p]["step"]) == 8  # one count per group, advanced every step


def test_changing_masks_step_each_visible_row_with_the_groups_count(seed):
    """Each step with a fresh mask equals one dense Adam step of the visible rows from their current
    state, bias-corrected with the group's step count (torch's SparseAdam rule); hidden rows stay."""
    gen = torch.Generator().manual_seed(seed)
    n = 200
    values = _params(n, gen)
    ours, opt = _optimizer("visible", values)
    for t, gs in enumerate(_grads(n, 6, gen), start=1):
        mask = torch.rand(n, generator=gen) < (0.2 if t % 2 else 0.9)
        prev = [(p.detach().clone(), *(m.clone() for m in _moments(opt, p))) if opt.state[p] else None for p in ours]
        ref = []
        for p, g, lr, st in zip(ours, gs, LRS, prev):
            x = (st[0] if st else p.detach())[mask].clone().requires_grad_(True)
            ref_opt = torch.optim.Adam([x], lr=lr, eps=1e-15, fused=True)
            if st:
                ref_opt.state[x] = {"step": torch.tensor(float(t - 1)), "exp_avg": st[1][mask].clone(),
                                    "exp_avg_sq": st[2][mask].clone()}  # fmt: skip
            x.grad = g[mask].clone()
            ref_opt.step()
            ref.append(x.detach())
        hidden_before = [p.detach()[~mask].clone() for p in ours]
        _run(opt, ours, [gs], mask)
        for p, r, h, lr in zip(ours, ref, hidden_before, LRS):
            torch.testing.assert_close(p.detach()[mask], r, **_tight(lr))  # one step from the same state
            assert torch.equal(p.detach()[~mask], h)


def test_selective_adam_has_no_bias_correction(seed):
    """gsplat's SelectiveAdam update: m and v as Adam's, the step lr * m / (sqrt(v) + eps), uncorrected."""
    gen = torch.Generator().manual_seed(seed)
    n = 150
    values, grads = _params(n, gen), _grads(n, 3, gen)
    mask = torch.rand(n, generator=gen) < 0.6
    ours, opt = _optimizer("selective", values)
    _run(opt, ours, grads, mask)
    for k, (v0, lr) in enumerate(zip(values, LRS)):
        x, m, v = v0.double().clone(), torch.zeros_like(v0).double(), torch.zeros_like(v0).double()
        for gs in grads:
            g = gs[k].double()
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            x = x - lr * m / (v.sqrt() + 1e-15)
        torch.testing.assert_close(ours[k].detach()[mask].double(), x[mask], rtol=1e-5, atol=1e-6)
        assert torch.equal(ours[k].detach()[~mask], v0[~mask])


def test_state_is_torch_adams_so_checkpoints_load_across():
    gen = torch.Generator().manual_seed(0)
    values, grads = _params(64, gen), _grads(64, 2, gen)
    ours, opt = _optimizer("visible", values)
    _run(opt, ours, grads, torch.rand(64, generator=gen) < 0.5)
    ref, ref_opt = _optimizer("fused", values)
    ref_opt.load_state_dict(opt.state_dict())
    for a, b in zip(ours, ref):
        assert set(ref_opt.state[b]) == {"step", "exp_avg", "exp_avg_sq"}
        assert all(torch.equal(x, y) for x, y in zip(_moments(opt, a), _moments(ref_opt, b)))
    again, again_opt = _optimizer("visible", values)
    again_opt.load_state_dict(ref_opt.state_dict())
    assert float(again_opt.state[again[0]]["step"]) == 2


def test_visible_rows_and_errors():
    radii = torch.tensor([[0, 3, 0, 1], [0, 0, 2, 0]])  # [C=2, N=4]
    assert visible_rows(radii).tolist() == [False, True, True, True]
    per_axis = torch.tensor([[[1, 0], [2, 2], [0, 0]]])  # [C=1, N=3, 2]: both axes must be > 0
    assert visible_rows(per_axis).tolist() == [False, True, False]
    ps, opt = _optimizer("visible", _params(5, torch.Generator().manual_seed(0)))
    for p in ps:
        p.grad = torch.zeros_like(p)
    with pytest.raises(ValueError, match="visible has 4 rows"):
        opt.step(torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="optimizer must be one of"):
        make_optimizer([{"params": ps[:1]}], 1e-15, "sgd")
    from gsworkbench.train import TrainConfig

    with pytest.raises(ValueError, match="optimizer must be one of"):
        TrainConfig(optimizer="sparse")
    assert TrainConfig().optimizer == "adam" and set(OPTIMIZERS) == {"adam", "visible_adam", "selective_adam"}


def test_row_operations_keep_the_visible_adams_moments_row_for_row():
    """Densification's row operations (keep, append, assign) work on the visible Adam's state as on
    dense Adam's: one moment row per Gaussian, new rows at zero, and the next masked step runs."""
    from gsworkbench.core.splats import synthetic_splats
    from gsworkbench.train.model import NAMES, SplatModel

    lrs = dict.fromkeys(NAMES, 1e-3)
    model = SplatModel(synthetic_splats(40, 3, seed=0), lrs, optimizer="visible_adam")
    assert isinstance(model.optimizer, VisibleAdam)
    radii = torch.zeros(1, 40, dtype=torch.int32)
    radii[0, :25] = 4
    for p in model.params.values():
        p.grad = torch.ones_like(p)
    model.step(radii)
    model.keep(torch.arange(40) % 4 != 0)  # 30 rows
    model.append({n: model.params[n].detach()[:5].clone() for n in NAMES})  # 35
    model.assign(torch.tensor([0, 1]), {"means": torch.zeros(2, 3)})
    for name, p in model.params.items():
        st = model.optimizer.state[p]
        assert st["exp_avg"].shape == p.shape == st["exp_avg_sq"].shape and p.shape[0] == 35, name
        assert (st["exp_avg"][30:] == 0).all()
    for p in model.params.values():
        p.grad = torch.ones_like(p)
    frozen = model.params["means"].detach()[20:30].clone()
    radii = torch.zeros(1, 35, dtype=torch.int32)
    radii[0, :20] = 2
    model.step(radii)
    assert torch.equal(model.params["means"].detach()[20:30], frozen)


def test_training_with_the_visible_adam_raises_psnr(tmp_path):
    """150 smoke steps from random points in a cube around the object (about a third of them in each
    view, so most steps leave rows alone): PSNR on the held-out views rises clearly (about +6 dB
    measured, as with dense Adam)."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import Trainer, preset
    from gsworkbench.train.init_splats import init_splats

    scene = builtin_scene("object", width=48, height=48, n_train=24, n_test=4, cache_dir=tmp_path)
    gen = torch.Generator().manual_seed(0)
    splats = init_splats(None, None, num=None, random_num=4000, extent=1.5 * scene.scene_scale, opacity=0.1,
                         scale=1.0, sh_degree=3, gen=gen)  # fmt: skip
    trainer = Trainer(scene, preset("smoke", seed=1, optimizer="visible_adam"), splats)
    assert isinstance(trainer.model.optimizer, VisibleAdam)
    with torch.no_grad():
        seen = visible_rows(trainer.render([int(scene.train_ids[0])])[2]["radii"]).float().mean()
    assert seen < 0.8  # the masked path is what runs
    before = float(trainer.evaluate()[0]["psnr_db"].mean())
    trainer.run()
    after = float(trainer.evaluate()[0]["psnr_db"].mean())
    assert after > before + 3.0, (before, after)
    assert all(torch.isfinite(p).all() for p in trainer.model.params.values())
