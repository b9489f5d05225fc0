"""The CUDA transform kernel and the torch backend on a GPU, against the float64 CPU reference
(skipped without a GPU; the ext part also without a CUDA build)."""

from __future__ import annotations

import pytest
import torch
from conftest import rel_err, requires_cuda
from test_transforms import PARAMS, random_splats, reference

from gsworkbench.transforms import make_frames, transform
from gsworkbench.transforms.api import has_ext_kernel

pytestmark = requires_cuda


@pytest.mark.parametrize("backend", ["torch", "ext"])
@pytest.mark.parametrize("degree", [0, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_matches_reference(backend, degree, dtype, seed):
    if backend == "ext" and not has_ext_kernel("cuda"):
        pytest.skip("extension built without CUDA kernels")
    s = random_splats(1000 + 37, degree, seed)
    tol = 2e-6 if dtype == torch.float32 else 1e-11
    for kw in PARAMS:
        means, cov, sh_rest = reference(s, **kw)
        out = transform(s.to("cuda", dtype), backend=backend, **kw)
        assert out.means.is_cuda
        assert rel_err(out.means.cpu(), means) < tol
        assert rel_err(out.covariances.cpu(), cov) < tol * 10
        if degree:
            assert rel_err(out.sh_rest.cpu(), sh_rest) < tol


def test_cuda_ext_batch_and_opcheck(seed):
    if not has_ext_kernel("cuda"):
        pytest.skip("extension built without CUDA kernels")
    s = random_splats(300, 3, seed).to("cuda")
    rot = torch.randn(3, 4, dtype=torch.float64)
    outs = transform(s, rotation=rot, backend="ext")
    for f in range(3):
        one = transform(s.to("cpu"), rotation=rot[f], backend="numpy")
        assert rel_err(outs[f].sh_rest.cpu(), one.sh_rest) < 2e-6
    f = make_frames(**PARAMS[1])
    p = [torch.from_numpy(v).float().cuda() for v in f.kernel_params(3).values()]
    outs = [torch.empty(1, 300, 3, device="cuda"), torch.empty(1, 300, 4, device="cuda"),
            torch.empty(1, 300, 3, device="cuda"), torch.empty(1, 300, 15, 3, device="cuda")]  # fmt: skip
    args = (s.means, s.quats, s.log_scales, s.sh_rest, *p, True, *outs)
    torch.library.opcheck(torch.ops.gsworkbench.transform_splats.default, args)
