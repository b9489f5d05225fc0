"""torch.compile: every public op traces whole (no graph breaks) and agrees with eager, values and grads.

User-style functions that call ``rasterize``, ``evaluate`` and ``transform`` go through plain
``torch.compile`` (with and without ``fullgraph``) and torch._dynamo's default config: the ops need no
flags (see :func:`gsworkbench.core.compile.data_dependent_size`). No test here depends on timing.
"""

from __future__ import annotations

import pytest
import torch
from conftest import rel_err, requires_ext
from torch._dynamo.testing import CompileCounterWithBackend
from torch._dynamo.utils import counters

from gsworkbench.core import cameras
from gsworkbench.core.compile import compile_step
from gsworkbench.core.splats import SplatSet, synthetic_splats
from gsworkbench.field import FieldTrainConfig, GaussianField, evaluate, make_target, train_field
from gsworkbench.splat import _torch_impl, rasterize
from gsworkbench.transforms import transform
from gsworkbench.transforms.frames import make_frames

OPS = [pytest.param(op, b, marks=[requires_ext] if b == "ext" else []) for op in ("rasterize", "evaluate", "transform")
       for b in ("torch", "ext")]  # fmt: skip


@pytest.fixture(autouse=True)
def default_dynamo_config():  # noqa: ANN201
    """Each test starts from a fresh torch._dynamo with its default flags: nothing here sets them."""
    assert not torch._dynamo.config.capture_dynamic_output_shape_ops
    assert not torch._dynamo.config.capture_scalar_outputs
    torch._dynamo.reset()
    counters.clear()


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


def _run(f, leaves: list[torch.Tensor], differentiable: bool) -> tuple[tuple, list]:  # noqa: ANN001
    """f's outputs and the gradients of its first output (a loss) on fresh copies of ``leaves``."""
    ls = [t.detach().clone().requires_grad_(differentiable) for t in leaves]
    out = f(*ls)
    if differentiable:
        out[0].backward()
    return out, [t.grad for t in ls]


def _assert_same(got: tuple[tuple, list], want: tuple[tuple, list], tol: float = 1e-5) -> None:
    for a, b in zip(got[0], want[0], strict=True):
        if isinstance(b, torch.Tensor):
            assert rel_err(a, b) < tol
        else:
            assert int(a) == int(b)  # n_isects: symbolic while traced, an int when run
    for a, b in zip(got[1], want[1], strict=True):
        assert (a is None) == (b is None)  # None: an input the loss does not use
        assert b is None or rel_err(a, b) < tol


@pytest.mark.parametrize("fullgraph", [True, False], ids=["fullgraph", "default"])
@pytest.mark.parametrize("op,backend", OPS)
def test_plain_compile_matches_eager(op, backend, fullgraph, device, seed):
    """Plain ``torch.compile(fn)`` of a user function: one graph, no breaks, eager's values and grads."""
    fn, leaves, differentiable = _case(op, backend, device)
    want = _run(fn, leaves, differentiable)
    backend_counter = CompileCounterWithBackend("aot_eager")
    got = _run(torch.compile(fn, backend=backend_counter, fullgraph=fullgraph), leaves, differentiable)
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert backend_counter.frame_count == 1
    _assert_same(got, want)


def test_repeat_indices_op():
    """The torch backend's one data-dependent step, an op of its own under torch.compile."""
    counts = torch.tensor([2, 0, 3, 1])
    assert _torch_impl.repeat_indices(counts).tolist() == [0, 0, 2, 2, 2, 3]
    torch.library.opcheck(_torch_impl.repeat_indices, (counts,))


@pytest.mark.parametrize("backend", [pytest.param("ext", marks=requires_ext), "torch"])
def test_rasterize_dynamic_sizes(backend, device):
    """A compiled step keeps working when the number of Gaussians changes (densification)."""
    for n in (100, 140):  # the second size recompiles with a symbolic N (automatic dynamic shapes)
        fn, leaves, _ = _case("rasterize", backend, device, n)
        compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
        assert rel_err(compiled(*leaves)[1], fn(*leaves)[1]) < 1e-5


@requires_ext
@pytest.mark.parametrize("wrap", ["torch.compile", "compile_step"])
def test_inductor_training_step(wrap, device):
    """The issue's step (rasterize, L1 loss, backward) under inductor, as plain user code and through
    compile_step: same loss and gradients as eager."""
    fn, leaves, _ = _case("rasterize", "ext", device)
    if wrap == "torch.compile":
        step = torch.compile(fn, fullgraph=True)
    else:
        step = compile_step(fn, True, eager_first_call=False)
    want = _run(fn, leaves, True)
    got = _run(step, leaves, True)
    assert not counters["graph_break"], dict(counters["graph_break"])
    _assert_same(got, want)


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

    with pytest.raises(Exception, match="absgrad"):
        torch.compile(fn, backend="aot_eager", fullgraph=True)(s.means)


def test_compile_step_options():
    f = lambda x: x + 1  # noqa: E731
    assert compile_step(f, False) is f and compile_step(f, "eager") is f
    with pytest.raises(ValueError, match="compile must be"):
        compile_step(f, "fast")
    with pytest.raises(ValueError, match="compile must be"):
        FieldTrainConfig(compile="fast")


@requires_ext
def test_field_trainer_compile_matches_eager(device):
    losses = []
    for c in (False, "aot_eager"):
        model = GaussianField(32, seed=0).to(device)
        cfg = FieldTrainConfig(iterations=4, batch_size=256, eval_points=256, progress=False, compile=c)
        losses.append(train_field(model, make_target("torus"), cfg).history.loss.to_numpy())
    assert abs(losses[0] - losses[1]).max() <= 1e-6 * abs(losses[0]).max()
