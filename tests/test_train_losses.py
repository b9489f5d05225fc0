"""The one-pass photometric loss terms (csrc/cpu/photometric_loss.cpp) against the torch reference
(losses.l1, losses.ssim_torch, the mean squared error), values and gradients, in float64 and float32."""

from __future__ import annotations

import pytest
import torch
from conftest import rel_err, requires_ext
from hypothesis import given, settings
from hypothesis import strategies as st

from gsworkbench.train.losses import l1, photometric_loss, ssim_torch


def _reference(img: torch.Tensor, ref: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The three terms and d(g . terms)/d img by autograd through the torch reference (float64)."""
    x = img.detach().double().requires_grad_()
    r = ref.double()
    terms = torch.stack([l1(x, r), ssim_torch(x, r), ((x - r) ** 2).mean()])
    (grad,) = torch.autograd.grad((terms * g.double()).sum(), x)
    return terms.detach(), grad


@requires_ext
@settings(max_examples=25, deadline=None)
@given(
    h=st.integers(11, 110),  # past the kernel's 32-row bands, with partial last bands
    w=st.integers(11, 60),
    c=st.integers(1, 4),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    seed=st.integers(0, 2**31 - 1),
    threads=st.sampled_from([1, 2]),  # one thread: every band after the first reuses its predecessor's rows
)
def test_terms_and_gradient_match_the_torch_reference(h, w, c, dtype, seed, threads):
    from gsworkbench.train import fused_losses

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _check_terms(h, w, c, dtype, seed, fused_losses)
    finally:
        torch.set_num_threads(before)


def _check_terms(h: int, w: int, c: int, dtype: torch.dtype, seed: int, fused_losses) -> None:  # noqa: ANN001

    gen = torch.Generator().manual_seed(seed)
    img, ref = torch.rand(2, h, w, c, generator=gen, dtype=torch.float64).unbind(0)
    ref = 0.6 * ref + 0.4 * img  # correlated, as a render and its target are
    g = torch.randn(3, generator=gen, dtype=torch.float64)
    want, want_grad = _reference(img, ref, g)
    x = img.to(dtype).requires_grad_()
    got = fused_losses.photometric_terms(x, ref.to(dtype))
    (got * g.to(dtype)).sum().backward()
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert rel_err(got.double(), want) < tol
    assert rel_err(x.grad.double(), want_grad) < 10 * tol


@requires_ext
def test_gradcheck_opcheck_and_the_no_grad_call(seed):
    from gsworkbench.train import fused_losses

    gen = torch.Generator().manual_seed(seed)
    img, ref = torch.rand(2, 13, 12, 2, generator=gen, dtype=torch.float64).unbind(0)
    x = img.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a: fused_losses.photometric_terms(a, ref), (x,), eps=1e-6, atol=1e-8)
    for with_grad in (True, False):
        torch.library.opcheck(torch.ops.gsworkbench.photometric_terms, (x, ref, with_grad))
    with torch.no_grad():  # no gradient asked: the SSIM gradient is not computed, the terms are the same
        terms, sgrad = torch.ops.gsworkbench.photometric_terms(img, ref, False)
    assert sgrad.numel() == 0 and rel_err(terms, _reference(img, ref, torch.ones(3))[0]) < 1e-12
    with pytest.raises(RuntimeError, match="with_grad=True"):
        torch.ops.gsworkbench.photometric_terms_backward(torch.ones(3, dtype=torch.float64), img, ref, sgrad)
    with pytest.raises(RuntimeError, match="at least 11 x 11"):
        torch.ops.gsworkbench.photometric_terms(img[:10], ref[:10], True)


@requires_ext
def test_photometric_loss_ext_matches_torch_and_reports_mse(seed):
    gen = torch.Generator().manual_seed(seed)
    img, ref = torch.rand(2, 40, 37, 3, generator=gen).unbind(0)
    grads, parts = {}, {}
    for backend in ("ext", "torch"):
        x = img.clone().requires_grad_()
        loss, parts[backend] = photometric_loss(x, ref, 0.2, backend)
        loss.backward()
        grads[backend] = x.grad
    assert rel_err(grads["ext"], grads["torch"]) < 1e-5
    for k in ("l1", "ssim"):
        assert abs(float(parts["ext"][k]) - float(parts["torch"][k])) < 1e-6
    assert abs(float(parts["ext"]["mse"]) - float(((img - ref) ** 2).mean())) < 1e-7
    # batches, a ref needing gradients, and lambda 0 take the reference path
    loss, p = photometric_loss(img[None].requires_grad_(), ref[None], 0.2, "ext")
    assert "mse" not in p
    loss, p = photometric_loss(img, ref, 0.0, "ext")
    assert set(p) == {"l1"}
