"""Stage by stage: projection, SH, tile intersection and rasterization of ext (on every device of the
``device`` fixture) against torch on the CPU; opcheck."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import requires_ext, to_device
from hypothesis import given, settings
from hypothesis import strategies as st
from splat_scenes import random_scene, rel_err

from gsworkbench.core import gaussians
from gsworkbench.splat import _torch_impl


def _draw_flat_index(data: st.DataObject, rows: int, per_row: int) -> int:
    """A flat index into a [rows, per_row] tensor: anywhere, or the first or last value of a row at the edge of
    a block of 64 rows (the kernels' scan blocks are multiples of 64 rows, and the threads' shares end
    there or at the last row)."""
    if data.draw(st.booleans(), label="at a block edge"):
        row = min(rows - 1, max(0, 64 * data.draw(st.integers(0, rows // 64 + 1)) - data.draw(st.integers(0, 1))))
        return row * per_row + data.draw(st.sampled_from([0, per_row - 1]))
    return data.draw(st.integers(0, rows * per_row - 1), label="anywhere")


def _proj_args(scene: dict) -> tuple:
    return (scene["means"], scene["quats"], scene["scales"], scene["viewmats"], scene["Ks"],
            scene["width"], scene["height"], 0.3, 0.01, 1e10)  # fmt: skip


def test_projection_means2d_is_pinhole() -> None:
    s = random_scene(20)
    radii, means2d, depths, _, _ = _torch_impl.project_gaussians(*_proj_args(s))
    p = s["means"] @ s["viewmats"][0, :3, :3].T + s["viewmats"][0, :3, 3]
    K = s["Ks"][0]
    uv = (p[:, :2] / p[:, 2:]) * K.diagonal()[:2] + K[:2, 2]
    vis = radii[0] > 0
    assert vis.any()
    torch.testing.assert_close(means2d[0][vis], uv[vis])
    torch.testing.assert_close(depths[0][vis], p[vis, 2])


def test_view_dirs_point_from_camera_centre_to_mean() -> None:
    s = random_scene(15, cameras=2)
    vm = s["viewmats"]
    centres = torch.stack([torch.linalg.inv(v)[:3, 3] for v in vm])  # camera position in the world
    dirs = _torch_impl.view_dirs(s["means"], vm)
    assert rel_err(dirs, s["means"][None] - centres[:, None]) < 1e-5


def test_projection_conic_inverts_blurred_covariance() -> None:
    # an axis-aligned Gaussian on the optical axis: cov2d = f^2/z^2 diag(sx^2, sy^2) + 0.3
    f, z, sx, sy = 50.0, 4.0, 0.2, 0.1
    means = torch.tensor([[0.0, 0.0, z]], dtype=torch.float64)
    quats = torch.tensor([[1.0, 0, 0, 0]], dtype=torch.float64)
    scales = torch.tensor([[sx, sy, 0.05]], dtype=torch.float64)
    vm = torch.eye(4, dtype=torch.float64)[None]
    K = torch.tensor([[[f, 0, 32.0], [0, f, 32.0], [0, 0, 1]]], dtype=torch.float64)
    radii, m2, _, conics, comp = _torch_impl.project_gaussians(means, quats, scales, vm, K, 64, 64)
    a, c = (f * sx / z) ** 2 + 0.3, (f * sy / z) ** 2 + 0.3
    torch.testing.assert_close(conics[0, 0], torch.tensor([1 / a, 0.0, 1 / c], dtype=torch.float64))
    torch.testing.assert_close(
        comp[0, 0], torch.tensor(math.sqrt((a - 0.3) * (c - 0.3) / (a * c)), dtype=torch.float64)
    )
    assert int(radii[0, 0]) == math.ceil(3 * math.sqrt(max(a, c)))


@requires_ext
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_projection_ext_matches_torch(dtype: torch.dtype, device: str) -> None:
    from gsworkbench.splat import ops

    s = random_scene(300, cameras=3, dtype=dtype)
    ref = _torch_impl.project_gaussians(*_proj_args(s))
    out = to_device(ops.project_gaussians(*_proj_args(to_device(s, device))), "cpu")
    same = ref[0] == out[0]
    if dtype == torch.float64:
        assert bool(same.all()), f"seed {s['seed']}"
    else:  # ceil(3 sigma) may round differently at an integer in float32: rare, and off by one
        assert float(same.float().mean()) > 0.99 and int((ref[0] - out[0]).abs().max()) <= 1, (
            f"seed {s['seed']}"
        )
    both = (ref[0] > 0) & (out[0] > 0)
    for r, o in zip(ref[1:], out[1:], strict=True):
        r, o = r[both], o[both]
        assert rel_err(o, r) < (1e-12 if dtype == torch.float64 else 1e-5), f"seed {s['seed']}"


@requires_ext
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_view_dirs_ext_matches_torch(dtype: torch.dtype, device: str, seed: int) -> None:
    """The ext op (one autograd node, analytic backward) against the torch reference, values and
    gradients to the means and the full [C,4,4] viewmats (the bottom row gets none)."""
    from gsworkbench.splat import ops

    s = random_scene(40, cameras=3, seed=seed, dtype=dtype)
    means, vm = (s[k].detach().requires_grad_() for k in ("means", "viewmats"))
    ref = _torch_impl.view_dirs(means, vm)
    m_dev, v_dev = (t.detach().to(device).requires_grad_() for t in (means, vm))
    out = ops.view_dirs(m_dev, v_dev)
    tol = 1e-13 if dtype == torch.float64 else 1e-5
    assert out.shape == ref.shape and out.dtype == dtype
    assert rel_err(to_device(out.detach(), "cpu"), ref.detach()) < tol
    w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    gr = torch.autograd.grad((ref * w).sum(), (means, vm))
    go = to_device(torch.autograd.grad((out * w.to(device)).sum(), (m_dev, v_dev)), "cpu")
    for a, b in zip(go, gr, strict=True):
        assert rel_err(a, b) < tol
    assert bool((go[1][:, 3] == 0).all())


@requires_ext
def test_view_dirs_gradcheck_and_opcheck(device: str) -> None:
    s = to_device(random_scene(6, cameras=2), device)
    args = (s["means"].clone().requires_grad_(), s["viewmats"].clone().requires_grad_())
    assert torch.autograd.gradcheck(torch.ops.gsworkbench.splat_view_dirs, args)
    torch.library.opcheck(torch.ops.gsworkbench.splat_view_dirs, args)
    v = torch.randn(2, 6, 3, dtype=torch.float64, device=device)
    torch.library.opcheck(torch.ops.gsworkbench.splat_view_dirs_backward, (v, s["means"], s["viewmats"]))


@requires_ext
def test_view_dirs_generic_path_matches_cpu_kernel() -> None:
    """The device-agnostic ATen version (CompositeExplicitAutograd: the CUDA and fake kernel), reached on
    CPU tensors by redispatching past the CPU kernel, against the CPU loops; forward and backward."""
    s = random_scene(25, cameras=3, seed=3)
    generic = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
    fwd, bwd = torch.ops.gsworkbench.splat_view_dirs.default, torch.ops.gsworkbench.splat_view_dirs_backward.default
    args = (s["means"], s["viewmats"])
    v = torch.randn(3, 25, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert rel_err(fwd.redispatch(generic, *args), fwd(*args)) < 1e-14
    for a, b in zip(bwd.redispatch(generic, v, *args), bwd(v, *args), strict=True):
        assert rel_err(a, b) < 1e-14


@requires_ext
def test_sh_colors_from_cameras_matches_torch(device: str, seed: int) -> None:
    """The fused op (one autograd node) against the torch reference: colours and gradients to the
    coefficients, means and viewmats; gradcheck and opcheck."""
    from gsworkbench.splat import ops

    s = random_scene(30, cameras=2, seed=seed)
    g = torch.Generator().manual_seed(seed)
    leaves = (0.3 * torch.randn(30, 9, 3, generator=g, dtype=torch.float64), s["means"], s["viewmats"])
    ref_in = [t.clone().requires_grad_() for t in leaves]
    dev_in = [t.to(device).requires_grad_() for t in leaves]
    ref = _torch_impl.sh_colors_from_cameras(*ref_in, 2)
    out = ops.sh_colors_from_cameras(*dev_in, 2)
    assert rel_err(to_device(out.detach(), "cpu"), ref.detach()) < 1e-13
    w = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    gr = torch.autograd.grad((ref * w).sum(), ref_in)
    go = to_device(torch.autograd.grad((out * w.to(device)).sum(), dev_in), "cpu")
    for a, b in zip(go, gr, strict=True):
        assert rel_err(a, b) < 1e-12
    small = [t[:4].clone().requires_grad_() for t in leaves[:2]] + [leaves[2].to(device).requires_grad_()]
    small = [t.detach().to(device).requires_grad_() for t in small]
    op = torch.ops.gsworkbench.splat_sh_colors_from_cameras
    assert torch.autograd.gradcheck(lambda c, m, v: op(c, m, v, 2), small)
    torch.library.opcheck(op, (*small, 2))


@requires_ext
@pytest.mark.parametrize("degree", [0, 2, 3])
def test_sh_split_coefficients_match_one_block(device: str, seed: int, degree: int) -> None:
    """3DGS's SH parameters passed apart (the DC row [N,1,3] and coeffs_rest [N,15,3], no concatenation)
    against the same coefficients as one [N,16,3] block through the torch reference, two cameras:
    colours and gradients to both pieces (zero for rows above the degree), the means and the viewmats;
    gradcheck and opcheck of the split form, forward and backward."""
    from gsworkbench.splat import ops

    s = random_scene(30, cameras=2, seed=seed)
    g = torch.Generator().manual_seed(seed)
    full = 0.3 * torch.randn(30, 16, 3, generator=g, dtype=torch.float64)
    leaves = (full[:, :1].clone(), full[:, 1:].clone(), s["means"], s["viewmats"])
    ref_in = [t.clone().requires_grad_() for t in leaves]
    dev_in = [t.to(device).requires_grad_() for t in leaves]
    ref = _torch_impl.sh_colors_from_cameras(torch.cat(ref_in[:2], 1), *ref_in[2:], degree)
    out = ops.sh_colors_from_cameras(dev_in[0], dev_in[2], dev_in[3], degree, dev_in[1])
    assert rel_err(to_device(out.detach(), "cpu"), ref.detach()) < 1e-13
    w = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    gr = torch.autograd.grad((ref * w).sum(), ref_in, allow_unused=True, materialize_grads=True)
    go = to_device(torch.autograd.grad((out * w.to(device)).sum(), dev_in), "cpu")
    for a, b in zip(go, gr, strict=True):
        assert a.shape == b.shape and rel_err(a, b) < 1e-12
    k = (degree + 1) ** 2
    assert bool((go[1][:, k - 1 :] == 0).all())  # rows above the degree: no gradient
    small = [t[:4].detach().to(device).requires_grad_() for t in leaves[:3]] + [dev_in[3].detach().requires_grad_()]
    op = torch.ops.gsworkbench.splat_sh_colors_from_cameras
    assert torch.autograd.gradcheck(lambda c, r, m, v: op(c, m, v, degree, r), small)
    torch.library.opcheck(op, (small[0], small[2], small[3], degree, small[1]))
    c0, rest = (t.detach() for t in small[:2])
    dirs = torch.randn(2, 4, 3, dtype=torch.float64, device=device)
    torch.library.opcheck(torch.ops.gsworkbench.splat_sh_to_color, (c0, dirs, degree, rest))
    v = torch.randn(2, 4, 3, dtype=torch.float64, device=device)
    torch.library.opcheck(torch.ops.gsworkbench.splat_sh_to_color_backward, (v, c0, dirs, degree, rest))


@requires_ext
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize(("n", "cameras"), [(53, 1), (5003, 1), (37, 2)])
def test_sh_backward_float32_matches_float64(device: str, seed: int, split: bool, n: int, cameras: int) -> None:
    """The float32 backward at degree 3 (on AVX-512 CPUs the blocked path: 16 Gaussians per block,
    then whole-vector gradient writes) against the float64 torch reference: coefficient and direction
    gradients, one block or the split (DC, rest) pieces, N not a multiple of 16 (5003: two threads'
    shares, each with a partial last block), one camera (the blocked path) and two."""
    g = torch.Generator().manual_seed(seed)
    full = 0.3 * torch.randn(n, 16, 3, generator=g, dtype=torch.float64)
    dirs = torch.randn(cameras, n, 3, generator=g, dtype=torch.float64)
    v = torch.randn(cameras, n, 3, generator=g, dtype=torch.float64)
    ref_c, ref_d = full.clone().requires_grad_(), dirs.clone().requires_grad_()
    ref = gaussians.sh_to_color(ref_c[None].expand(cameras, -1, -1, -1), ref_d, 3)
    want = torch.autograd.grad((ref * v).sum(), (ref_c, ref_d))
    f32 = [t.float().to(device) for t in (full, dirs, v)]
    op = torch.ops.gsworkbench.splat_sh_to_color_backward
    if split:
        gc0, gd, grest = op(f32[2], f32[0][:, :1].contiguous(), f32[1], 3, f32[0][:, 1:].contiguous())
        gc = torch.cat([gc0, grest], 1)
    else:
        gc, gd, _ = op(f32[2], f32[0], f32[1], 3)
    got = to_device((gc, gd), "cpu")
    assert rel_err(got[0].double(), want[0]) < 1e-5
    assert rel_err(got[1].double(), want[1]) < 1e-4  # through the normalisation: larger relative terms


@requires_ext
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize(("n", "cameras"), [(53, 1), (5003, 1), (37, 2)])
def test_sh_forward_float32_matches_float64(device: str, seed: int, split: bool, n: int, cameras: int) -> None:
    """The float32 colours at degree 3 (on AVX-512 CPUs the blocked path: 16 Gaussians a block, their
    coefficients turned into one vector each by transposes, the colours interleaved back by permutes)
    against the float64 torch reference: one block of rows or the split (DC, rest) pieces, N not a
    multiple of 16 (5003: two threads' shares, each with a partial last block), one camera and two;
    colours clamped at 0 and directions of any length, a zero one included."""
    g = torch.Generator().manual_seed(seed)
    full = 0.3 * torch.randn(n, 16, 3, generator=g, dtype=torch.float64)
    dirs = torch.randn(cameras, n, 3, generator=g, dtype=torch.float64) * torch.rand(cameras, n, 1, generator=g) * 100
    dirs[0, n // 2] = 0.0
    want = gaussians.sh_to_color(full[None].expand(cameras, -1, -1, -1), dirs, 3)
    assert bool((want == 0).any()) and bool((want > 0).any())  # both sides of the clamp
    full32, dirs32 = full.float().to(device), dirs.float().to(device)
    op = torch.ops.gsworkbench.splat_sh_to_color
    if split:
        got = op(full32[:, :1].contiguous(), dirs32, 3, full32[:, 1:].contiguous())
    else:
        got = op(full32, dirs32, 3)
    assert rel_err(to_device(got, "cpu").double(), want) < 1e-5


@requires_ext
@settings(max_examples=40, deadline=None)
@given(
    n=st.one_of(st.integers(1, 300), st.integers(4000, 6000)),  # the second: two threads, many scan blocks
    degree=st.integers(0, 3),
    extra_rows=st.integers(0, 2),  # rows the degree leaves unused: scanned too
    split=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    cameras=st.integers(0, 2),
    bad=st.one_of(st.none(), st.tuples(st.sampled_from([math.nan, math.inf, -math.inf]), st.booleans())),
    data=st.data(),
    seed=st.integers(0, 2**31 - 1),
)
def test_sh_check_finite_finds_every_non_finite(n: int, degree: int, extra_rows: int, split: bool, dtype: torch.dtype,
                                                cameras: int, bad: tuple | None, data: st.DataObject,
                                                seed: int) -> None:  # fmt: skip
    """``check_finite``, the scan the CPU kernel makes of each block of coefficients as it reads it: one
    NaN or infinity anywhere (any row, the unused ones too; the DC piece or the rest in the split form)
    raises a ValueError naming its tensor, as ``torch.isfinite`` over the whole tensor says; with none,
    the colours are those of the unchecked call, bit for bit. Zero cameras scan too."""
    g = torch.Generator().manual_seed(seed)
    k = (degree + 1) ** 2 + extra_rows
    full = 0.3 * torch.randn(n, k, 3, generator=g, dtype=dtype)
    pieces = [full[:, :1].contiguous(), full[:, 1:].contiguous()] if split and k > 1 else [full]
    if bad is not None:
        value, in_rest = bad
        t = pieces[1 if in_rest and len(pieces) == 2 else 0]
        t.view(-1)[_draw_flat_index(data, n, t[0].numel())] = value
    dirs = torch.randn(cameras, n, 3, generator=g, dtype=dtype)
    op = torch.ops.gsworkbench.splat_sh_to_color
    args = (pieces[0], dirs, degree, pieces[1] if len(pieces) == 2 else None)
    names = ["coeffs", "coeffs_rest"]
    first_bad = next((name for name, t in zip(names, pieces) if not bool(torch.isfinite(t).all())), None)
    if first_bad is None:
        assert torch.equal(op(*args, True), op(*args))
        return
    with pytest.raises(ValueError, match=f"^{first_bad} contains non-finite values"):
        op(*args, True)
    op(*args)  # unchecked: no error


@requires_ext
@settings(max_examples=40, deadline=None)
@given(
    n=st.one_of(st.integers(1, 600), st.integers(9000, 12000)),  # the second: two threads, many scan blocks
    dtype=st.sampled_from([torch.float32, torch.float64]),
    cameras=st.integers(0, 2),
    bad=st.one_of(st.none(), st.tuples(st.sampled_from([math.nan, math.inf, -math.inf, -1e-3]),
                                       st.sampled_from(["means", "quats", "scales"]))),  # fmt: skip
    data=st.data(),
    seed=st.integers(0, 2**31 - 1),
)
def test_projection_check_values_finds_every_bad_value(n: int, dtype: torch.dtype, cameras: int, bad: tuple | None,
                                                       data: st.DataObject, seed: int) -> None:  # fmt: skip
    """``check_values``, the scan the CPU projection makes of each block of Gaussians as it reads it: a
    NaN or an infinity anywhere in means, quats or scales, or a negative scale, raises the ValueError
    that rasterize's own check would (the first bad tensor in that order, as ``torch.isfinite`` and
    ``min`` over the whole tensors say); with none, the outputs are those of the unchecked call, bit for
    bit. Zero cameras scan too."""
    g = torch.Generator().manual_seed(seed)
    t = {"means": torch.randn(n, 3, generator=g, dtype=dtype) * 0.5,
         "quats": torch.randn(n, 4, generator=g, dtype=dtype),
         "scales": torch.rand(n, 3, generator=g, dtype=dtype) * 0.1}  # fmt: skip
    if bad is not None:
        value, name = bad
        t[name].view(-1)[_draw_flat_index(data, n, t[name].shape[1])] = value
    s = random_scene(1, cameras=max(cameras, 1), seed=seed, dtype=dtype)
    vm, Ks = s["viewmats"][:cameras], s["Ks"][:cameras]
    op = torch.ops.gsworkbench.splat_project
    args = (t["means"], t["quats"], t["scales"], vm, Ks, 40, 28, 0.3, 0.01, 1e10)
    want = next((f"{k} contains non-finite" for k in t if not bool(torch.isfinite(t[k]).all())), None)
    if want is None and bool((t["scales"] < 0).any()):
        want = "scales must be non-negative"
    if want is None:
        for a, b in zip(op(*args, True), op(*args), strict=True):
            assert torch.equal(a, b)
        return
    with pytest.raises(ValueError, match=f"^{want}"):
        op(*args, True)
    op(*args)  # unchecked: no error


@requires_ext
@pytest.mark.parametrize("backend", ["ext", "torch"])
@pytest.mark.parametrize("where", ["colors", "sh_rest"])
def test_rasterize_names_non_finite_sh_coefficients(backend: str, where: str, device: str) -> None:
    """A NaN among the SH coefficients (ext: found by the SH op's scan, torch: by the input check) is a
    ValueError naming rasterize's argument, colors or sh_rest; ``check_values=False`` skips the scan."""
    from gsworkbench.splat.rasterize import rasterize

    if backend == "torch" and device != "cpu":
        pytest.skip("the torch reference runs on the CPU here")
    s = random_scene(20, cameras=1, sh_degree=3)
    s = to_device(s, device)
    dc, rest = s["colors"][:, :1].clone(), s["colors"][:, 1:].clone()
    (dc if where == "colors" else rest)[7, 0, 1] = math.nan
    args = (s["means"], s["quats"], s["scales"], s["opacities"], dc, s["viewmats"], s["Ks"], 16, 12)
    with pytest.raises(ValueError, match=f"^{where} contains non-finite values"):
        rasterize(*args, sh_degree=3, sh_rest=rest, backend=backend)
    rasterize(*args, sh_degree=3, sh_rest=rest, backend=backend, check_values=False)


@requires_ext
def test_sh_split_form_rejects_bad_shapes(device: str) -> None:
    """A short error naming the problem, never a bad read: a DC piece of more than one row, a rest of
    another N, too few rows for the degree."""
    c0 = torch.randn(5, 1, 3, device=device)
    rest = torch.randn(5, 15, 3, device=device)
    dirs = torch.randn(1, 5, 3, device=device)
    op = torch.ops.gsworkbench.splat_sh_to_color
    with pytest.raises(RuntimeError, match="DC row"):
        op(torch.randn(5, 2, 3, device=device), dirs, 3, rest)
    with pytest.raises(RuntimeError, match="coeffs_rest must be"):
        op(c0, dirs, 3, torch.randn(4, 15, 3, device=device))
    with pytest.raises(RuntimeError, match="K >= "):
        op(c0, dirs, 3, rest[:, :8])


@requires_ext
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_sh_ext_matches_gaussians_module(degree: int, device: str) -> None:
    from gsworkbench.splat import ops

    g = torch.Generator().manual_seed(degree)
    coeffs = torch.randn(50, 16, 3, generator=g, dtype=torch.float64, requires_grad=True)
    dirs = torch.randn(2, 50, 3, generator=g, dtype=torch.float64, requires_grad=True)
    ref = gaussians.sh_to_color(coeffs[None].expand(2, -1, -1, -1), dirs, degree)
    c_dev, d_dev = (t.detach().to(device).requires_grad_() for t in (coeffs, dirs))
    out = ops.sh_to_color(c_dev, d_dev, degree)
    assert rel_err(out, ref) < 1e-13
    w = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    gr = torch.autograd.grad((ref * w).sum(), (coeffs, dirs), allow_unused=True, materialize_grads=True)
    go = to_device(torch.autograd.grad((out * w.to(device)).sum(), (c_dev, d_dev)), "cpu")
    assert rel_err(go[0], gr[0]) < 1e-12
    assert (go[1] - gr[1]).abs().max() < 1e-12 * (1 + gr[1].abs().max())


@requires_ext
def test_isect_tiles_ext_matches_torch_and_is_sorted(device: str) -> None:
    from gsworkbench.splat import ops

    s = random_scene(400, cameras=2, width=70, height=45)
    radii, m2, depths, _, _ = _torch_impl.project_gaussians(*_proj_args(s))
    args = (m2, radii, depths, 16, 5, 3)
    ref = _torch_impl.isect_tiles(*args)
    out = to_device(ops.isect_tiles(*to_device(args, device)), "cpu")
    for r, o in zip(ref, out, strict=True):
        assert torch.equal(r, o)
    ids = out[1]
    assert bool((ids[1:] >= ids[:-1]).all())  # sorted by tile, then depth
    assert int(out[0].sum()) == ids.numel()


@requires_ext
@pytest.mark.parametrize("depths_kind", ["spread", "ties", "one_depth"])
def test_isect_tiles_ext_matches_torch_at_scale(device: str, depths_kind: str) -> None:
    """Enough visible Gaussians (over 2^19) that the depth sort runs on two threads where two are
    available; depths with many exact ties (the sort must keep index order) and all equal."""
    from gsworkbench.splat import ops

    g = torch.Generator().manual_seed(3)
    C, N, tw, th, ts = 1, 640_000, 9, 7, 16  # about 587k visible: more than 2^19
    m2 = torch.rand(C, N, 2, generator=g) * torch.tensor([tw * ts, th * ts], dtype=torch.float32)
    radii = torch.randint(0, 12, (C, N), generator=g, dtype=torch.int32)  # 0: not visible
    depths = {
        "spread": 0.1 + 50 * torch.rand(C, N, generator=g),
        "ties": (torch.randint(1, 64, (C, N), generator=g) / 8.0),
        "one_depth": torch.full((C, N), 2.5),
    }[depths_kind]
    args = (m2, radii, depths, ts, tw, th)
    ref = _torch_impl.isect_tiles(*args)
    out = to_device(ops.isect_tiles(*to_device(args, device)), "cpu")
    for r, o in zip(ref, out, strict=True):
        assert torch.equal(r, o)


@requires_ext
def test_isect_tiles_ext_skips_non_finite_means(device: str) -> None:
    """A 2D mean of NaN or inf (from inputs whose value scan a caller skipped) covers no tile: the same
    lists as with that Gaussian invisible, never a box from an undefined float-to-int cast."""
    from gsworkbench.splat import ops

    s = random_scene(300, cameras=1, width=70, height=45, seed=5)
    radii, m2, depths, _, _ = _torch_impl.project_gaussians(*_proj_args(s))
    vis = (radii[0] > 0).nonzero()[:, 0]
    bad = m2.clone()
    bad[0, vis[0], 0], bad[0, vis[1], 1], bad[0, vis[2], 0] = math.nan, math.inf, -math.inf
    hidden = radii.clone()
    hidden[0, vis[:3]] = 0
    ref = _torch_impl.isect_tiles(m2, hidden, depths, 16, 5, 3)
    out = to_device(ops.isect_tiles(*to_device((bad, radii, depths, 16, 5, 3), device)), "cpu")
    for r, o in zip(ref, out, strict=True):
        assert torch.equal(r, o)


@requires_ext
def test_rasterize_stage_gradients_match(device: str) -> None:
    from gsworkbench.splat import ops

    s = random_scene(80, width=33, height=20)
    radii, m2, depths, conics, _ = _torch_impl.project_gaussians(*_proj_args(s))
    C, N = radii.shape
    g = torch.Generator().manual_seed(0)
    colors = torch.rand(C, N, 4, generator=g, dtype=torch.float64)
    opac = torch.rand(C, N, generator=g, dtype=torch.float64)
    _, _, fid, toff = _torch_impl.isect_tiles(m2, radii, depths, 16, 3, 2)
    grads = []
    for impl, dev in ((_torch_impl, "cpu"), (ops, device)):
        leaves = [t.detach().to(dev).requires_grad_(True) for t in (m2, conics, colors, opac)]
        img, alpha = impl.rasterize_to_pixels(*leaves, 33, 20, 16, toff.to(dev), fid.to(dev))
        w = torch.rand(img.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dev)
        ((img * w).sum() + alpha.sum()).backward()
        grads.append(to_device((img.detach(), alpha.detach(), [t.grad for t in leaves]), "cpu"))
    (ri, ra, rg), (oi, oa, og) = grads
    assert rel_err(oi, ri) < 1e-9 and rel_err(oa, ra) < 1e-9
    for a, b in zip(og, rg, strict=True):
        assert rel_err(a, b) < 1e-8


@requires_ext
@pytest.mark.parametrize("channels", [1, 3, 5])
@pytest.mark.parametrize("absgrad", [False, True])
@pytest.mark.parametrize("tile_size", [16, 8, 5, 64])
def test_rasterize_stage_float32_matches_float64(
    device: str, seed: int, channels: int, absgrad: bool, tile_size: int
) -> None:
    """The float32 rasterize stage (the SIMD twins of the compositing loops on x86: RGB with its sums in
    registers, other channel counts through memory) against the float64 one (the generic loops, checked
    against torch above) on the same inputs, tiles cut by the image border included. Tile sizes: chunks
    of one row (16), of two rows (8), with padding lanes (5), and more than 64 chunks a tile (64, where
    the CPU forward lists a Gaussian's chunks without its 64-bit masks)."""
    from gsworkbench.splat import ops

    W, H = 45, 37
    s = random_scene(150, width=W, height=H, seed=seed)
    radii, m2, depths, conics, _ = _torch_impl.project_gaussians(*_proj_args(s))
    C, N = radii.shape
    g = torch.Generator().manual_seed(seed)
    colors = torch.rand(C, N, channels, generator=g, dtype=torch.float64)
    opac = torch.rand(C, N, generator=g, dtype=torch.float64) * 0.98 + 0.01
    ts = tile_size
    _, _, fid, toff = _torch_impl.isect_tiles(m2, radii, depths, ts, -(-W // ts), -(-H // ts))
    w = torch.rand(C, H, W, channels, generator=g, dtype=torch.float64) - 0.5
    out = []
    for dtype in (torch.float64, torch.float32):
        leaves = [t.detach().to(device, dtype).requires_grad_(True) for t in (m2, conics, colors, opac)]
        img, alpha = ops.rasterize_to_pixels(*leaves, W, H, ts, toff.to(device), fid.to(device), absgrad=absgrad)
        ((img * w.to(device, dtype)).sum() + alpha.sum()).backward()
        grads = [t.grad for t in leaves] + ([leaves[0].absgrad] if absgrad else [])
        out.append(to_device((img.detach(), [x.double() for x in grads]), "cpu"))
    (ri, rg), (oi, og) = out
    # float32: a rare alpha landing on the other side of the 1/255 cut moves one pixel's terms, by at most
    # that Gaussian's own term (alpha <= 1/255 times a colour <= 1) and as much again through the
    # transmittance it leaves to the Gaussians behind; every other pixel agrees to float32 rounding
    err = (oi.double() - ri).abs().amax(-1)
    flipped = err > 1e-5
    assert int(flipped.sum()) <= 2, int(flipped.sum())
    assert float(err.max()) <= 2.0 / 255
    assert rel_err(oi.double()[~flipped], ri[~flipped]) < 1e-5
    for name, a, b in zip(("means2d", "conics", "colors", "opacities", "absgrad"), og, rg, strict=False):
        assert torch.isfinite(a).all(), name
        assert rel_err(a, b) < 2e-3, (name, rel_err(a, b))


@requires_ext
def test_opcheck_ext_ops(device: str) -> None:
    from gsworkbench.splat import ops

    s = to_device(random_scene(30, width=24, height=20), device)
    pa = _proj_args(s)
    proj = torch.ops.gsworkbench.splat_project
    torch.library.opcheck(proj, pa)
    torch.library.opcheck(proj, (*pa, True))  # check_values
    radii, m2, depths, conics, comps = ops.project_gaussians(*pa)
    g = torch.Generator().manual_seed(0)
    v = [torch.randn(t.shape, generator=g, dtype=torch.float64).to(device) for t in (m2, depths, conics, comps)]
    torch.library.opcheck(torch.ops.gsworkbench.splat_project_backward, (*pa, radii, *v))
    coeffs = torch.randn(30, 9, 3, dtype=torch.float64, device=device)
    dirs = torch.randn(2, 30, 3, dtype=torch.float64, device=device)
    torch.library.opcheck(torch.ops.gsworkbench.splat_sh_to_color, (coeffs, dirs, 2))
    torch.library.opcheck(torch.ops.gsworkbench.splat_sh_to_color, (coeffs, dirs, 2, None, True))  # check_finite
    torch.library.opcheck(
        torch.ops.gsworkbench.splat_sh_to_color_backward,
        (torch.randn(2, 30, 3, dtype=torch.float64, device=device), coeffs, dirs, 2),
    )
    torch.library.opcheck(
        torch.ops.gsworkbench.splat_isect_tiles,
        (m2, radii, depths, 8, 3, 3),
        test_utils=("test_schema", "test_autograd_registration", "test_faketensor"),
    )
    _, _, fid, toff = ops.isect_tiles(m2, radii, depths, 8, 3, 3)
    colors = torch.rand(2, 30, 3, dtype=torch.float64, device=device)
    opac = torch.rand(2, 30, dtype=torch.float64, device=device)
    rargs = (m2, conics, colors, opac, 24, 20, 8, toff, fid)
    torch.library.opcheck(torch.ops.gsworkbench.splat_rasterize, rargs)
    torch.library.opcheck(torch.ops.gsworkbench.splat_rasterize, (*rargs, False, False))  # keep_state=False
    out = torch.ops.gsworkbench.splat_rasterize(*rargs)
    torch.library.opcheck(
        torch.ops.gsworkbench.splat_rasterize_backward,
        (*rargs, out[2], out[3], torch.rand_like(out[0]), torch.rand_like(out[1])),
    )


@requires_ext
def test_rasterize_without_state_same_image(device: str) -> None:
    """keep_state=False: the same colours and alphas to the bit, with empty transmittances and last
    contributors; a call that records a gradient still returns the whole state, and its gradients are
    those of the default call."""
    from gsworkbench.splat import ops

    s = to_device(random_scene(60, cameras=2, width=37, height=29), device)
    pa = _proj_args(s)
    radii, m2, depths, conics, _ = ops.project_gaussians(*pa)
    _, _, fid, toff = ops.isect_tiles(m2, radii, depths, 8, 5, 4)
    g = torch.Generator().manual_seed(1)
    colors = torch.rand(2, 60, 3, generator=g, dtype=torch.float64).to(device)
    opac = torch.rand(2, 60, generator=g, dtype=torch.float64).to(device)
    args = (m2, conics, colors, opac, 37, 29, 8, toff, fid)
    op = torch.ops.gsworkbench.splat_rasterize
    full, lean = op(*args), op(*args, False, False)
    assert torch.equal(full[0], lean[0]) and torch.equal(full[1], lean[1])
    assert lean[2].shape == (0,) and lean[3].shape == (0,) and lean[3].dtype == torch.int32
    assert bool((full[3] >= 0).any())  # the state it leaves out is not empty
    grads = []
    for keep in (True, False):
        leaves = [t.detach().clone().requires_grad_() for t in args[:4]]
        out = op(*leaves, *args[4:], False, keep)
        assert out[2].shape == full[2].shape and torch.equal(out[3], full[3])
        grads.append(torch.autograd.grad((out[0] * 1.5).sum() + out[1].sum(), leaves))
    for a, b in zip(*grads, strict=True):
        assert torch.equal(a, b)


@requires_ext
def test_ops_reject_bad_shapes_and_devices(device: str) -> None:
    """The ops' own checks (shared by the CPU and CUDA bindings): a clear error, never a bad read."""
    from gsworkbench.splat import ops

    s = to_device(random_scene(12, width=24, height=20), device)
    pa = _proj_args(s)
    with pytest.raises(RuntimeError, match=r"quats must be \[N,4\]"):
        torch.ops.gsworkbench.splat_project(s["means"], s["quats"][:, :3], *pa[2:])
    radii, m2, depths, conics, comps = ops.project_gaussians(*pa)
    grads = [torch.zeros_like(t) for t in (m2, depths, conics, comps)]
    with pytest.raises(RuntimeError, match="gradient shapes"):
        torch.ops.gsworkbench.splat_project_backward(*pa, radii, grads[0][:, :1], *grads[1:])
    with pytest.raises(RuntimeError, match="radii must have dtype Int"):
        torch.ops.gsworkbench.splat_isect_tiles(m2, radii.long(), depths, 8, 3, 3)
    _, _, fid, toff = ops.isect_tiles(m2, radii, depths, 8, 3, 3)
    colors = torch.rand(2, 12, 3, dtype=torch.float64, device=device)
    opac = torch.rand(2, 12, dtype=torch.float64, device=device)
    rargs = (m2, conics, colors, opac, 24, 20, 8, toff, fid)
    with pytest.raises(RuntimeError, match=r"conics must be \[C,N,3\]"):
        torch.ops.gsworkbench.splat_rasterize(m2, conics[:, :, :2], *rargs[2:])
    with pytest.raises(RuntimeError, match="tile_offsets must be"):
        torch.ops.gsworkbench.splat_rasterize(*rargs[:6], 16, toff, fid)
    out = torch.ops.gsworkbench.splat_rasterize(*rargs)
    with pytest.raises(RuntimeError, match="v_colors must be"):
        torch.ops.gsworkbench.splat_rasterize_backward(*rargs, out[2], out[3], out[0][..., :2], out[1])
    if device != "cpu":  # a CPU gradient beside CUDA inputs: the CUDA kernel must not read host memory
        with pytest.raises(RuntimeError, match="must be on"):
            torch.ops.gsworkbench.splat_rasterize_backward(*rargs, out[2], out[3], out[0].cpu(), out[1])
        with pytest.raises(RuntimeError, match="must be on"):
            torch.ops.gsworkbench.splat_project_backward(*pa, radii, grads[0].cpu(), *grads[1:])
