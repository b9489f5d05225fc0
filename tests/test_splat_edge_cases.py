"""Edge cases (culling, degenerate and huge Gaussians, empty scenes, backgrounds), gradcheck, input
errors; the ext backend on every device of the ``device`` fixture."""

from __future__ import annotations

import pytest
import torch
from conftest import backend_params, ext_built, to_device
from splat_scenes import ARG_NAMES, random_scene, rel_err, render

from gsworkbench.splat import rasterize

BACKENDS = backend_params(["torch", "ext"])


def _both(scene: dict, device: str, **kwargs) -> tuple:
    """Renders with torch on the CPU and (when built) ext on ``device``, and checks they agree; returns
    the torch result."""
    ref = render(scene, "torch", grad=True, **kwargs)
    if ext_built():
        out = to_device(render(to_device(scene, device), "ext", grad=True, **to_device(kwargs, device)), "cpu")
        assert rel_err(out[0], ref[0]) < 1e-9 or float(ref[0].abs().max()) == float(out[0].abs().max()) == 0
        for k in ARG_NAMES:
            if ref[3][k] is None:
                continue
            assert torch.isfinite(out[3][k]).all(), k
            assert (out[3][k] - ref[3][k]).abs().max() <= 1e-8 * (1 + ref[3][k].abs().max()), k
    for k in ARG_NAMES:
        if ref[3][k] is not None:
            assert torch.isfinite(ref[3][k]).all(), k
    return ref


def test_gaussians_behind_camera_are_culled(device: str) -> None:
    s = random_scene(20, cameras=1, seed=1)
    cam_pos = -s["viewmats"][0, :3, :3].T @ s["viewmats"][0, :3, 3]
    fwd = s["viewmats"][0, 2, :3]
    s["means"][:5] = cam_pos - 1.5 * fwd + 0.1 * torch.randn(5, 3, dtype=torch.float64)  # behind
    s["means"][5] = cam_pos + 0.001 * fwd  # inside the near plane
    img, alpha, meta, grads = _both(s, device)
    assert (meta["radii"][0, :6] == 0).all()
    assert (grads["means"][:6] == 0).all() and (grads["opacities"][:6] == 0).all()
    ref = render({**s, **{k: s[k][6:] for k in ARG_NAMES if k != "viewmats"}}, "torch")
    torch.testing.assert_close(img, ref[0])


def test_gaussians_straddling_the_image_edge(device: str) -> None:
    s = random_scene(8, cameras=1, width=48, height=32, sh_degree=None, seed=2)
    vm, K = s["viewmats"][0], s["Ks"][0]
    # place Gaussians so that they project onto the image borders and corners
    pix = torch.tensor(
        [[0.0, 0.0], [48.0, 32.0], [-2.0, 16.0], [24.0, 33.0], [47.5, 0.5], [0, 31], [50, 10], [24, -3]]
    )
    z = 3.0
    cam = torch.cat([(pix - K[:2, 2]) / K.diagonal()[:2] * z, torch.full((8, 1), z)], dim=1).double()
    s["means"] = (vm[:3, :3].T @ (cam - vm[:3, 3]).T).T
    img, alpha, meta, _ = _both(s, device)
    assert (meta["radii"] > 0).sum() >= 6
    assert alpha[0, 0, 0, 0] > 0.05 and alpha[0, -1, -1, 0] > 0.05


@pytest.mark.parametrize("kind", ["huge", "degenerate", "transparent"])
def test_huge_degenerate_transparent(kind: str, device: str) -> None:
    s = random_scene(15, cameras=2, seed=3)
    if kind == "huge":
        s["scales"][:3] = torch.tensor([30.0, 20.0, 10.0], dtype=torch.float64)
    elif kind == "degenerate":
        s["scales"][:5] = torch.tensor([1e-9, 0.1, 1e-9], dtype=torch.float64)
        s["scales"][5] = 0.0
    else:
        s["opacities"][:] = 0.0
    img, alpha, meta, grads = _both(s, device)
    if kind == "transparent":
        assert float(alpha.abs().max()) == 0.0 and float(img.abs().max()) == 0.0
    if kind == "huge":
        assert float(alpha.min()) > 0.1  # covers every pixel


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_scene_and_backgrounds(backend: str, device: str) -> None:
    s = to_device(random_scene(0, cameras=2, sh_degree=1), device)
    bg = torch.tensor([[0.1, 0.2, 0.3], [1.0, 0.0, 0.5]], dtype=torch.float64, device=device)
    img, alpha, meta = rasterize(
        s["means"], s["quats"], s["scales"], s["opacities"], s["colors"], s["viewmats"], s["Ks"], 40, 28,
        sh_degree=1, backgrounds=bg, backend=backend,
    )  # fmt: skip
    assert img.shape == (2, 28, 40, 3) and alpha.shape == (2, 28, 40, 1)
    assert meta["n_isects"] == 0
    torch.testing.assert_close(img, bg[:, None, None, :].expand_as(img))
    assert float(alpha.abs().max()) == 0.0


def test_backgrounds_composite_behind(device: str) -> None:
    s = random_scene(30, cameras=2, seed=4)
    bg = torch.rand(2, 3, dtype=torch.float64)
    img0, alpha, _, _ = render(s, "torch")
    img1, _, _, _ = _both(s, device, backgrounds=bg)
    torch.testing.assert_close(img1, img0 + (1 - alpha) * bg[:, None, None, :])


def test_expected_depth_is_depth_over_alpha(device: str) -> None:
    s = random_scene(30, cameras=1, seed=5)
    d, alpha, _, _ = render(s, "torch", render_mode="D")
    ed, _, _, _ = _both(s, device, render_mode="ED")
    torch.testing.assert_close(ed, d / alpha.clamp_min(1e-10))
    rgbd, _, _, _ = render(s, "torch", render_mode="RGB+D")
    torch.testing.assert_close(rgbd[..., 3:], d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradcheck_float64(backend: str, device: str) -> None:
    s = to_device(random_scene(5, cameras=2, width=12, height=10, sh_degree=1, seed=7, scale=0.3), device)
    names = ARG_NAMES

    def f(*args):  # noqa: ANN002, ANN202
        kw = dict(zip(names, args, strict=True))
        img, alpha, _ = rasterize(
            kw["means"], kw["quats"], kw["scales"], kw["opacities"], kw["colors"], kw["viewmats"], s["Ks"],
            12, 10, sh_degree=1, tile_size=8, backend=backend, render_mode="RGB+ED",
        )  # fmt: skip
        return img, alpha

    inputs = tuple(s[k].detach().clone().requires_grad_(True) for k in names)
    # on CUDA both backends sum gradients with atomics (index_add_, atomicAdd): the order of the float64
    # additions, and so the last bits, vary from one backward to the next
    nondet = 0.0 if device == "cpu" else 1e-12
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, nondet_tol=nondet)


def _good() -> dict:
    s = random_scene(4, cameras=1, sh_degree=1)
    return dict(
        means=s["means"], quats=s["quats"], scales=s["scales"], opacities=s["opacities"], colors=s["colors"],
        viewmats=s["viewmats"], Ks=s["Ks"], width=16, height=12, sh_degree=1,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(means=torch.zeros(4, 2, dtype=torch.float64)), "means must have shape"),
        (dict(quats=torch.zeros(3, 4, dtype=torch.float64)), "inconsistent N"),
        (dict(scales=torch.ones(4, 3, dtype=torch.float16)), "scales must have dtype"),
        (dict(opacities=torch.full((4,), float("nan"), dtype=torch.float64)), "non-finite"),
        (dict(opacities=torch.full((4,), 2.0, dtype=torch.float64)), r"opacities must lie in \[0, 1\]"),
        (dict(scales=-torch.ones(4, 3, dtype=torch.float64)), "non-negative"),
        (dict(width=0), "width must be an int >= 1"),
        (dict(height=7.5), "height must be an int"),
        (dict(colors=torch.zeros(4, 2, 3, dtype=torch.float64)), "needs colors"),
        (dict(Ks=torch.zeros(1, 3, 3, dtype=torch.float64)), "focal lengths"),
        (dict(viewmats=torch.zeros(2, 4, 4, dtype=torch.float64)), "inconsistent C"),
        (dict(means=torch.zeros(4, 3, dtype=torch.float32)), "different dtypes"),
        (dict(render_mode="RGBD"), "render_mode must be one of"),
        (dict(rasterize_mode="fast"), "rasterize_mode must be one of"),
        (dict(tile_size=0), "tile_size"),
        (dict(near_plane=0.0), "near_plane"),
        (dict(backgrounds=torch.zeros(1, 4, dtype=torch.float64)), "backgrounds must have shape"),
        (dict(backgrounds=torch.zeros(1, 3, dtype=torch.float64), render_mode="D"), "backgrounds apply"),
        (dict(backend="cuda"), "backend must be one of"),
        (dict(viewmats=torch.full((1, 4, 4), float("inf"), dtype=torch.float64)), "non-finite"),
    ],
)
def test_bad_input_raises_value_error(change: dict, match: str, device: str) -> None:
    kw = to_device({**_good(), **change}, device)
    args = [
        kw.pop(k)
        for k in ("means", "quats", "scales", "opacities", "colors", "viewmats", "Ks", "width", "height")
    ]
    with pytest.raises(ValueError, match=match):
        rasterize(*args, **kw)


def test_input_check_takes_its_arguments_by_name() -> None:
    """check_rasterize_inputs takes rasterize's arguments by name only, so they cannot shift."""
    from gsworkbench.splat.rasterize import check_rasterize_inputs

    kw = {**_good(), "near_plane": 0.01, "far_plane": 1e10, "backgrounds": None, "render_mode": "RGB",
          "rasterize_mode": "classic", "tile_size": 16, "backend": "torch"}  # fmt: skip
    check_rasterize_inputs(**kw)  # the good scene passes
    with pytest.raises(ValueError, match="width must be an int >= 1"):
        check_rasterize_inputs(**{**kw, "width": 0})
    with pytest.raises(TypeError):
        check_rasterize_inputs(*kw.values())
