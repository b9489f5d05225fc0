"""Training settings (:class:`TrainConfig`) and the named presets.

The defaults follow gsplat's ``simple_trainer`` (its published values): Adam with eps 1e-15; learning
rates means 1.6e-4 x scene scale (decayed exponentially to 1% over the run), scales 5e-3, quats 1e-3,
opacities 5e-2, SH DC 2.5e-3, higher SH 2.5e-3/20; loss 0.8 L1 + 0.2 (1 - SSIM); the SH degree raised
every 1,000 steps; adaptive density control with 2D-gradient threshold 2e-4, 3D scale threshold 0.01 x
scene scale, refinement every 100 steps from step 500 to 15,000, opacity reset every 3,000 and pruning
below opacity 0.005. MCMC uses gsplat's MCMC values (cap, noise 5e5, relocation below opacity 0.005,
growth by 5% per refinement up to step 25,000, opacity and scale regularisation 0.01).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from gsworkbench.compile import COMPILE_MODES
from gsworkbench.train.adam import OPTIMIZERS
from gsworkbench.train.resolution import check_schedule

STRATEGIES = ("default", "mcmc")
BACKGROUNDS = ("scene", "random")
EVAL_BACKGROUNDS = ("scene", "white", "black")
INIT_RULES = ("auto", "points", "hull", "frustum", "cube")  # see gsworkbench.train.init_region


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs besides its scene. Lengths in world units, steps are iterations."""

    iterations: int = 30_000
    strategy: str = "default"  # "default" (adaptive density control) or "mcmc"
    backend: str = "ext"  # "ext" (compiled kernels, CPU or CUDA) or "torch" (the reference)
    device: str = "cpu"
    seed: int = 0
    # ---- initialisation ----
    # where training starts (gsworkbench.train.init_region): "auto" = the scene's cloud, else the visual
    # hull of its alpha masks (RGBA objects), else points triangulated from the train views (photos,
    # with init_triangulate), else the cameras' shared view volume; or one by name
    init_rule: str = "auto"
    init_triangulate: bool = True  # "auto" may triangulate a cloud for RGB scenes without one
    init_num: int | None = None  # points drawn from the scene's cloud (all when None)
    init_random_num: int = 100_000  # random points when there is no cloud (or a random rule is named)
    # how far from the camera centroid random points may lie, x scene scale ("cube": around the origin)
    init_extent: float = 3.0
    init_view_fraction: float | None = None  # share of train views that see a random point (None: by rule)
    init_opacity: float = 0.1
    init_scale: float = 1.0  # times the mean distance to the 3 nearest neighbours
    sh_degree: int = 3
    sh_degree_interval: int = 1000  # the SH degree in use rises by one every this many steps
    # ---- optimiser and loss ----
    lr_means: float = 1.6e-4  # times the scene scale
    lr_means_final: float = 0.01  # fraction of lr_means reached at the last step (exponential decay)
    lr_scales: float = 5e-3
    lr_quats: float = 1e-3
    lr_opacities: float = 5e-2
    lr_sh0: float = 2.5e-3
    lr_shN: float = 2.5e-3 / 20
    adam_eps: float = 1e-15
    # "adam" (dense), "visible_adam" (only the Gaussians seen in the step's view move; their moments too)
    # or "selective_adam" (gsplat's: visible_adam without bias correction); see gsworkbench.train.adam
    optimizer: str = "adam"
    ssim_lambda: float = 0.2
    background: str = "scene"  # "scene" (the colour the images were composited over) or "random"
    # the background of the held-out evaluation: "scene", or the dataset protocol's colour ("white" for
    # NeRF-synthetic): RGBA test images are composited over it and the render uses it
    eval_background: str = "scene"
    opacity_reg: float = 0.0
    scale_reg: float = 0.0
    # coarse-to-fine (gsworkbench.train.resolution): ((until_step, factor), ...) renders and compares at
    # 1/factor of the image size for steps < until_step (the first entry that applies), full size after;
    # ((1000, 4), (2000, 2)): 1/4 before step 1000, 1/2 before 2000. Text "1000:4,2000:2" is accepted;
    # () = full size throughout. Held-out evaluation is always at full size.
    resolution_schedule: tuple[tuple[int, int], ...] = ()
    # ---- densification: adaptive density control ("default") ----
    refine_start: int = 500
    refine_stop: int | None = None  # None: 15,000 (default) or 25,000 (mcmc)
    refine_every: int = 100
    grow_grad2d: float | None = None  # None: 2e-4, or 8e-4 with absgrad (gsplat's values)
    grow_scale3d: float = 0.01  # times the scene scale: smaller Gaussians are cloned, larger split
    prune_opacity: float = 0.005
    prune_scale3d: float = 0.1  # times the scene scale (after the first opacity reset)
    reset_every: int = 3000
    absgrad: bool = False  # accumulate the per-pixel absolute 2D-mean gradients instead
    max_gaussians: int | None = None  # growth stops at this count (highest gradients first)
    # ---- densification: MCMC ----
    cap_max: int = 1_000_000
    noise_lr: float = 5e5
    grow_rate: float = 0.05
    # ---- evaluation and output ----
    eval_every: int = 0  # 0: only at the end
    progress: bool = True
    # periodic checkpoints into the results folder (train(results_dir=...)): every this many steps
    # and/or minutes; 0 = only at the end (and when interrupted)
    checkpoint_every: int = 0
    checkpoint_minutes: float = 0.0
    # stop with TrainingDiverged when parameters, gradients or the loss blow up (gsworkbench.train.divergence)
    check_divergence: bool = True
    # torch.compile the photometric loss (L1 + SSIM; the render stays eager, since densification reads
    # the 2D-mean gradients, which a compiled graph does not expose): False, True (inductor) or a
    # backend name ("aot_eager", "inductor"); see gsworkbench.compile.compile_step
    compile: bool | str = False
    near_plane: float = 0.01
    far_plane: float = 1e10

    def __post_init__(self) -> None:
        # normalised (text, lists read back from JSON -> a tuple of int pairs) and checked
        object.__setattr__(self, "resolution_schedule", check_schedule(self.resolution_schedule))
        for name in ("iterations", "seed", "sh_degree_interval", "refine_every", "reset_every", "init_random_num"):
            _check_int(name, getattr(self, name), 0 if name in ("iterations", "seed") else 1)
        _check_int("refine_start", self.refine_start, 0)
        if self.refine_stop is not None:
            _check_int("refine_stop", self.refine_stop, 0)
        if self.init_num is not None:
            _check_int("init_num", self.init_num, 1)
        if self.max_gaussians is not None:
            _check_int("max_gaussians", self.max_gaussians, 1)
        _check_int("cap_max", self.cap_max, 1)
        _check_int("eval_every", self.eval_every, 0)
        _check_int("checkpoint_every", self.checkpoint_every, 0)
        if not 0 <= self.sh_degree <= 3 or isinstance(self.sh_degree, bool):
            raise ValueError(f"sh_degree must be an int in 0..3, got {self.sh_degree!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.background not in BACKGROUNDS:
            raise ValueError(f"background must be one of {BACKGROUNDS}, got {self.background!r}")
        if self.eval_background not in EVAL_BACKGROUNDS:
            raise ValueError(f"eval_background must be one of {EVAL_BACKGROUNDS}, got {self.eval_background!r}")
        if not isinstance(self.init_triangulate, bool):
            raise ValueError(f"init_triangulate must be True or False, got {self.init_triangulate!r}")
        if self.init_rule not in INIT_RULES:
            raise ValueError(f"init_rule must be one of {INIT_RULES}, got {self.init_rule!r}")
        v = self.init_view_fraction
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1):
            raise ValueError(f"init_view_fraction must be None or lie in (0, 1], got {v!r}")
        if not (isinstance(self.compile, bool) or self.compile in COMPILE_MODES):
            raise ValueError(f"compile must be a bool or one of {', '.join(COMPILE_MODES)}; got {self.compile!r}")
        if self.backend not in ("ext", "torch"):
            raise ValueError(f"backend must be 'ext' or 'torch', got {self.backend!r}")
        if self.device not in ("cpu", "cuda") and not str(self.device).startswith("cuda:"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        for name in ("lr_means", "lr_scales", "lr_quats", "lr_opacities", "lr_sh0", "lr_shN", "opacity_reg",
                     "scale_reg", "noise_lr", "grow_rate", "init_scale", "init_extent",
                     "checkpoint_minutes"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")
        for name in ("init_opacity", "prune_opacity", "lr_means_final", "ssim_lambda"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"{name} must lie in [0, 1], got {v!r}")
        if not self.init_extent > 0:
            raise ValueError(f"init_extent must be > 0, got {self.init_extent!r}")
        if not 0 < self.init_opacity < 1:
            raise ValueError(f"init_opacity must lie in (0, 1), got {self.init_opacity!r}")

    @property
    def refine_stop_step(self) -> int:
        """The last refinement step (default by strategy)."""
        if self.refine_stop is not None:
            return self.refine_stop
        return 25_000 if self.strategy == "mcmc" else 15_000

    @property
    def grow_grad2d_threshold(self) -> float:
        """The 2D-gradient threshold of cloning and splitting (default by ``absgrad``)."""
        if self.grow_grad2d is not None:
            return self.grow_grad2d
        return 8e-4 if self.absgrad else 2e-4

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_int(name: str, value: object, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {value!r}")


# The built-in scene each preset trains on when none is given (gsworkbench.scenes.builtin_scene keywords).
_MCMC = dict(init_opacity=0.5, init_scale=0.1, opacity_reg=0.01, scale_reg=0.01)

# The NeRF-synthetic schedule of the nerf_synthetic presets (see there for where its values come from).
_NERF_SYNTHETIC = dict(iterations=5000, refine_start=500, refine_stop=2500, refine_every=100, reset_every=1000,
                       sh_degree_interval=1000, eval_background="white")  # fmt: skip

PRESETS: dict[str, dict[str, Any]] = {
    # CI: seconds. A tiny object scene, densification every 30 steps.
    "smoke": dict(
        config=dict(
            iterations=150,
            refine_start=30,
            refine_stop=120,
            refine_every=30,
            reset_every=1000,
            sh_degree_interval=50,
            progress=False,
        ),
        scene=dict(name="object", width=64, height=64, n_train=24, n_test=4),
    ),  # fmt: skip
    # The Rust CPU trainer's micro preset: 100 steps, 12 train and 3 test views, densify every 25,
    # about 3,000 Gaussians growing to at most 5,000, at that trainer's image size (245 x 136).
    "micro": dict(
        config=dict(
            iterations=100,
            init_num=3000,
            refine_start=0,
            refine_stop=100,
            refine_every=25,
            reset_every=10_000,
            max_gaussians=5000,
            sh_degree_interval=25,
            cap_max=5000,
        ),
        scene=dict(name="object", width=245, height=136, n_train=12, n_test=3),
    ),  # fmt: skip
    # A few minutes on 2 cores: the quality preset of the object scene.
    "short": dict(
        config=dict(
            iterations=5000,
            refine_start=300,
            refine_stop=3500,
            refine_every=100,
            reset_every=2000,
            sh_degree_interval=500,
            max_gaussians=60_000,
            cap_max=60_000,
        ),
        scene=dict(name="object", width=200, height=200, n_train=40, n_test=8),
    ),  # fmt: skip
    # The NeRF-synthetic protocol at a CPU-friendly size (~5 min on 2 cores): the object scene without a
    # point cloud (RGBA, 40 train and 8 test views at 200 px), trained over white and scored over white
    # (3DGS trains and evaluates Blender scenes on white). Random start: 3DGS starts these scenes from
    # 100k random points inside the objects' bounds; here 30k (a CPU budget) in the visual hull
    # (init_rule "auto"). Schedule: 3DGS's and gsplat's absolute values where they fit (refinement from
    # step 500 every 100 steps, SH degree +1 every 1,000 steps), 3DGS's proportions where they do not
    # (refinement stops halfway, as 15k of 30k; opacity resets inside the refine window, at 1,000 and
    # 2,000 as at 3k..12k of 15k); growth capped at 60k Gaussians as in "short".
    "nerf_synthetic": dict(
        config=dict(**_NERF_SYNTHETIC, init_random_num=30_000, max_gaussians=60_000, cap_max=60_000),
        scene=dict(name="object", width=200, height=200, n_train=40, n_test=8, n_points=0),
    ),  # fmt: skip
    # The same protocol at lego's size: about 100 views rendered at 800 px, trained at 400 px (the loader's
    # 2x box downsample, as NeRF-synthetic runs at half resolution use), 50k random points in the hull.
    "nerf_synthetic_400": dict(
        config=dict(**_NERF_SYNTHETIC, init_random_num=50_000, max_gaussians=150_000, cap_max=150_000),
        scene=dict(name="object", width=800, height=800, n_train=100, n_test=10, n_points=0, downsample=2),
    ),  # fmt: skip
    # A handheld capture (photos seen from all around, an unbounded background, JPEG and a lens): the
    # cluttered room's photos at 320 x 240, trained from their SfM points. Shorter than gsplat's 7k steps
    # (a CPU budget of a few minutes), refinement over most of it (300..2,500 every 100) with opacity
    # resets at 1,000 and 2,000, SH degree +1 every 500 steps, and room for 150k Gaussians: a capture's
    # background and clutter need several times the Gaussians of one object ("short" stops at 60k).
    "capture": dict(
        config=dict(iterations=3000, refine_start=300, refine_stop=2500, refine_every=100, reset_every=1000,
                    sh_degree_interval=500, max_gaussians=150_000, cap_max=150_000),
        scene=dict(name="capture", width=320, height=240, n_train=24, n_test=4),
    ),  # fmt: skip
    # gsplat's schedules at 7k and 30k steps.
    "full7k": dict(
        config=dict(iterations=7000), scene=dict(name="object", width=400, height=400, n_train=80, n_test=16)
    ),  # fmt: skip
    "full30k": dict(
        config=dict(iterations=30_000), scene=dict(name="object", width=400, height=400, n_train=80, n_test=16)
    ),  # fmt: skip
}


def preset(name: str, **overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of preset ``name`` (``smoke``, ``micro``, ``short``, ``nerf_synthetic``,
    ``nerf_synthetic_400``, ``capture``, ``full7k``, ``full30k``)
    with ``overrides`` applied; ``strategy="mcmc"`` also applies gsplat's MCMC initialisation and
    regularisation unless overridden."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown training parameter(s): {', '.join(unknown)}")
    values = dict(PRESETS[name]["config"])
    if overrides.get("strategy", values.get("strategy")) == "mcmc":
        values.update(_MCMC)
    values.update(overrides)
    return replace(TrainConfig(), **values)


def preset_scene(name: str) -> dict[str, Any]:
    """The built-in scene parameters of preset ``name``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return dict(PRESETS[name]["scene"])
