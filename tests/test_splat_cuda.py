"""CUDA kernels against the CPU ones (images, meta, gradients); skipped without a CUDA device and build."""

from __future__ import annotations

import pytest
import torch
from splat_scenes import ARG_NAMES, random_scene, rel_err, render

from gsworkbench.splat.rasterize import has_cuda_kernels

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and has_cuda_kernels()), reason="needs a CUDA device and a CUDA build"
)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("render_mode", ["RGB", "RGB+ED"])
def test_cuda_matches_cpu(dtype: torch.dtype, render_mode: str) -> None:
    scene = random_scene(300, cameras=2, width=70, height=45, sh_degree=3, dtype=dtype)
    cuda_scene = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in scene.items()}
    tol = 1e-9 if dtype == torch.float64 else 1e-4
    c_img, c_alpha, c_meta, c_g = render(scene, "ext", grad=True, render_mode=render_mode)
    g_img, g_alpha, g_meta, g_g = render(cuda_scene, "ext", grad=True, render_mode=render_mode)
    assert g_img.is_cuda
    if dtype == torch.float64:
        assert torch.equal(c_meta["flatten_ids"], g_meta["flatten_ids"].cpu())
        assert torch.equal(c_meta["tile_offsets"], g_meta["tile_offsets"].cpu())
    assert rel_err(g_img.cpu(), c_img) < tol, f"seed {scene['seed']}"
    assert rel_err(g_alpha.cpu(), c_alpha) < tol, f"seed {scene['seed']}"
    for k in ARG_NAMES:
        assert rel_err(g_g[k].cpu(), c_g[k]) < tol * 10, (k, scene["seed"])
