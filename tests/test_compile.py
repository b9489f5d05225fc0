"""torch.compile: every public op traces whole (no graph breaks) and agrees with eager, values and grads."""

from __future__ import annotations

import pytest
import torch
from conftest import rel_err, requires_ext

from gsworkbench.compile import compile_step
from gsworkbench.field import GaussianField, TrainConfig, evaluate, make_target, train_field
from gsworkbench.splat import cameras, rasterize
from gsworkbench.splats import SplatSet, synthetic_splats
from gsworkbench.transforms import transform
from gsworkbench.transforms.frames import make_frames

OPS = [pytest.param(op, b, marks=[requires_ext] if b == "ext" else []) for op in ("rasterize", "evaluate", "transform")
       for b in ("torch", "ext")]  # fmt: skip
# what fullgraph=True allows by itself; explain() compiles without fullgraph, so it is told explicitly
FULLGRAPH_CAPTURE = dict(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True)


def _case(op: str, backend: str, device: str, n: int = 120):  # noqa: ANN202
    """(function of differentiable leaves -> tensors, leaves, whether the op is differentiable)."""
    s = synthetic_splats(n, 3, seed=0)
    if op == "rasterize":
        vm, Ks = (t.to(device) for t in cameras.orbit_cameras(1, 40, 24, distance=3.0))

        def fn(means, quats, scales, opac, sh):  # noqa: ANN001, ANN202
            img, alpha, meta = rasterize(means, quats, scales, opac, sh, vm, Ks, 40, 24, sh_degree=3, backend=backend)
            return (img - 0.5).abs().mean() + alpha.mean(), img, meta["n_isects"]

        return fn, [t.to(device) for t in (s.means, s.quats, s.scales, s.opacities, s.sh)], True
    if op == "evaluate":
        g = torch.Generator().manual_seed(1)
        pts, means = torch.rand(40, 3, generator=g), torch.rand(9, 3, generator=g)
        L = torch.diag_embed(0.1 + torch.rand(9, 3, generator=g))
        L = L + torch.tril(0.02 * torch.randn(9, 3, 3, generator=g), -1)
        w = torch.randn(9, generator=g)

        def fn(p, m, f, w):  # noqa: ANN001, ANN202
            v = evaluate(p, m, f, w, backend=backend)
            return (v**2).mean(), v

        return fn, [t.to(device) for t in (pts, means, L, w)], True
    frames = make_frames(rotation=[0.9, 0.2, -0.3, 0.25], translation=[0.5, -1.0, 2.0], scale=[1.5, 1.0, 0.5])

    def fn(means, quats, log_scales, opacity_logits, sh_dc, sh_rest):  # noqa: ANN001, ANN202
        out = transform(SplatSet._trusted(means, quats, log_scales, opacity_logits, sh_dc, sh_rest), frames,
                        backend=backend)  # fmt: skip
        loss = out.means.square().mean() + out.log_scales.mean() + out.sh_rest.square().mean() + out.quats.mean()
        return loss, out.means, out.quats, out.sh_rest

    leaves = [t.to(device) for t in (s.means, s.quats, s.log_scales, s.opacity_logits, s.sh_dc, s.sh_rest)]
    return fn, leaves, backend == "torch"


@pytest.mark.parametrize("op,backend", OPS)
def test_no_graph_breaks(op, backend, device):
    fn, leaves, _ = _case(op, backend, device)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(**FULLGRAPH_CAPTURE):
        report = torch._dynamo.explain(fn)(*leaves)
    assert report.graph_break_count == 0, [str(b.reason)[:300] for b in report.break_reasons]
    assert report.graph_count == 1


@pytest.mark.parametrize("op,backend", OPS)
def test_compiled_matches_eager(op, backend, device, seed):
    fn, leaves, differentiable = _case(op, backend, device)
    outs, grads = [], []
    torch._dynamo.reset()
    for f in (fn, torch.compile(fn, backend="aot_eager", fullgraph=True)):
        ls = [t.detach().clone().requires_grad_(differentiable) for t in leaves]
        out = f(*ls)
        if differentiable:
            out[0].backward()
            grads.append([t.grad for t in ls])
        outs.append(out)
    for a, b in zip(*outs, strict=True):
        if isinstance(b, torch.Tensor):
            assert rel_err(a, b) < 1e-5
        else:
            assert int(a) == int(b)  # n_isects: symbolic while traced, an int when run
    for a, b in zip(*grads, strict=True):
        assert (a is None) == (b is None)  # None: an input the loss does not use
        assert b is None or rel_err(a, b) < 1e-5


@requires_ext
def test_rasterize_dynamic_sizes(device):
    """A compiled step keeps working when the number of Gaussians changes (densification)."""
    torch._dynamo.reset()
    for n in (100, 140):  # the second size recompiles with a symbolic N (automatic dynamic shapes)
        fn, leaves, _ = _case("rasterize", "ext", device, n)
        compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
        assert rel_err(compiled(*leaves)[1], fn(*leaves)[1]) < 1e-5


@requires_ext
def test_inductor_training_step(device):
    """The issue's step (rasterize, L1 loss, backward) under inductor: same loss and gradients."""
    fn, leaves, _ = _case("rasterize", "ext", device)
    step = compile_step(fn, True, eager_first_call=False)
    torch._dynamo.reset()
    results = []
    for f in (fn, step):
        ls = [t.detach().clone().requires_grad_() for t in leaves]
        loss = f(*ls)[0]
        loss.backward()
        results.append((loss, [t.grad for t in ls]))
    assert rel_err(results[1][0], results[0][0]) < 1e-5
    for a, b in zip(results[1][1], results[0][1], strict=True):
        assert rel_err(a, b) < 1e-5


@requires_ext
def test_value_errors_stay_eager(device):
    """Eager calls raise the clear errors; compile_step's first call is eager and raises them too."""
    fn, leaves, _ = _case("rasterize", "ext", device)
    bad = [t.detach().clone() for t in leaves]
    bad[0][3, 1] = float("nan")
    with pytest.raises(ValueError, match="means contains non-finite"):
        fn(*bad)
    with pytest.raises(ValueError, match="means contains non-finite"):
        compile_step(fn, "aot_eager")(*bad)
    bad = [t.detach().clone() for t in leaves]
    bad[3][0] = 1.5
    with pytest.raises(ValueError, match="opacities must lie in"):
        compile_step(fn, "aot_eager")(*bad)


@requires_ext
def test_absgrad_under_compile_is_refused(device):
    s = synthetic_splats(50, 0, seed=0).to(device)
    vm, Ks = (t.to(device) for t in cameras.orbit_cameras(1, 16, 16, distance=3.0))

    def fn(means):  # noqa: ANN001, ANN202
        return rasterize(means, s.quats, s.scales, s.opacities, s.sh_dc, vm, Ks, 16, 16, absgrad=True)[0]

    torch._dynamo.reset()
    with pytest.raises(Exception, match="absgrad"):
        torch.compile(fn, backend="aot_eager", fullgraph=True)(s.means)


def test_compile_step_options():
    f = lambda x: x + 1  # noqa: E731
    assert compile_step(f, False) is f and compile_step(f, "eager") is f
    with pytest.raises(ValueError, match="compile must be"):
        compile_step(f, "fast")
    with pytest.raises(ValueError, match="compile must be"):
        TrainConfig(compile="fast")


@requires_ext
def test_field_trainer_compile_matches_eager(device):
    losses = []
    torch._dynamo.reset()
    for c in (False, "aot_eager"):
        model = GaussianField(32, seed=0).to(device)
        cfg = TrainConfig(iterations=4, batch_size=256, eval_points=256, progress=False, compile=c)
        losses.append(train_field(model, make_target("torus"), cfg).history.loss.to_numpy())
    assert abs(losses[0] - losses[1]).max() <= 1e-6 * abs(losses[0]).max()
