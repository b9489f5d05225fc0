"""Small random scenes for the rasterizer tests (shared helpers, not a test module)."""

from __future__ import annotations

import torch
from conftest import fresh_seed, rel_err  # noqa: F401  (re-exported for the splat tests)

from gsworkbench.splat import intrinsics_from_fov, look_at

ARG_NAMES = ("means", "quats", "scales", "opacities", "colors", "viewmats")


def random_conics(n: int, log_sigma: tuple[float, float], g: torch.Generator) -> torch.Tensor:
    """[n, 3] float32 conics (a, b, c) of 2D Gaussians with standard deviations exp(U(log_sigma)) pixels
    along two axes of a uniformly random orientation (the kernels' drivers draw footprints so)."""
    sig = torch.exp(torch.empty(n, 2).uniform_(*log_sigma, generator=g))
    th = torch.rand(n, generator=g) * torch.pi
    co, si = th.cos(), th.sin()
    ia, ib = 1 / sig[:, 0] ** 2, 1 / sig[:, 1] ** 2
    return torch.stack([co * co * ia + si * si * ib, co * si * (ia - ib), si * si * ia + co * co * ib], -1)


def random_scene(
    n: int = 40,
    *,
    cameras: int = 2,
    width: int = 40,
    height: int = 28,
    sh_degree: int | None = 2,
    channels: int = 3,
    seed: int | None = None,
    dtype: torch.dtype = torch.float64,
    scale: float = 0.12,
) -> dict:
    """Gaussians in a unit cube around the origin, cameras on a circle at distance ~3 looking at it.

    ``seed=None`` draws a fresh seed (:func:`fresh_seed`); it is kept in ``scene["seed"]``.
    """
    seed = fresh_seed() if seed is None else seed
    g = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=g, dtype=torch.float64) - 0.5) * 1.6
    quats = torch.randn(n, 4, generator=g, dtype=torch.float64)
    scales = scale * torch.exp(0.4 * torch.randn(n, 3, generator=g, dtype=torch.float64))
    opacities = 0.15 + 0.8 * torch.rand(n, generator=g, dtype=torch.float64)
    if sh_degree is None:
        colors = torch.rand(n, channels, generator=g, dtype=torch.float64)
    else:
        k = (sh_degree + 1) ** 2
        colors = 0.3 * torch.randn(n, k, 3, generator=g, dtype=torch.float64)
        colors[:, 0] += 0.8
    views, Ks = [], []
    for c in range(cameras):
        ang = 0.7 * c + 0.3
        eye = (
            3.0 * torch.cos(torch.tensor(ang)).item(),
            3.0 * torch.sin(torch.tensor(ang)).item(),
            0.8 + 0.2 * c,
        )
        views.append(look_at(eye, (0.05 * c, 0.0, 0.0), dtype=torch.float64))
        K = intrinsics_from_fov(width, height, 50.0 + 5 * c, dtype=torch.float64)
        K[0, 2] += 0.7 * c  # off-centre principal point
        Ks.append(K)
    scene = dict(
        means=means,
        quats=quats,
        scales=scales,
        opacities=opacities,
        colors=colors,
        viewmats=torch.stack(views),
        Ks=torch.stack(Ks),
    )
    scene = {k: v.to(dtype) for k, v in scene.items()}
    scene.update(width=width, height=height, sh_degree=sh_degree, seed=seed)
    return scene


def render(scene: dict, backend: str, grad: bool = False, weights_seed: int = 1, **kwargs):  # noqa: ANN201
    """Renders ``scene``; with ``grad``, backpropagates a random weighting of colours and alphas.

    Returns (colors, alphas, meta, grads dict by input name).
    """
    leaves = {k: scene[k].detach().clone().requires_grad_(grad) for k in ARG_NAMES}
    img, alpha, meta = _call(scene, leaves, backend, **kwargs)
    grads = {}
    if grad:
        g = torch.Generator().manual_seed(weights_seed)
        w_img = torch.rand(img.shape, generator=g, dtype=torch.float64).to(img)
        w_a = torch.rand(alpha.shape, generator=g, dtype=torch.float64).to(img)
        ((img * w_img).sum() + (alpha * w_a).sum()).backward()
        grads = {k: leaves[k].grad for k in ARG_NAMES}
    return img.detach(), alpha.detach(), meta, grads


def _call(scene: dict, leaves: dict, backend: str, **kwargs):  # noqa: ANN202
    from gsworkbench.splat import rasterize

    return rasterize(
        leaves["means"],
        leaves["quats"],
        leaves["scales"],
        leaves["opacities"],
        leaves["colors"],
        leaves["viewmats"],
        scene["Ks"],
        scene["width"],
        scene["height"],
        sh_degree=scene["sh_degree"],
        backend=backend,
        **kwargs,
    )


def tile_runs(flatten_ids: torch.Tensor, tile_offsets: torch.Tensor) -> list[torch.Tensor]:
    """Each tile's run of ``flatten_ids`` (tiles in the order of ``tile_offsets``, flattened)."""
    off = tile_offsets.reshape(-1).long()
    ends = torch.cat([off[1:], off.new_tensor([flatten_ids.numel()])])
    return [flatten_ids[s:e] for s, e in zip(off.tolist(), ends.tolist(), strict=True)]


def assert_sublists(whole: tuple[torch.Tensor, torch.Tensor], cut: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Each tile's list in ``cut`` (flatten_ids, tile_offsets) keeps entries of its list in ``whole``, in
    their order: lists cut where their tiles saturate and to the Gaussians that reach the tile on its
    rows (``isect_tiles(cut_saturated=True)``) against the whole ones."""
    for t, (w, k) in enumerate(zip(tile_runs(*whole), tile_runs(*cut), strict=True)):
        pos = {g: i for i, g in enumerate(w.tolist())}
        at = [pos.get(g, -1) for g in k.tolist()]
        assert all(i >= 0 for i in at), f"tile {t}: an entry not in the whole list"
        assert all(i < j for i, j in zip(at, at[1:])), f"tile {t}: entries out of the whole list's order"
