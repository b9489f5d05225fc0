"""Field backends against a float64 reference; gradcheck, opcheck, edge cases and bad input (each on
every device of the ``device`` fixture; the reference stays on the CPU)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import backend_params, rel_err, requires_ext, to_device

from gsworkbench.field import BACKENDS, MemoryBudgetError, evaluate

FAST = ("torch", "numba", "ext")
CPU_ONLY = ("numba",)


def skip_off_cpu(backend: str, device: str) -> None:
    """CPU-only backends are not run on other devices (test_cpu_only_backend_refuses_cuda checks that)."""
    if backend in CPU_ONLY and device != "cpu":
        pytest.skip(f"backend {backend!r} runs on the CPU only")


def make_inputs(B, N, covariance, dtype=torch.float64, anisotropy=1.0, gen=None):
    points = torch.rand(B, 3, dtype=dtype, generator=gen) * 2 - 1
    means = torch.rand(N, 3, dtype=dtype, generator=gen) * 2 - 1
    sigma = (0.15 + 0.35 * torch.rand(N, 3, dtype=dtype, generator=gen)) * torch.tensor(
        [1.0, 1.0, 1.0 / anisotropy], dtype=dtype
    )
    if covariance == "diag":
        factors = sigma
    else:
        factors = torch.diag_embed(sigma) + torch.tril(0.1 * torch.randn(N, 3, 3, dtype=dtype, generator=gen), -1)
    weights = torch.randn(N, dtype=dtype, generator=gen)
    return points, means, factors, weights


def values_and_grads(inputs, covariance, backend):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = evaluate(*leaves, covariance=covariance, backend=backend)
    g = torch.linspace(-1, 1, out.shape[0], dtype=out.dtype, device=out.device)
    out.backward(g)
    return out.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("covariance", ["full", "diag"])
@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_backends_match_float64_reference(backend, covariance, device, seed):
    skip_off_cpu(backend, device)
    inputs = make_inputs(257, 41, covariance)
    ref_v, ref_g = values_and_grads(inputs, covariance, "loop")
    v, grads = values_and_grads([t.to(device, torch.float32) for t in inputs], covariance, backend)
    assert v.device.type == device and all(g.device.type == device for g in grads)
    assert rel_err(v, ref_v) < 1e-5
    for name, g, rg in zip(("points", "means", "factors", "weights"), grads, ref_g):
        assert rel_err(g, rg) < 1e-5, name
    # float64 agrees to float64 rounding
    v64, g64 = values_and_grads(to_device(inputs, device), covariance, backend)
    assert rel_err(v64, ref_v) < 1e-12
    for g, rg in zip(g64, ref_g):
        assert rel_err(g, rg) < 1e-10


@pytest.mark.parametrize("backend", backend_params(FAST))
@pytest.mark.parametrize("covariance", ["full", "diag"])
def test_gradcheck(backend, covariance, device, seed):
    skip_off_cpu(backend, device)
    inputs = [t.to(device).requires_grad_() for t in make_inputs(6, 4, covariance)]
    fn = lambda *a: evaluate(*a, covariance=covariance, backend=backend)  # noqa: E731
    # a lower-triangular perturbation keeps full factors valid; gradcheck perturbs the upper part too,
    # so check through tril (the upper triangle is not a parameter)
    if covariance == "full":
        fn = lambda p, m, f, w: evaluate(p, m, torch.tril(f), w, backend=backend)  # noqa: E731
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


@requires_ext
def test_opcheck(device, seed):
    p, m, f, w = make_inputs(37, 9, "full")
    for dtype in (torch.float32, torch.float64):
        args = [t.to(device, dtype).requires_grad_() for t in (p, m, f, w)]
        torch.library.opcheck(torch.ops.gsworkbench.field_forward.default, args)
        g = torch.randn(37, dtype=dtype, device=device)
        torch.library.opcheck(torch.ops.gsworkbench.field_backward.default, [g, *[a.detach() for a in args]])


@requires_ext
def test_backward_op_checks_its_gradient(device, seed):
    """field_backward's grad_values: [B], on the inputs' device (a CPU one beside CUDA inputs is refused,
    not read by the kernel)."""
    p, m, f, w = to_device(make_inputs(5, 3, "full"), device)
    with pytest.raises(RuntimeError, match=r"grad_values must be \[B\]"):
        torch.ops.gsworkbench.field_backward(torch.ones(4, dtype=p.dtype, device=device), p, m, f, w)
    if device != "cpu":
        with pytest.raises(RuntimeError, match="grad_values must be on"):
            torch.ops.gsworkbench.field_backward(torch.ones(5, dtype=p.dtype), p, m, f, w)


@requires_ext
def test_torch_compile(device, seed):
    p, m, f, w = [t.to(device, torch.float32) for t in make_inputs(33, 5, "full")]
    compiled = torch.compile(torch.ops.gsworkbench.field_forward, backend="aot_eager", fullgraph=True)
    leaves = [t.requires_grad_() for t in (p, m, f, w)]
    out = compiled(*leaves)
    out.sum().backward()
    ref = evaluate(*[t.detach() for t in leaves], backend="torch")
    assert rel_err(out, ref) < 1e-5
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in leaves)


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@pytest.mark.parametrize("B,N", [(0, 5), (5, 0), (1, 1), (0, 0), (1, 7), (9, 1)])
def test_empty_and_single_sizes(backend, B, N, device, seed):
    skip_off_cpu(backend, device)
    inputs = make_inputs(B, N, "full")
    v, grads = to_device(values_and_grads(to_device(inputs, device), "full", backend), "cpu")
    ref_v, ref_g = values_and_grads(inputs, "full", "vectorized")
    assert v.shape == (B,)
    assert torch.allclose(v, ref_v, rtol=1e-12, atol=1e-14)
    for g, rg, t in zip(grads, ref_g, inputs):
        assert g.shape == t.shape
        assert torch.allclose(g, rg, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", backend_params(FAST))
def test_non_contiguous_inputs(backend, device, seed):
    skip_off_cpu(backend, device)
    p, m, f, w = to_device(make_inputs(50, 7, "full"), device)
    pt = p.T.contiguous().T  # column-major
    mt = torch.stack([m, m], -1)[..., 0]  # strided
    ft = f.transpose(1, 2).contiguous().transpose(1, 2)
    wt = torch.stack([w, w], 1)[:, 0]
    assert not (pt.is_contiguous() or mt.is_contiguous() or ft.is_contiguous() or wt.is_contiguous())
    v, grads = values_and_grads((pt, mt, ft, wt), "full", backend)
    ref_v, ref_g = values_and_grads(to_device((p, m, f, w), "cpu"), "full", "loop")
    assert rel_err(v, ref_v) < 1e-12
    for g, rg in zip(grads, ref_g):
        assert rel_err(g, rg) < 1e-10


@requires_ext
def test_anisotropic_and_nearly_singular(device, seed):
    p, m, f, w = make_inputs(200, 16, "full", anisotropy=1e3)
    f[:4, 2, 2] = 1e-6  # nearly singular: Sigma's smallest eigenvalue ~1e-12
    p[:20] = m[torch.arange(20) % 16] + 1e-7 * torch.randn(20, 3, dtype=torch.float64)  # points on the thin axes
    v, grads = values_and_grads(to_device((p, m, f, w), device), "full", "ext")
    ref_v, ref_g = values_and_grads((p, m, f, w), "full", "torch")  # triangular solves: well conditioned in L
    assert torch.isfinite(v).all() and all(torch.isfinite(g).all() for g in grads)
    assert rel_err(v, ref_v) < 1e-12
    for g, rg in zip(grads, ref_g):
        assert rel_err(g, rg) < 1e-10
    # the loop solves with Sigma itself (condition number ~1e12): it agrees to its own accuracy
    loop_v, loop_g = values_and_grads((p, m, f, w), "full", "loop")
    assert rel_err(loop_v, ref_v) < 1e-5
    # float32: finite, and close to float64 on the moderately anisotropic factors
    p32, m32, f32, w32 = [t.float() for t in make_inputs(200, 16, "full", anisotropy=1e2)]
    v32, g32 = values_and_grads(to_device((p32, m32, f32, w32), device), "full", "ext")
    p64, m64, f64, w64 = (t.double() for t in (p32, m32, f32, w32))
    v64, g64 = values_and_grads((p64, m64, f64, w64), "full", "torch")
    # the first-order float32 error of each term w g, g = exp(-q / 2), with q = |L^-1 (x - mu)|^2 solved
    # in float32 at a relative error of about eps cond(L): eps |w| g (1 + q cond(L)), summed over Gaussians
    z = torch.linalg.solve_triangular(f64[None].expand(len(p64), -1, -1, -1), (p64[:, None] - m64)[..., None],
                                      upper=False)[..., 0]  # fmt: skip
    q = (z * z).sum(-1)
    sv = torch.linalg.svdvals(f64)
    bound = (w64.abs() * torch.exp(-0.5 * q) * (1 + q * sv[:, 0] / sv[:, -1])).sum(1)
    assert float((v32.double() - v64).norm()) <= 2 * torch.finfo(torch.float32).eps * float(bound.norm())
    for g, rg in zip(g32, g64):
        assert rel_err(g, rg) < 1e-4


@requires_ext
def test_ext_matches_on_large_blocks(device, seed):
    """Sizes that are not multiples of the kernel's point block, across several blocks and threads."""
    inputs = [t.float() for t in make_inputs(64 * 7 + 13, 130, "full")]
    v, grads = values_and_grads(to_device(inputs, device), "full", "ext")
    ref_v, ref_g = values_and_grads([t.double() for t in inputs], "full", "torch")
    assert rel_err(v, ref_v) < 1e-5
    for g, rg in zip(grads, ref_g):
        assert rel_err(g, rg) < 1e-5


# ---- bad input ---------------------------------------------------------------------------------


def _good():
    return make_inputs(4, 3, "full", dtype=torch.float32)


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda a: (a[0][:, :2], *a[1:]), r"points must have shape \[\*,3\]"),
        (lambda a: (a[0], a[1][:2], *a[2:]), r"inconsistent N"),
        (lambda a: (a[0], a[1], a[2][:, :2], a[3]), r"factors must have shape"),
        (lambda a: (a[0], a[1], a[2], a[3][None]), r"weights must have shape"),
        (lambda a: (a[0].int(), *a[1:]), r"points must have dtype"),
        (lambda a: (a[0].half(), *a[1:]), r"points must have dtype"),
        (lambda a: (a[0].double(), *a[1:]), r"different dtypes"),
        (lambda a: (a[0].to("meta"), *a[1:]), r"different devices"),
        (lambda a: (a[0], a[1].index_fill(0, torch.tensor([1]), float("nan")), *a[2:]), r"means contains non-finite"),
        (
            lambda a: (a[0], a[1], a[2], a[3].index_fill(0, torch.tensor([0]), float("inf"))),
            r"weights contains non-finite",
        ),
        (lambda a: (a[0], a[1], a[2] * torch.tensor([1.0, -1.0, 1.0]), a[3]), r"positive diagonal"),
        (lambda a: (a[0], a[1], a[2] + torch.triu(torch.ones(3, 3), 1), a[3]), r"lower-triangular"),
        (lambda a: ([[0.0, 0.0, 0.0]], *a[1:]), r"points must be a torch.Tensor"),
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_raises_value_error(mutate, match, backend, device):
    # mutated on the CPU, then CPU tensors moved to the device (a meta tensor stays on meta)
    args = [a.to(device) if isinstance(a, torch.Tensor) and a.device.type == "cpu" else a for a in mutate(_good())]
    with pytest.raises(ValueError, match=match):
        evaluate(*args, backend=backend)


def test_cpu_only_backend_refuses_cuda(device):
    if device == "cpu":
        pytest.skip("the refusal is for tensors on other devices")
    args = [t.to(device) for t in _good()]
    with pytest.raises(ValueError, match="numba.*CPU only"):
        evaluate(*args, backend="numba")


def test_bad_diag_and_options():
    p, m, _, w = _good()
    with pytest.raises(ValueError, match="must be positive"):
        evaluate(p, m, torch.zeros(3, 3), w, covariance="diag")
    with pytest.raises(ValueError, match="backend must be one of"):
        evaluate(p, m, torch.ones(3, 3), w, covariance="diag", backend="gpu")
    with pytest.raises(ValueError, match="covariance must be one of"):
        evaluate(p, m, torch.ones(3, 3), w, covariance="iso")


def test_memory_budget_refuses_instead_of_exhausting_ram():
    p, m, f, w = make_inputs(1000, 1000, "full", dtype=torch.float32)
    with pytest.raises(MemoryBudgetError, match="vectorized.*budget"):
        evaluate(p, m, f, w, backend="vectorized", memory_budget=10 * 2**20)
    with pytest.raises(MemoryBudgetError, match="torch.*budget"):
        evaluate(p, m, f, w, backend="torch", memory_budget=1000)
    # within budget, torch chunks over points and still agrees
    v = evaluate(p, m, f, w, backend="torch", memory_budget=2**20)
    assert rel_err(v, evaluate(p.double(), m.double(), f.double(), w.double(), backend="torch")) < 1e-5


def test_missing_extension_message(tmp_path):
    """Without _C the package imports, and backend='ext' says how to build it."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['gsworkbench._C'] = None\n"
        "import torch, gsworkbench.field as f\n"
        "from gsworkbench._ext import ExtensionMissingError\n"
        "x = torch.zeros(2, 3); m = torch.zeros(1, 3); L = torch.eye(3)[None]; w = torch.ones(1)\n"
        "print(float(f.evaluate(x, m, L, w, backend='torch')[0]))\n"
        "try:\n    f.evaluate(x, m, L, w, backend='ext')\nexcept ExtensionMissingError as e:\n    print('ERR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("1.0")
    assert "ERR" in out.stdout and "make setup" in out.stdout


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_numba_peer_gives_zero_not_subnormal_far_out(dtype):
    """The numba peer's exp(-q/2) is 0 under 2^(27 - bias) (so that its products stay out of the subnormal
    range, which Intel cores run through microcode assists) and the true value above it."""
    fl = torch.finfo(dtype)
    bias = 127 if dtype == torch.float32 else 1023  # the exponent bias
    # points at distances r whose exp(-r^2 / 2) is 2^t: well above the cutoff, just above it, just under
    # it, far under it
    ts = torch.tensor([-10.0, 28.0 - bias, 26.0 - bias, 7.0 - bias], dtype=torch.float64)
    r = torch.sqrt(-2.0 * ts * math.log(2.0))
    points = torch.stack([r, torch.zeros_like(r), torch.zeros_like(r)], -1).to(dtype)
    means, factors = torch.zeros(1, 3, dtype=dtype), torch.eye(3, dtype=dtype)[None]
    v = evaluate(points, means, factors, torch.full((1,), 0.5, dtype=dtype), backend="numba")
    ref = 0.5 * torch.exp(-0.5 * points[:, 0].double() ** 2)
    above = torch.tensor([True, True, False, False])
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    assert ((v[above].double() - ref[above]).abs() / ref[above]).max() < tol
    assert (v[~above] == 0).all()
    assert not ((v != 0) & (v.abs() < fl.tiny)).any(), "a subnormal value"
