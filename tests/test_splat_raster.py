"""ext (on every device of the ``device`` fixture) against the pure-torch reference on the CPU:
images, meta and gradients of every input."""

from __future__ import annotations

import pytest
import torch
from conftest import requires_ext, to_device
from splat_scenes import ARG_NAMES, assert_sublists, random_scene, rel_err, render

pytestmark = requires_ext


def _compare(scene: dict, device: str, tol: float = 1e-9, **kwargs) -> None:
    """ext on ``device`` against torch on the CPU (kwargs: rasterize options; tensors go to the device).
    The ext lists may be cut where their tiles saturate: sublists of the reference's."""
    print(f"scene seed: GSW_TEST_SEED={scene['seed']}")  # shown by pytest on failure
    a_img, a_alpha, a_meta, a_g = render(scene, "torch", grad=True, **kwargs)
    b_img, b_alpha, b_meta, b_g = to_device(
        render(to_device(scene, device), "ext", grad=True, **to_device(kwargs, device)), "cpu"
    )
    assert torch.equal(a_meta["radii"], b_meta["radii"])
    assert torch.equal(a_meta["tiles_per_gauss"], b_meta["tiles_per_gauss"])
    lists = [(m["flatten_ids"], m["tile_offsets"]) for m in (a_meta, b_meta)]
    assert_sublists(*lists)
    assert b_meta["n_isects"] <= a_meta["n_isects"]
    assert a_img.shape == b_img.shape
    assert rel_err(b_img, a_img) < tol
    assert rel_err(b_alpha, a_alpha) < tol
    for k in ARG_NAMES:
        if a_g[k] is None:  # an input the render mode does not use (colours in "D" mode)
            assert b_g[k] is None, k
            continue
        assert torch.isfinite(b_g[k]).all(), k
        assert rel_err(b_g[k], a_g[k]) < tol * 10, (k, rel_err(b_g[k], a_g[k]))


@pytest.mark.parametrize("render_mode", ["RGB", "D", "ED", "RGB+D", "RGB+ED"])
def test_render_modes_match(render_mode: str, device: str) -> None:
    _compare(random_scene(40, sh_degree=3), device, render_mode=render_mode)


@pytest.mark.parametrize("sh_degree", [None, 0, 1, 2])
def test_colors_and_sh_degrees_match(sh_degree: int | None, device: str) -> None:
    _compare(random_scene(40, sh_degree=sh_degree, channels=5), device)


@pytest.mark.parametrize("backend", ["torch", "ext"])
def test_sh_rest_apart_equals_one_block(backend: str, device: str) -> None:
    """colors = the DC row [N,1,3] with sh_rest [N,K-1,3] renders what the concatenated [N,K,3] block
    renders, and the gradients of the two pieces are the block's gradient split in two."""
    from gsworkbench.splat import rasterize

    dev = "cpu" if backend == "torch" else device
    scene = to_device(random_scene(40, sh_degree=3), dev)
    full = scene["colors"]
    args = [scene[k] for k in ("means", "quats", "scales", "opacities")]
    cams = (scene["viewmats"], scene["Ks"], scene["width"], scene["height"])
    a = full.clone().requires_grad_()
    img_a, alpha_a, _ = rasterize(*args, a, *cams, sh_degree=3, backend=backend)
    dc, rest = full[:, :1].clone().requires_grad_(), full[:, 1:].clone().requires_grad_()
    img_b, alpha_b, _ = rasterize(*args, dc, *cams, sh_degree=3, backend=backend, sh_rest=rest)
    assert torch.equal(img_a, img_b) and torch.equal(alpha_a, alpha_b)
    w = torch.randn(img_a.shape, generator=torch.Generator().manual_seed(1), dtype=img_a.dtype).to(dev)
    (ga,) = torch.autograd.grad((img_a * w).sum(), a)
    g_dc, g_rest = torch.autograd.grad((img_b * w).sum(), (dc, rest))
    assert rel_err(torch.cat([g_dc, g_rest], 1), ga) < 1e-13
    with pytest.raises(ValueError, match="DC coefficients"):
        rasterize(*args, full, *cams, sh_degree=3, backend=backend, sh_rest=rest)
    with pytest.raises(ValueError, match="needs sh_degree"):
        rasterize(*args, full[:, 0], *cams, backend=backend, sh_rest=rest)


def test_antialiased_backgrounds_tile_size_match(device: str) -> None:
    scene = random_scene(50, cameras=3, width=37, height=21, sh_degree=1)
    bg = torch.rand(3, 3, dtype=torch.float64)
    _compare(scene, device, rasterize_mode="antialiased", backgrounds=bg, tile_size=8)


def test_per_camera_colors_match(device: str) -> None:
    scene = random_scene(30, sh_degree=None, channels=2)
    scene["colors"] = torch.rand(2, 30, 2, dtype=torch.float64)
    _compare(scene, device)


@pytest.mark.parametrize(("channels", "tile_size"), [(33, 16), (70, 16), (3, 64), (40, 48), (1, 5)])
def test_channel_counts_and_tile_sizes_match(channels: int, tile_size: int, device: str) -> None:
    # once crashes on CUDA (D > 32 colour channels, tiles of more than 32x32 pixels): the CUDA kernels
    # composite 32 channels per pass and split large tiles over several blocks
    scene = random_scene(60, cameras=2, width=70, height=45, sh_degree=None, channels=channels)
    _compare(scene, device, tile_size=tile_size)
    _compare({**scene, "colors": torch.rand(2, 60, channels, dtype=torch.float64)}, device, tile_size=tile_size)


def test_float32_close_to_float64_reference(device: str) -> None:
    # a fixed seed: in float32 a few alphas land on the other side of the 1/255 cut than in float64,
    # and how many depends on the scene (a discontinuity, not an error of the kernels)
    scene64 = random_scene(200, sh_degree=3, width=64, height=48, seed=5)
    scene32 = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in scene64.items()}
    r_img, r_alpha, _, r_g = render(scene64, "torch", grad=True)
    img, alpha, _, g = render(to_device(scene32, device), "ext", grad=True)
    assert rel_err(img, r_img) < 1e-4
    assert rel_err(alpha, r_alpha) < 1e-4
    for k in ARG_NAMES:
        assert rel_err(g[k], r_g[k]) < 1e-3, k


def test_float32_cloud_close_to_float64_reference(device: str) -> None:
    # large translucent Gaussians over whole 16 x 16 tiles, hundreds deep: on AVX-512 CPUs the rasterizer
    # takes most of their alphas row by row (Alpha16::rows), forward and backward alike
    scene64 = random_scene(400, cameras=1, sh_degree=None, width=64, height=48, seed=11, scale=0.5)
    scene64["opacities"] = torch.full_like(scene64["opacities"], 0.1)
    scene32 = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in scene64.items()}
    r_img, r_alpha, _, r_g = render(scene64, "torch", grad=True)
    img, alpha, _, g = render(to_device(scene32, device), "ext", grad=True)
    assert r_alpha.min() > 0.5, "the cloud covers the view"
    assert rel_err(img, r_img) < 1e-4
    assert rel_err(alpha, r_alpha) < 1e-4
    for k in ARG_NAMES:
        assert rel_err(g[k], r_g[k]) < 1e-3, k


def test_dense_opaque_scene_terminates_early_and_matches(device: str) -> None:
    # many large, nearly opaque Gaussians: transmittance hits the 1e-4 cut-off
    scene = random_scene(120, sh_degree=None, scale=0.35)
    scene["opacities"] = torch.full_like(scene["opacities"], 0.98)
    img, alpha, _, _ = render(to_device(scene, device), "ext")
    assert alpha.max() > 0.999
    _compare(scene, device)


@pytest.mark.parametrize("opacity", [0.02, 0.9])
def test_long_tile_lists_match(opacity: float, device: str) -> None:
    # over a thousand Gaussians per tile: the ext forward walks tile lists in blocks of 256 (faint:
    # through every block; nearly opaque: it stops after the first, once every pixel is done, and the
    # ext lists may be cut there)
    scene = random_scene(1500, cameras=1, width=32, height=24, sh_degree=None, scale=0.4)
    scene["opacities"] = torch.full_like(scene["opacities"], opacity)
    _, _, meta, _ = render(scene, "torch")
    per_tile = torch.diff(meta["tile_offsets"].flatten(), append=torch.tensor([meta["n_isects"]]))
    assert per_tile.max() > 1000
    _compare(scene, device)


@requires_ext
@pytest.mark.parametrize("nc", [3, 2])
def test_background_compositing_matches_the_torch_reference(seed, nc):
    """The ext background op (one pass, CPU) against the torch formula in float64: values, the gradients of
    colours, alphas and backgrounds, gradcheck and opcheck; backgrounds that need no gradient get none."""
    from gsworkbench.splat import _torch_impl, ops

    gen = torch.Generator().manual_seed(seed)
    C, H, W, D = 2, 9, 7, 3
    colors = torch.rand(C, H, W, D, generator=gen, dtype=torch.float64)
    alphas = torch.rand(C, H, W, 1, generator=gen, dtype=torch.float64)
    bg = torch.rand(C, nc, generator=gen, dtype=torch.float64)
    v = torch.randn(C, H, W, D, generator=gen, dtype=torch.float64)
    got_in = [t.clone().requires_grad_() for t in (colors, alphas, bg)]
    want_in = [t.clone().requires_grad_() for t in (colors, alphas, bg)]
    got = ops.composite_background(*got_in)
    want = _torch_impl.composite_background(*want_in)
    assert rel_err(got, want) < 1e-14
    (got * v).sum().backward()
    (want * v).sum().backward()
    for a, b in zip(got_in, want_in, strict=True):
        assert rel_err(a.grad, b.grad) < 1e-13
    small = [t[:, :3, :2].clone().requires_grad_() if t.dim() == 4 else t.clone().requires_grad_() for t in got_in]
    assert torch.autograd.gradcheck(ops.composite_background, tuple(small))
    torch.library.opcheck(torch.ops.gsworkbench.splat_composite_background, tuple(small))
    c, a = colors.clone().requires_grad_(), alphas.clone().requires_grad_()
    (ops.composite_background(c, a, bg) * v).sum().backward()  # bg needs no gradient: none is computed
    assert rel_err(c.grad, want_in[0].grad) < 1e-14 and rel_err(a.grad, want_in[1].grad) < 1e-13
    with pytest.raises(RuntimeError, match="backgrounds must be"):
        ops.composite_background(colors, alphas, torch.rand(C, D + 1, dtype=torch.float64))
