"""Splat transforms: every backend against a float64 reference, SH rotation properties, batches,
inverse/compose, out buffers, gradients (torch) and opcheck (ext), and input errors. The torch and
ext backends run on every device of the ``device`` fixture (numpy and numba on the CPU only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import backend_params, ext_built, requires_ext
from conftest import rel_err as rel

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet, synthetic_splats
from gsworkbench.transforms import Frames, _numba_impl, compose, inverse, make_frames, transform
from gsworkbench.transforms.frames import nearest_rotation

BACKENDS = ["numpy", "numba", "torch"] + (["ext"] if ext_built() else [])  # loops over backends
BACKEND_PARAMS = backend_params(["numpy", "numba", "torch", "ext"])
CPU_ONLY = ("numpy", "numba")
FIELDS = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")


def on_device(splats: SplatSet, backend: str, device: str) -> SplatSet:
    """``splats`` on ``device``; skips the CPU-only backends on other devices."""
    if device != "cpu" and backend in CPU_ONLY:
        pytest.skip(f"backend {backend!r} runs on the CPU only")
    return splats.to(device)


def random_rotation(g: torch.Generator) -> torch.Tensor:
    return gaussians.quat_to_rotmat(torch.randn(4, generator=g, dtype=torch.float64))


def random_splats(n: int, degree: int, seed: int) -> SplatSet:
    """Fresh random splats (not the synthetic layout): unnormalised quats, varied scales."""
    g = torch.Generator().manual_seed(seed)
    k = gaussians.num_sh_bases(degree) - 1
    return SplatSet(
        torch.randn(n, 3, generator=g) * 2,
        torch.randn(n, 4, generator=g) * 1.7,
        torch.randn(n, 3, generator=g) - 3,
        torch.randn(n, generator=g),
        torch.randn(n, 3, generator=g),
        torch.randn(n, k, 3, generator=g) * 0.3,
    )


def reference(splats: SplatSet, **kw) -> SplatSet:  # noqa: ANN003
    """The float64 reference: independent closed forms from gaussians.py (torch, float64)."""
    s = splats.to(torch.float64)
    f = make_frames(**kw)
    A, b = torch.from_numpy(f.A[0]), torch.from_numpy(f.b[0])
    means = s.means @ A.T + b
    cov = A @ s.covariances @ A.T
    R = torch.from_numpy(f.rotation[0])
    k = s.sh_rest.shape[1]
    M = gaussians.sh_rotation_matrix(R, s.sh_degree) if k else torch.zeros(0, 0, dtype=torch.float64)
    sh_rest = torch.einsum("kj,njc->nkc", M, s.sh_rest)
    return means, cov, sh_rest


PARAMS = [
    dict(rotation=[0.3, 0.5, -0.2, 0.7], translation=[1.0, -2.0, 0.5], scale=1.7, center=[0.2, 0.1, -0.3]),
    dict(rotation=[0.9, -0.1, 0.3, 0.2], translation=[0.0, 0.5, 0.0], scale=[0.5, 2.0, 1.3],
         center=[1.0, 0.0, 0.0]),  # fmt: skip
]


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@pytest.mark.parametrize("kw", PARAMS, ids=["similarity", "nonuniform"])
def test_backends_match_float64_reference(backend: str, degree: int, kw: dict, device: str, seed: int) -> None:
    for i, n in enumerate([1, 17, 32, 531]):  # 32: the last SIMD block of 16 is full
        s = random_splats(n, degree, seed + i)
        means, cov, sh_rest = reference(s, **kw)
        s_dev = on_device(s, backend, device)
        out = transform(s_dev, backend=backend, **kw)
        assert out.means.dtype == torch.float32 and out.means.device.type == device
        assert out.opacity_logits is s_dev.opacity_logits and out.sh_dc is s_dev.sh_dc
        out = out.to("cpu")
        assert rel(out.means, means) < 2e-6
        assert rel(out.covariances, cov) < 2e-5
        if degree:
            assert rel(out.sh_rest, sh_rest) < 2e-6
        if "scale" in kw and np.ndim(kw["scale"]) == 0:  # similarity: exact parameter rule
            qr = gaussians.rotmat_to_quat(torch.from_numpy(make_frames(rotation=kw["rotation"]).A[0]))
            q = gaussians.quat_multiply(qr, s.quats.double())
            assert rel(out.quats, q) < 2e-6
            assert rel(out.log_scales, s.log_scales.double() + np.log(kw["scale"])) < 2e-6
        else:  # general: unit quaternions
            assert torch.allclose(out.quats.norm(dim=-1), torch.ones(n), atol=1e-5)


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_float64_backends(backend: str, device: str, seed: int) -> None:
    s = random_splats(100, 3, seed).to(torch.float64)
    for kw in PARAMS:
        means, cov, sh_rest = reference(s, **kw)
        out = transform(on_device(s, backend, device), backend=backend, **kw)
        assert out.means.dtype == torch.float64
        assert rel(out.means, means) < 1e-12 and rel(out.sh_rest, sh_rest) < 1e-12
        assert rel(out.covariances, cov) < 1e-11


@pytest.mark.parametrize("backend", BACKENDS)
def test_sh_colour_invariant_under_rigid_motion(backend: str, seed: int) -> None:
    """Splats and camera moved by the same rigid transform: every colour stays the same."""
    g = torch.Generator().manual_seed(seed)
    s = random_splats(200, 3, seed + 1).to(torch.float64)
    R = random_rotation(g)
    t = torch.randn(3, generator=g, dtype=torch.float64)
    c = torch.randn(3, generator=g, dtype=torch.float64)
    out = transform(s, rotation=R, translation=t, center=c, backend=backend)
    for _ in range(3):
        p = torch.randn(3, generator=g, dtype=torch.float64) * 4
        p2 = R @ (p - c) + c + t
        before = gaussians.eval_sh(s.sh, s.means - p, 3)
        after = gaussians.eval_sh(out.sh, out.means - p2, 3)
        assert rel(after, before) < 1e-10


def test_sh_rotation_composition_and_orthogonality(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    R1, R2 = random_rotation(g), random_rotation(g)
    for degree in (1, 2, 3):
        D1, D2 = gaussians.sh_rotation_matrix(R1, degree), gaussians.sh_rotation_matrix(R2, degree)
        D12 = gaussians.sh_rotation_matrix(R1 @ R2, degree)
        assert (D12 - D1 @ D2).abs().max() < 1e-12
        assert (D1 @ D1.T - torch.eye(D1.shape[0], dtype=torch.float64)).abs().max() < 1e-12
        assert (gaussians.sh_rotation_matrix(torch.eye(3, dtype=torch.float64), degree)
                - torch.eye(D1.shape[0], dtype=torch.float64)).abs().max() < 1e-12  # fmt: skip
        # band 1 in the 3DGS basis (-y, z, -x) is R itself, permuted and signed
        P = torch.tensor([[0, -1, 0], [0, 0, 1], [-1, 0, 0]], dtype=torch.float64)
        assert (gaussians.sh_band_rotations(R1, 1)[0] - P @ R1 @ P.T).abs().max() < 1e-12
        # batched rotations give the per-rotation matrices
        both = gaussians.sh_rotation_matrix(torch.stack([R1, R2]), degree)
        assert (both[0] - D1).abs().max() < 1e-14 and (both[1] - D2).abs().max() < 1e-14


def test_nonuniform_sh_uses_polar_rotation() -> None:
    s = random_splats(50, 3, 2).to(torch.float64)
    kw = PARAMS[1]
    out = transform(s, backend="numpy", **kw)
    f = make_frames(**kw)
    Q = nearest_rotation(f.A)[0]
    assert np.abs(Q @ Q.T - np.eye(3)).max() < 1e-12 and np.linalg.det(Q) > 0
    M = gaussians.sh_rotation_matrix(torch.from_numpy(Q), 3)
    assert rel(out.sh_rest, torch.einsum("kj,njc->nkc", M, s.sh_rest)) < 1e-12


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_frame_batch_matches_single_calls(backend: str, device: str, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    s = on_device(random_splats(40, 2, seed + 1), backend, device)
    F = 3
    rot = torch.randn(F, 4, generator=g, dtype=torch.float64)
    trans = torch.randn(F, 3, generator=g, dtype=torch.float64)
    for scale in (torch.rand(F, generator=g, dtype=torch.float64) + 0.5,
                  torch.rand(F, 3, generator=g, dtype=torch.float64) + 0.5):  # fmt: skip
        outs = transform(s, rotation=rot, translation=trans, scale=scale, backend=backend)
        assert isinstance(outs, list) and len(outs) == F
        for f in range(F):
            one = transform(s, rotation=rot[f], translation=trans[f], scale=scale[f], backend=backend)
            for name in ("means", "sh_rest"):
                assert rel(getattr(outs[f], name), getattr(one, name)) < 1e-6
            assert rel(outs[f].covariances, one.covariances) < 1e-5


def test_scale_shapes_with_frames() -> None:
    rot5 = torch.randn(5, 4, dtype=torch.float64)
    f = make_frames(rotation=rot5, scale=[1.0, 2.0, 3.0])  # one 3-vector for all 5 frames
    assert len(f) == 5 and np.allclose(np.linalg.norm(f.A, axis=2), [[1.0, 2.0, 3.0]] * 5)
    f = make_frames(rotation=rot5[:3], scale=[1.0, 2.0, 3.0])  # F = 3: one scalar per frame
    assert np.allclose(f.scale, [1.0, 2.0, 3.0]) and f.is_similarity
    f = make_frames(rotation=rot5[:3], scale=[[1.0, 2.0, 3.0]])  # a row: the 3-vector for every frame
    assert not f.is_similarity and np.allclose(np.linalg.norm(f.A, axis=2), [[1.0, 2.0, 3.0]] * 3)
    assert not make_frames(scale=[1.0, 2.0, 3.0]).batched


@pytest.mark.parametrize("backend", BACKENDS)
def test_inverse_and_compose(backend: str, seed: int) -> None:
    s = random_splats(64, 3, seed)
    for kw in PARAMS:
        f = make_frames(**kw)
        back = transform(transform(s, f, backend=backend), inverse(f), backend=backend)
        assert rel(back.means, s.means) < 1e-6
        assert rel(back.sh_rest, s.sh_rest) < 1e-6
        assert rel(back.covariances, s.covariances) < 1e-5
        if f.is_similarity:  # exact parameters back (quats keep their norm)
            assert rel(back.quats, s.quats) < 1e-6 and rel(back.log_scales, s.log_scales) < 1e-6
    f1, f2 = make_frames(**PARAMS[0]), make_frames(**PARAMS[1])
    two = transform(transform(s, f1, backend=backend), f2, backend=backend)
    one = transform(s, compose(f2, f1), backend=backend)
    assert rel(one.means, two.means) < 1e-6 and rel(one.covariances, two.covariances) < 1e-5
    assert rel(one.sh_rest, two.sh_rest) < 1e-5
    assert inverse(rotation=[1.0, 0, 0, 0], translation=[1.0, 2, 3]).b.tolist() == [[-1.0, -2.0, -3.0]]


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_out_buffers_and_in_place(backend: str, device: str) -> None:
    s = on_device(random_splats(33, 3, 7), backend, device)
    for kw in PARAMS:
        want = transform(s, backend=backend, **kw)
        out = SplatSet(*[torch.full_like(getattr(s, n), 7.0) for n in FIELDS])
        buffers = {n: getattr(out, n) for n in FIELDS}
        got = transform(s, backend=backend, out=out, **kw)
        assert got is out
        for name in FIELDS:
            assert torch.equal(getattr(got, name), getattr(want, name)), name
        for name in ("means", "quats", "log_scales", "sh_rest"):  # written into out's own tensors
            assert getattr(got, name) is buffers[name]
        # the unchanged fields are shared with the input (not copied), or copied on request
        assert got.opacity_logits is s.opacity_logits and got.sh_dc is s.sh_dc
        out = SplatSet(*[torch.full_like(getattr(s, n), 7.0) for n in FIELDS])
        buffers = {n: getattr(out, n) for n in FIELDS}
        transform(s, backend=backend, out=out, copy_unchanged=True, **kw)
        for name in FIELDS:
            assert getattr(out, name) is buffers[name] and torch.equal(buffers[name], getattr(want, name)), name
        inplace = s.clone()
        transform(inplace, backend=backend, out=inplace, **kw)
        for name in FIELDS:
            assert torch.equal(getattr(inplace, name), getattr(want, name)), name
    outs = [s.clone(), s.clone()]
    rot = torch.randn(2, 4, dtype=torch.float64)
    res = transform(s, rotation=rot, backend=backend, out=outs)
    assert res is outs
    for o, w in zip(outs, transform(s, rotation=rot, backend=backend), strict=True):
        assert torch.equal(o.means, w.means) and torch.equal(o.sh_rest, w.sh_rest)


def test_torch_backend_gradcheck(device: str, seed: int) -> None:
    s = random_splats(3, 2, seed).to(torch.float64).to(device)
    names = ("means", "quats", "log_scales", "sh_rest")
    for kw in PARAMS:
        def fn(*tensors, kw=kw):  # noqa: ANN002, ANN202
            x = SplatSet(*tensors[:3], s.opacity_logits, s.sh_dc, tensors[3])
            o = transform(x, backend="torch", **kw)
            return o.means, o.covariances, o.sh_rest
        inputs = tuple(getattr(s, n).clone().requires_grad_(True) for n in names)
        assert torch.autograd.gradcheck(fn, inputs)
    # the auto backend picks torch for inputs that require grad
    x = s.clone()
    x.means.requires_grad_(True)
    transform(x, rotation=[1.0, 0, 0, 0], translation=[1.0, 0, 0]).means.sum().backward()
    assert torch.equal(x.means.grad, torch.ones_like(x.means))


@requires_ext
def test_ext_opcheck_and_no_grad(device: str) -> None:
    import gsworkbench.transforms.ops  # noqa: F401  (registers the fake kernel)

    s = random_splats(21, 3, 9).to(device)
    for general, kw in zip((False, True), PARAMS, strict=True):
        f = make_frames(**kw)
        p = [v.float().to(device) for v in f.params(3).values()]  # affine, quat_r, log_s, sh_rot
        outs = [torch.empty(1, 21, 3, device=device), torch.empty(1, 21, 4, device=device),
                torch.empty(1, 21, 3, device=device), torch.empty(1, 21, 15, 3, device=device)]  # fmt: skip
        args = (s.means, s.quats, s.log_scales, s.sh_rest, *p, general, *outs)
        torch.library.opcheck(torch.ops.gsworkbench.transform_splats.default, args)
    x = s.clone()
    x.sh_rest.requires_grad_(True)
    with pytest.raises(ValueError, match="not differentiable"):
        transform(x, rotation=[1.0, 0, 0, 0], backend="ext")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(rotation=[[1.0, 0, 0], [0, 1, 0], [0, 0, 2]]), "orthonormal"),
        (dict(rotation=[[1.0, 0, 0], [0, 1, 0], [0, 0, -1]]), "determinant"),
        (dict(rotation=[0.0, 0, 0, 0]), "non-zero"),
        (dict(rotation=[1.0, 2.0]), "rotation must be"),
        (dict(scale=-1.0), "positive"),
        (dict(scale=[1.0, 0.0, 1.0]), "positive"),
        (dict(translation=[1.0, float("nan"), 0]), "non-finite"),
        (dict(translation=[[1.0, 0, 0]] * 2, rotation=[[1.0, 0, 0, 0]] * 3), "inconsistent number of frames"),
        (dict(translation=[1.0, 2.0]), r"shape \[3\] or \[F,3\]"),
        (dict(backend="cuda"), "backend must be one of"),
    ],
)
def test_bad_input_raises_value_error(kw: dict, match: str) -> None:
    s = random_splats(4, 1, 0)
    with pytest.raises(ValueError, match=match):
        transform(s, **kw)


def test_bad_out_and_frames_raise_value_error() -> None:
    s = random_splats(4, 1, 0)
    with pytest.raises(ValueError, match="must match the input"):
        transform(s, rotation=[1.0, 0, 0, 0], out=random_splats(5, 1, 0))
    with pytest.raises(ValueError, match="list of 2"):
        transform(s, rotation=[[1.0, 0, 0, 0]] * 2, out=s.clone())
    with pytest.raises(ValueError, match="not both"):
        transform(s, make_frames(), rotation=[1.0, 0, 0, 0])
    with pytest.raises(ValueError, match="positive determinant"):
        Frames(-np.eye(3)[None], np.zeros((1, 3)), False)
    with pytest.raises(ValueError, match="requires grad"):
        transform(s, translation=torch.zeros(3, requires_grad=True))
    with pytest.raises(ValueError, match="SplatSet"):
        transform(s.means, rotation=[1.0, 0, 0, 0])


def test_synthetic_splats_transform_and_empty() -> None:
    s = synthetic_splats(100, 3)
    for backend in BACKENDS:
        out = transform(s, rotation=[1.0, 0, 0, 0], backend=backend)
        assert rel(out.sh_rest, s.sh_rest) < 1e-6 and rel(out.means, s.means) < 1e-7
        empty = transform(s[:0], scale=[1.0, 2.0, 3.0], backend=backend)
        assert len(empty) == 0


def test_bench_suite_quick() -> None:
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import get_suite, run_cases

    suite = get_suite("transforms")
    cases = suite.cases(True)
    assert {c.params["backend"] for c in cases} >= {"numpy", "numba", "torch"}
    df = suite.summarize(run_cases(cases[:3] + [c for c in cases if c.params["backend"] == "copy"][:1],
                                   min_run_time=0.01, progress=False))  # fmt: skip
    assert "gaussians_per_s" in df and (df.gaussians_per_s.dropna() > 0).all()


@requires_ext
def test_ext_large_output_streaming_path(device: str, seed: int) -> None:
    """Outputs above the streaming-store threshold (8 MB) take other store paths: SH rest blocks, and
    means/quats/log-scales written through L1 buffers when the outputs are not the inputs. N is odd, so
    there are partial blocks, and the second frame of a batch starts unaligned (regular stores)."""
    s = random_splats(400_003, 3, seed)
    kw = PARAMS[0]
    out = transform(s.to(device), backend="ext", **kw).to("cpu")
    ref = transform(s, backend="torch", **kw)
    for name in ("means", "quats", "log_scales", "sh_rest"):
        assert rel(getattr(out, name), getattr(ref, name)) < 1e-6, name
    idx = torch.tensor([0, 1, 15, 16, 200_000, 400_002])
    _, _, sh_rest = reference(s[idx], **kw)
    assert rel(out.sh_rest[idx], sh_rest) < 2e-6
    rot = torch.randn(2, 4, dtype=torch.float64)
    outs = [random_splats(400_003, 3, seed + 1), random_splats(400_003, 3, seed + 2)]
    for batch in (transform(s, rotation=rot, backend="ext", out=outs), transform(s, rotation=rot, backend="ext")):
        for f, o in enumerate(batch):
            want = transform(s, rotation=rot[f], backend="torch")
            for name in FIELDS:
                assert rel(getattr(o, name), getattr(want, name)) < 1e-6, (f, name)


@pytest.mark.skipif(not _numba_impl.available(), reason="numba is not installed")
def test_numba_port_matches_gaussians(seed: int) -> None:
    """The numba backend's own scalar quaternion math and 3x3 SVD against gaussians.py / torch.linalg
    (float64, fresh random inputs; every branch of rotmat_to_quat)."""
    g = torch.Generator().manual_seed(seed)
    n = 200
    a, b = torch.randn(2, n, 4, generator=g, dtype=torch.float64) * 1.5
    prod = torch.tensor([_numba_impl.quat_mul(*x, *y) for x, y in zip(a.tolist(), b.tolist(), strict=True)],
                        dtype=torch.float64)
    assert rel(prod, gaussians.quat_multiply(a, b)) < 1e-14
    R = np.empty((n, 3, 3))
    for i, q in enumerate(a.tolist()):
        _numba_impl.quat_to_rotmat(*q, R[i])
    assert rel(torch.from_numpy(R), gaussians.quat_to_rotmat(a)) < 1e-14
    a[:3] = torch.tensor([[0.1, 1.0, 0.2, -0.1], [0.1, 0.2, 1.0, 0.1], [0.05, -0.1, 0.2, 1.0]])  # half-turns
    rot = gaussians.quat_to_rotmat(a)
    diag = torch.cat([rot.diagonal(dim1=-2, dim2=-1).sum(-1, keepdim=True), rot.diagonal(dim1=-2, dim2=-1)], -1)
    assert set(diag.argmax(-1).tolist()) == {0, 1, 2, 3}
    q = np.empty((n, 4))
    for i in range(n):
        _numba_impl.rotmat_to_quat(rot[i].numpy(), q[i])
    assert rel(torch.from_numpy(q), gaussians.rotmat_to_quat(rot)) < 1e-14
    S = torch.randn(n, 3, 3, generator=g, dtype=torch.float64)
    U, sigma = np.empty((n, 3, 3)), np.empty((n, 3))
    for i in range(n):
        _numba_impl.svd3_jacobi(S[i].numpy().copy(), U[i], sigma[i])
    U, sigma = torch.from_numpy(U), torch.from_numpy(sigma)
    assert rel(U.transpose(-1, -2) @ U, torch.eye(3, dtype=torch.float64).expand(n, 3, 3)) < 1e-14
    assert rel(torch.linalg.det(U), torch.ones(n, dtype=torch.float64)) < 1e-14
    assert rel(sigma.sort(-1).values, torch.linalg.svdvals(S).sort(-1).values) < 1e-14
    US = U * sigma[:, None, :]
    assert rel(US @ US.transpose(-1, -2), S @ S.transpose(-1, -2)) < 1e-13
