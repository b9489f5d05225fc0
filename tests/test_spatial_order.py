"""Morton order (gsworkbench.core.spatial_order): the codes against a bit-by-bit loop, the order, and
the trainer's reorder of its Gaussians after densification."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_train_strategy import NAMES, moments, stepped_model

from gsworkbench.core.spatial_order import MAX_BITS, morton_codes, morton_order


def loop_codes(points: torch.Tensor, bits: int) -> list[int]:
    """The reference: each coordinate's cell in the bounding box (float64), bits interleaved one by one."""
    p = points.double()
    lo, hi = p.min(0).values, p.max(0).values
    cells = (1 << bits) - 1
    out = []
    for row in p:
        q = []
        for axis in range(3):
            extent = float(hi[axis] - lo[axis])
            q.append(0 if extent <= 0 else min(max(round(float((row[axis] - lo[axis]) / extent * cells)), 0), cells))
        code = 0
        for i in range(bits):
            for axis in range(3):
                code |= ((q[axis] >> i) & 1) << (3 * i + axis)
        out.append(code)
    return out


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    bits=st.sampled_from([1, 3, 10, MAX_BITS]),
    seed=st.integers(0, 2**31 - 1),
    flat_axis=st.sampled_from([None, 0, 2]),
)
def test_codes_match_a_bit_by_bit_loop(n, bits, seed, flat_axis):
    points = torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 5
    if flat_axis is not None:
        points[:, flat_axis] = 1.5
    assert morton_codes(points, bits).tolist() == loop_codes(points, bits)
    assert morton_codes(points.float(), bits).dtype == torch.int64


def test_order_sorts_the_codes_and_keeps_neighbours_near(seed):
    gen = torch.Generator().manual_seed(seed)
    points = torch.rand(4000, 3, generator=gen)
    order = morton_order(points)
    assert sorted(order.tolist()) == list(range(4000))
    codes = morton_codes(points)[order]
    assert bool((codes[1:] >= codes[:-1]).all())
    # along the curve, consecutive points are far nearer than in the random order they came in
    step = (points[order][1:] - points[order][:-1]).norm(dim=1).mean()
    assert float(step) < 0.2 * float((points[1:] - points[:-1]).norm(dim=1).mean())


def test_bad_input_and_edge_cases():
    with pytest.raises(ValueError, match=r"shape \[N, 3\]"):
        morton_codes(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="bits"):
        morton_codes(torch.zeros(4, 3), bits=22)
    assert morton_order(torch.zeros(0, 3)).numel() == 0
    p = torch.tensor([[0.0, 0.0, 0.0], [float("nan"), 1.0, 1.0], [1.0, float("inf"), 1.0], [1.0, 1.0, 1.0]])
    codes = morton_codes(p, 2)  # non-finite coordinates sit at the box's low corner of their axis
    assert codes.tolist() == loop_codes(torch.tensor([[0.0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1]]), 2)


def test_model_reorder_moves_parameters_and_moments_together(seed):
    model = stepped_model(30, seed)
    before = {n: (model.params[n].detach().clone(), *(m.clone() for m in moments(model, n))) for n in NAMES}
    order = torch.randperm(30, generator=torch.Generator().manual_seed(seed))
    model.reorder(order)
    for n in NAMES:
        p, m1, m2 = before[n]
        assert torch.equal(model.params[n].detach(), p[order])
        assert torch.equal(moments(model, n)[0], m1[order]) and torch.equal(moments(model, n)[1], m2[order])
        assert model.params[n].is_leaf and model.params[n].requires_grad


@pytest.mark.parametrize("strategy", ["default", "mcmc"])
def test_trainer_puts_gaussians_in_morton_order_after_densification(strategy):
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import Trainer, preset, preset_scene

    scene = builtin_scene(**preset_scene("smoke"))
    refine = {"refine_start": 2, "refine_every": 3, "refine_stop": 20}
    cfg = preset("smoke", iterations=8, strategy=strategy, filter_3d=True, **refine)
    trainer = Trainer(scene, cfg)
    changes = ("cloned", "split", "pruned", "relocated", "added")
    trainer.run(3)  # steps 0..2, before the first refinement: the rows keep the cloud's order
    assert not any(r.get(k, 0) for r in trainer.rows for k in changes)
    codes = morton_codes(trainer.model.means)
    assert not bool((codes[1:] >= codes[:-1]).all())
    trainer.run(4)  # step 3 refines
    assert any(trainer.rows[-1].get(k, 0) for k in changes)
    codes = morton_codes(trainer.model.means)
    assert bool((codes[1:] >= codes[:-1]).all())
    assert trainer.sampling_rate is not None and len(trainer.sampling_rate) == len(trainer.model)
    unordered = Trainer(scene, preset("smoke", iterations=8, strategy=strategy, spatial_order=False, **refine))
    unordered.run(4)
    codes = morton_codes(unordered.model.means)
    assert not bool((codes[1:] >= codes[:-1]).all())
