"""Property tests (hypothesis, bounded example counts): SH rotation invariance, transforms' compose
and inverse, and the PLY round trip."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from conftest import ext_built, rel_err
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet
from gsworkbench.io import read_ply, write_ply
from gsworkbench.transforms import Frames, compose, inverse, make_frames, transform

FAST = settings(max_examples=25, deadline=None)
BACKENDS = ["numpy", "numba", "torch"] + (["ext"] if ext_built() else [])

seeds = st.integers(0, 2**31 - 1)
quaternions = st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(lambda q: np.linalg.norm(q) > 0.2)
vectors = st.lists(st.floats(-3, 3), min_size=3, max_size=3)
scales = st.one_of(st.floats(0.3, 3.0), st.lists(st.floats(0.3, 3.0), min_size=3, max_size=3))


@st.composite
def frames(draw: st.DrawFn) -> Frames:
    """One transform x -> s R (x - c) + c + t: a similarity, or a non-uniform scale along world axes."""
    return make_frames(rotation=draw(quaternions), translation=draw(vectors), scale=draw(scales),
                       center=draw(vectors))  # fmt: skip


def random_splats(n: int, degree: int, seed: int) -> SplatSet:
    """Float64 splats with unnormalised quaternions and varied scales."""
    g = torch.Generator().manual_seed(seed)
    k = gaussians.num_sh_bases(degree) - 1

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return SplatSet(randn(n, 3) * 2, randn(n, 4), randn(n, 3) - 2, randn(n), randn(n, 3), randn(n, k, 3) * 0.3)


def assert_same_splats(a: SplatSet, b: SplatSet, tol: float, sh: bool = True) -> None:
    """Same Gaussians: means, covariances (the quaternion/scale split may differ) and SH."""
    assert rel_err(a.means, b.means) < tol
    assert rel_err(a.covariances, b.covariances) < tol
    assert torch.equal(a.opacity_logits, b.opacity_logits) and torch.equal(a.sh_dc, b.sh_dc)
    if sh:
        assert rel_err(a.sh_rest, b.sh_rest) < tol


# ---- SH rotation invariance ---------------------------------------------------------------------


@FAST
@given(q=quaternions, degree=st.integers(1, 3), seed=seeds)
def test_sh_rotation_invariance(q: list[float], degree: int, seed: int) -> None:
    """Coefficients rotated by R, evaluated at R d, equal the originals evaluated at d (every d)."""
    g = torch.Generator().manual_seed(seed)
    R = gaussians.quat_to_rotmat(torch.tensor(q, dtype=torch.float64))
    coeffs = torch.randn(5, gaussians.num_sh_bases(degree), 3, generator=g, dtype=torch.float64)
    dirs = torch.randn(5, 3, generator=g, dtype=torch.float64)
    M = gaussians.sh_rotation_matrix(R, degree)
    rotated = torch.cat([coeffs[:, :1], torch.einsum("kj,njc->nkc", M, coeffs[:, 1:])], dim=1)
    assert rel_err(gaussians.eval_sh(rotated, dirs @ R.T, degree), gaussians.eval_sh(coeffs, dirs, degree)) < 1e-12


@FAST
@given(f=frames(), backend=st.sampled_from(BACKENDS), seed=seeds)
def test_transformed_splats_look_the_same_from_the_transformed_viewpoint(f: Frames, backend: str, seed: int) -> None:
    """The SH colour a transformed splat shows toward the transformed direction is the original's
    (the view direction turns with the rotation part of the transform)."""
    s = random_splats(8, 3, seed)
    out = transform(s, f, backend=backend)
    dirs = torch.randn(8, 3, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    R = torch.from_numpy(f.rotation[0])
    assert rel_err(gaussians.eval_sh(out.sh, dirs @ R.T, 3), gaussians.eval_sh(s.sh, dirs, 3)) < 1e-10


# ---- compose and inverse ------------------------------------------------------------------------


@FAST
@given(f=frames(), backend=st.sampled_from(BACKENDS), seed=seeds)
def test_compose_with_inverse_is_identity(f: Frames, backend: str, seed: int) -> None:
    s = random_splats(16, 2, seed)
    for identity in (compose(inverse(f), f), compose(f, inverse(f))):
        assert np.abs(identity.A - np.eye(3)).max() < 1e-12 and np.abs(identity.b).max() < 1e-11
        assert_same_splats(transform(s, identity, backend=backend), s, 1e-10)
    back = transform(transform(s, f, backend=backend), inverse(f), backend=backend)  # one after the other
    assert_same_splats(back, s, 1e-10)
    if f.is_similarity:  # the same parameters come back (q or -q: one rotation), not only the covariances
        sign = (back.quats * s.quats).sum(-1, keepdim=True).sign()  # -1 where R's quaternion has w = 0
        assert rel_err(back.quats * sign, s.quats) < 1e-10 and rel_err(back.log_scales, s.log_scales) < 1e-10


@FAST
@given(fs=st.lists(frames(), min_size=3, max_size=3), backend=st.sampled_from(BACKENDS), seed=seeds)
def test_compose_is_associative_and_equals_sequential_application(fs: list[Frames], backend: str, seed: int) -> None:
    a, b, c = fs
    s = random_splats(16, 2, seed)
    left, right = compose(c, compose(b, a)), compose(compose(c, b), a)
    assert np.abs(left.A - right.A).max() < 1e-12 * np.abs(left.A).max()
    assert np.abs(left.b - right.b).max() < 1e-12 * (1 + np.abs(left.b).max())
    one = transform(s, left, backend=backend)
    assert_same_splats(transform(s, right, backend=backend), one, 1e-10)
    # SH turn by the polar rotation of each A: the product of those is the polar rotation of the product
    # only when at most one of the three is not a similarity
    sh_too = sum(not f.is_similarity for f in fs) <= 1
    stepwise = transform(transform(transform(s, a, backend=backend), b, backend=backend), c, backend=backend)
    assert_same_splats(stepwise, one, 1e-9, sh=sh_too)


# ---- the PLY round trip -------------------------------------------------------------------------


@st.composite
def splat_sets(draw: st.DrawFn) -> SplatSet:
    """Any finite float32 splats (subnormals, -0.0 and the extremes included), 0-12 of them."""
    n, degree = draw(st.integers(0, 12)), draw(st.integers(0, 3))
    k = gaussians.num_sh_bases(degree) - 1
    elements = st.floats(allow_nan=False, allow_infinity=False, width=32)

    def arr(*shape: int) -> torch.Tensor:
        return torch.from_numpy(draw(hnp.arrays(np.float32, shape, elements=elements)))

    return SplatSet(arr(n, 3), arr(n, 4), arr(n, 3), arr(n), arr(n, 3), arr(n, k, 3))


@settings(max_examples=40, deadline=None)
@given(s=splat_sets(), double=st.booleans())
def test_ply_round_trip(s: SplatSet, double: bool) -> None:
    """write_ply then read_ply gives the same splats, bit for bit (float32, or float64 when asked)."""
    dtype = torch.float64 if double else torch.float32
    s = s.to(dtype)
    with tempfile.TemporaryDirectory() as d:
        back = read_ply(write_ply(Path(d) / "s.ply", s, dtype), dtype)
    assert len(back) == len(s) and back.sh_degree == s.sh_degree
    bits = torch.int64 if double else torch.int32  # compare bit patterns: -0.0 and subnormals count
    for name in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        x, y = getattr(back, name), getattr(s, name)
        assert x.dtype == dtype and x.shape == y.shape, name
        assert torch.equal(x.view(bits), y.view(bits)), name
