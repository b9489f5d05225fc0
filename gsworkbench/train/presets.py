"""The named training presets: each a :class:`Preset` holding two frozen :class:`TrainConfig` instances
(the run with adaptive density control, and the same run with MCMC) and the built-in scene it trains on.

:func:`preset` returns one of the configs with flat overrides applied (the notebooks' parameters, the
CLI's ``-p NAME VALUE``); :func:`preset_scene` the scene's :func:`gsworkbench.synthetic.builtin_scene`
keywords.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from gsworkbench.train.config import TrainConfig
from gsworkbench.train.strategy import STRATEGIES, DefaultStrategy, MCMCStrategy

# gsplat's MCMC initialisation and regularisation, which the presets' MCMC runs use
MCMC_RUN_SETTINGS: Mapping[str, float] = MappingProxyType(
    dict(init_opacity=0.5, init_scale=0.1, opacity_reg=0.01, scale_reg=0.01)
)


@dataclass(frozen=True)
class Preset:
    """A named run: ``default`` (adaptive density control), ``mcmc`` (the same run with MCMC and
    :data:`MCMC_RUN_SETTINGS`) and ``scene`` (the built-in scene's keywords, read-only)."""

    default: TrainConfig
    mcmc: TrainConfig
    scene: Mapping[str, Any]

    def config(self, strategy: str = DefaultStrategy.name) -> TrainConfig:
        """The config of the strategy named ``strategy``."""
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {tuple(STRATEGIES)}, got {strategy!r}")
        return self.mcmc if strategy == MCMCStrategy.name else self.default


def _preset(config: TrainConfig, mcmc: MCMCStrategy, scene: dict[str, Any]) -> Preset:
    """``config`` (with a :class:`DefaultStrategy`) and its MCMC twin, which has strategy ``mcmc``."""
    return Preset(config, replace(config, strategy=mcmc, **MCMC_RUN_SETTINGS), MappingProxyType(dict(scene)))


def _nerf_synthetic(
    init_random_num: int, cap: int, *, iterations: int = 5000, refine_stop: int = 2500, sh_degree_interval: int = 1000,
    budget: int | None = None, **run_wide: Any,
) -> tuple[TrainConfig, MCMCStrategy]:
    """The NeRF-synthetic schedule of the nerf_synthetic presets (see there for where its values come
    from); ``budget``: the default strategy's (MCMC grows to ``cap`` anyway); ``run_wide``: further
    :class:`TrainConfig` fields."""
    config = TrainConfig(
        iterations=iterations, sh_degree_interval=sh_degree_interval, eval_background="white",
        init_random_num=init_random_num, **run_wide,
        strategy=DefaultStrategy(refine_start=500, refine_stop=refine_stop, refine_every=100, reset_every=1000,
                                 max_gaussians=cap, budget=budget),
    )  # fmt: skip
    return config, MCMCStrategy(refine_start=500, refine_stop=refine_stop, refine_every=100, cap_max=cap)


_OBJECT_200 = dict(name="object", width=200, height=200, n_train=40, n_test=8)
_OBJECT_400 = dict(name="object", width=400, height=400, n_train=80, n_test=16)

PRESETS: Mapping[str, Preset] = MappingProxyType({
    # CI: seconds. A tiny object scene, densification every 30 steps.
    "smoke": _preset(
        TrainConfig(iterations=150, sh_degree_interval=50, progress=False,
                    strategy=DefaultStrategy(refine_start=30, refine_stop=120, refine_every=30, reset_every=1000)),
        MCMCStrategy(refine_start=30, refine_stop=120, refine_every=30),
        dict(name="object", width=64, height=64, n_train=24, n_test=4),
    ),
    # The Rust CPU trainer's micro preset: 100 steps, 12 train and 3 test views, densify every 25,
    # about 3,000 Gaussians growing to at most 5,000, at that trainer's image size (245 x 136).
    "micro": _preset(
        TrainConfig(iterations=100, init_num=3000, sh_degree_interval=25,
                    strategy=DefaultStrategy(refine_start=0, refine_stop=100, refine_every=25, reset_every=10_000,
                                             max_gaussians=5000)),
        MCMCStrategy(refine_start=0, refine_stop=100, refine_every=25, cap_max=5000),
        dict(name="object", width=245, height=136, n_train=12, n_test=3),
    ),
    # A few minutes on 2 cores: the quality preset of the object scene.
    "short": _preset(
        TrainConfig(iterations=5000, sh_degree_interval=500,
                    strategy=DefaultStrategy(refine_start=300, refine_stop=3500, refine_every=100, reset_every=2000,
                                             max_gaussians=60_000)),
        MCMCStrategy(refine_start=300, refine_stop=3500, refine_every=100, cap_max=60_000),
        _OBJECT_200,
    ),
    # The NeRF-synthetic protocol at a CPU-friendly size: the object scene without a
    # point cloud (RGBA, 40 train and 8 test views at 200 px), trained over white and scored over white
    # (3DGS trains and evaluates Blender scenes on white). Random start: 3DGS starts these scenes from
    # 100k random points inside the objects' bounds; here 30k (a CPU budget) in the visual hull
    # (init_rule "auto"). Schedule: 3DGS's and gsplat's absolute values where they fit (refinement from
    # step 500 every 100 steps, SH degree +1 every 1,000 steps), 3DGS's proportions where they do not
    # (refinement stops halfway, as 15k of 30k; opacity resets inside the refine window, at 1,000 and
    # 2,000 as at 3k..12k of 15k); growth capped at 60k Gaussians as in "short".
    "nerf_synthetic": _preset(*_nerf_synthetic(30_000, 60_000), dict(_OBJECT_200, n_points=0)),
    # The same protocol at lego's size: about 100 views rendered at 800 px, trained at 400 px (the loader's
    # 2x box downsample, as NeRF-synthetic runs at half resolution use), 50k random points in the hull.
    "nerf_synthetic_400": _preset(
        *_nerf_synthetic(50_000, 150_000),
        dict(name="object", width=800, height=800, n_train=100, n_test=10, n_points=0, downsample=2),
    ),
    # The same protocol at full resolution: lego's 800 px, trained at 800 px. Aimed at lego's quality
    # (35 dB) within ten minutes on 2 cores rather than 3DGS's 30k steps, so each lever buys early progress:
    # - coarse-to-fine (500:4,1000:2): the first 500 steps fit colours and coarse shape at 200 px and the
    #   next 500 at 400 px, where a step costs a third to a half of a full-size one (the converge suite
    #   compares it with full size throughout);
    # - first splats at half the 3-NN scale: 100k random points in the hull overlap less, touch fewer
    #   tiles and pixels, and start nearer the small splats a trained object has;
    # - 100k random points, 3DGS's count for these scenes;
    # - densification to a budget of 250k Gaussians by score (Taming 3DGS), not by the gradient
    #   threshold, which stops growing early on finely printed surfaces (docs/performance.md, the
    #   bricks converge table); capped at 300k, about what 3DGS ends with on lego;
    # - 8,000 steps: the learning-rate decay and the refine window follow the run's length, so the
    #   positions settle by its end; refinement 500..4,000 (half the run, as 15k of 30k) every 100, one
    #   opacity reset at 1,000 (where full-size steps begin); SH degree +1 every 500 steps.
    # The length and the budget were chosen on the bricks' validation split (converge suite, bricks-val:
    # training views only), against 4,000 steps and against the threshold at 8,000.
    "nerf_synthetic_800": _preset(
        *_nerf_synthetic(100_000, 300_000, iterations=8000, refine_stop=4000, sh_degree_interval=500,
                         budget=250_000, resolution_schedule=((500, 4), (1000, 2)), init_scale=0.5),
        dict(name="object", width=800, height=800, n_train=100, n_test=10, n_points=0),
    ),
    # A handheld capture (photos seen from all around, an unbounded background, JPEG and a lens): the
    # cluttered room's photos at 320 x 240, trained from their SfM points. Shorter than gsplat's 7k steps
    # (a CPU budget of a few minutes), refinement over most of it (300..2,500 every 100) with opacity
    # resets at 1,000 and 2,000, SH degree +1 every 500 steps, and room for 150k Gaussians: a capture's
    # background and clutter need several times the Gaussians of one object ("short" stops at 60k).
    # Fill points where the photos agree but SfM kept none (init_fill): on the capture from triangulated
    # points they raise held-out PSNR and SSIM, over the whole image and the background, on every seed
    # (docs/capture.md, "Backgrounds and exposure"); the far shell (init_shell) did not help there.
    # Mip-Splatting's filters (its 3D filter, its 2D filter of 0.1 px^2): a capture is looked at zoomed in and
    # out, and on the capture scene they gained at 1/4 and at 2x of the training size on every seed, at no
    # cost at that size (docs/training.md, "Anti-aliasing: other image sizes").
    # Camera refinement (poses, focal, principal point and a radial residual per photo; each held-out photo
    # aligned before it is scored): photos through reconstruct gained SSIM on every seed, and PSNR on every
    # seed, at no significant cost over the background (docs/capture.md, "Camera refinement").
    "capture": _preset(
        TrainConfig(iterations=3000, sh_degree_interval=500, init_fill=True, rasterize_mode="antialiased", eps2d=0.1,
                    filter_3d=True, pose_opt=True, intrinsics_opt=True, lr_pose=3e-4, eval_pose_steps=100,
                    strategy=DefaultStrategy(refine_start=300, refine_stop=2500, refine_every=100, reset_every=1000,
                                             max_gaussians=150_000)),
        MCMCStrategy(refine_start=300, refine_stop=2500, refine_every=100, cap_max=150_000),
        dict(name="capture", width=320, height=240, n_train=24, n_test=4),
    ),
    # gsplat's schedules at 7k and 30k steps (each strategy's default refine window).
    "full7k": _preset(TrainConfig(iterations=7000), MCMCStrategy(), _OBJECT_400),
    "full30k": _preset(TrainConfig(iterations=30_000), MCMCStrategy(), _OBJECT_400),
})  # fmt: skip


def preset(name: str, **overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of preset ``name`` with flat ``overrides`` applied
    (:meth:`TrainConfig.with_flat`). Presets: ``smoke``, ``micro``, ``short``, ``nerf_synthetic``,
    ``nerf_synthetic_400``, ``nerf_synthetic_800``, ``capture``, ``full7k``, ``full30k``.
    ``strategy="mcmc"`` picks the preset's MCMC run (its refine window and cap, and gsplat's MCMC
    initialisation and regularisation, :data:`MCMC_RUN_SETTINGS`, unless overridden)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    chosen = overrides.get("strategy", DefaultStrategy.name)
    if isinstance(chosen, str):
        base = PRESETS[name].config(chosen)
        overrides = {k: v for k, v in overrides.items() if k != "strategy"}
    else:  # an instance or nested dict replaces the preset's strategy
        base = PRESETS[name].default
    return base.with_flat(**overrides)


def preset_scene(name: str) -> dict[str, Any]:
    """The built-in scene parameters of preset ``name``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return dict(PRESETS[name].scene)
