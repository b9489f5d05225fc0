"""The shared Gaussian math module."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import rel_err

from gsworkbench.core import gaussians as G


def test_quaternion_rotation_round_trip(seed):
    q = torch.randn(100, 4, dtype=torch.float64)
    q[:4] = torch.eye(4, dtype=torch.float64) * 3 + 0.1 * q[:4]  # each of w, x, y, z the largest once
    R = G.quat_to_rotmat(q)
    eye = torch.eye(3, dtype=torch.float64)
    assert rel_err(R @ R.transpose(-1, -2), eye.expand_as(R)) < 1e-14
    assert torch.allclose(torch.linalg.det(R), torch.ones(100, dtype=torch.float64))
    q2 = G.rotmat_to_quat(R)
    assert rel_err(G.quat_to_rotmat(q2), R) < 1e-13
    qn = G.quat_normalize(q)
    # the same unit quaternion, signed so that w >= 0 (q and -q are one rotation): signs are compared
    assert (q2[:, 0] >= 0).all()
    assert rel_err(q2, qn * qn[:, :1].sign()) < 1e-13


def test_quaternion_product_is_rotation_product(seed):
    a, b = torch.randn(2, 50, 4, dtype=torch.float64)
    lhs = G.quat_to_rotmat(G.quat_multiply(a, b))
    rhs = G.quat_to_rotmat(a) @ G.quat_to_rotmat(b)
    assert rel_err(lhs, rhs) < 1e-13


def test_covariance_and_cholesky(seed):
    s = torch.rand(30, 3, dtype=torch.float64) + 0.1
    q = torch.randn(30, 4, dtype=torch.float64)
    sigma = G.covariance_from_scales_quats(s, q)
    ev = torch.linalg.eigvalsh(sigma)
    assert rel_err(ev.sort(-1).values, (s**2).sort(-1).values) < 1e-12
    L = G.cholesky_from_scales_quats(s, q)
    raw = G.raw_from_cholesky(L)
    assert rel_err(G.cholesky_from_raw(raw), L) < 1e-13
    assert rel_err(L @ L.transpose(-1, -2), sigma) < 1e-13


def test_activations(seed):
    o = torch.rand(50, dtype=torch.float64) * 0.98 + 0.01
    assert rel_err(G.opacity_from_logit(G.logit_from_opacity(o)), o) < 1e-13
    s = torch.rand(50, 3, dtype=torch.float64) + 0.01
    assert rel_err(G.scales_from_log(G.log_from_scales(s)), s) < 1e-15


def test_sh_basis_is_orthonormal():
    """Quadrature on a Fibonacci sphere: int Y_i Y_j dOmega = delta_ij."""
    n = 20000
    i = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1 - 2 * i / n
    phi = math.pi * (1 + 5**0.5) * i
    r = torch.sqrt(1 - z * z)
    d = torch.stack([r * torch.cos(phi), r * torch.sin(phi), z], -1)
    Y = G.sh_basis(d, 3)
    gram = (Y.T @ Y) * (4 * math.pi / n)
    assert torch.allclose(gram, torch.eye(16, dtype=torch.float64), atol=2e-3)


def test_eval_sh_and_colour(seed):
    coeffs = torch.randn(10, 16, 3, dtype=torch.float64)
    dirs = torch.randn(10, 3, dtype=torch.float64)
    v = G.eval_sh(coeffs, dirs * 7.0, 3)  # directions are normalised
    u = dirs / dirs.norm(dim=-1, keepdim=True)
    assert rel_err(v, (G.sh_basis(u, 3)[..., None] * coeffs).sum(-2)) < 1e-14
    assert G.sh_to_color(coeffs, dirs, 0).min() >= 0
    rgb = torch.rand(10, 3, dtype=torch.float64)
    assert rel_err(G.sh_to_color(G.rgb_to_sh_dc(rgb)[:, None, :], dirs, 0), rgb) < 1e-14
    with pytest.raises(ValueError, match="sh degree"):
        G.num_sh_bases(4)
    with pytest.raises(ValueError, match="needs 16 coefficients"):
        G.eval_sh(coeffs[:, :9], dirs, 3)
    assert [G.sh_degree_from_bases(k) for k in (1, 4, 9, 16)] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="1, 4, 9 or 16"):
        G.sh_degree_from_bases(5)
