"""The CUDA field kernels against the CPU reference (skipped without a GPU or CUDA build)."""

from __future__ import annotations

import pytest
import torch
from conftest import rel_err, requires_cuda
from test_field import make_inputs, values_and_grads

from gsworkbench._ext import has_cuda_kernels

pytestmark = [
    requires_cuda,
    pytest.mark.skipif(not has_cuda_kernels(), reason="extension built without CUDA kernels"),
]


@pytest.mark.parametrize("covariance", ["full", "diag"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_matches_cpu_reference(covariance, dtype, seed):
    inputs = make_inputs(1000 + 37, 300, covariance)
    ref_v, ref_g = values_and_grads(inputs, covariance, "torch")
    v, grads = values_and_grads([t.to("cuda", dtype) for t in inputs], covariance, "ext")
    tol = 1e-5 if dtype == torch.float32 else 1e-11
    assert rel_err(v.cpu(), ref_v) < tol
    for g, rg in zip(grads, ref_g):
        assert rel_err(g.cpu(), rg) < tol * 10


def test_cuda_gradcheck_and_opcheck(seed):
    inputs = [t.cuda().requires_grad_() for t in make_inputs(9, 4, "full")]
    fn = lambda p, m, f, w: torch.ops.gsworkbench.field_forward(p, m, torch.tril(f), w)  # noqa: E731
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
    torch.library.opcheck(torch.ops.gsworkbench.field_forward.default, [t.float() for t in inputs])
