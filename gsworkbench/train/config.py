"""Training settings: :class:`TrainConfig` holds the run-wide settings and the densification strategy
(:class:`~gsworkbench.train.strategy.DefaultStrategy` or :class:`~gsworkbench.train.strategy.MCMCStrategy`,
each owning its own settings); the named presets are in :mod:`gsworkbench.train.presets`.

The defaults follow gsplat's ``simple_trainer`` (its published values): Adam with eps 1e-15; learning
rates means 1.6e-4 x scene scale (decayed exponentially to 1% over the run), scales 5e-3, quats 1e-3,
opacities 5e-2, SH DC 2.5e-3, higher SH 2.5e-3/20; loss 0.8 L1 + 0.2 (1 - SSIM); the SH degree raised
every 1,000 steps; adaptive density control with 2D-gradient threshold 2e-4, 3D scale threshold 0.01 x
scene scale, refinement every 100 steps from step 500 to 15,000, opacity reset every 3,000 and pruning
below opacity 0.005. MCMC uses gsplat's MCMC values (cap, noise 5e5, relocation below opacity 0.005,
growth by 5% per refinement up to step 25,000); its presets add opacity and scale regularisation 0.01.

Every field is checked from its metadata (:mod:`gsworkbench.train.settings`). Flat keyword sets (the
notebooks' parameters, the CLI's ``-p NAME VALUE``, checkpoints written before the strategy was its own
dataclass) go through :meth:`TrainConfig.from_flat` / :meth:`TrainConfig.with_flat`, which route a
strategy's keys (``refine_every``, ``cap_max``, ...) into the strategy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from gsworkbench.core.compile import COMPILE_MODES
from gsworkbench.splat.rasterize import RASTERIZE_MODES
from gsworkbench.train.adam import OPTIMIZERS
from gsworkbench.train.appearance import APPEARANCES
from gsworkbench.train.init_points import INIT_RULES
from gsworkbench.train.resolution import check_schedule
from gsworkbench.train.settings import check_settings, setting
from gsworkbench.train.strategy import STRATEGIES, DefaultStrategy, MCMCStrategy, Strategy

BACKGROUNDS = ("scene", "random")
EVAL_BACKGROUNDS = ("scene", "white", "black")


def _compile_problem(value: object) -> str | None:
    if isinstance(value, bool) or value in COMPILE_MODES:
        return None
    return f"be a bool or one of {', '.join(COMPILE_MODES)}"


def _device_problem(value: object) -> str | None:
    if value in ("cpu", "cuda") or (isinstance(value, str) and value.startswith("cuda:")):
        return None
    return "be 'cpu', 'cuda' or 'cuda:<index>'"


def _strategy_of(value: object) -> Strategy:
    """A strategy from an instance, its name (its defaults) or its nested dict (``{"name": ..., ...}``)."""
    if isinstance(value, (DefaultStrategy, MCMCStrategy)):
        return value
    if isinstance(value, str) and value in STRATEGIES:
        return STRATEGIES[value]()
    if isinstance(value, Mapping) and value.get("name", DefaultStrategy.name) in STRATEGIES:
        settings = dict(value)
        kind = STRATEGIES[settings.pop("name", DefaultStrategy.name)]
        unknown = sorted(set(settings) - {f.name for f in fields(kind)})
        if unknown:
            raise ValueError(f"unknown {kind.name} strategy parameter(s): {', '.join(unknown)}")
        return kind(**settings)
    raise ValueError(f"strategy must be one of {tuple(STRATEGIES)} or a strategy instance, got {value!r}")


def _flat_keys(kind: type[Strategy]) -> dict[str, str]:
    """The flat keys a strategy takes -> its field names (its own names and its ``flat_aliases``)."""
    return {**{f.name: f.name for f in fields(kind)}, **kind.flat_aliases}


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs besides its scene. Lengths in world units, steps are iterations.

    ``strategy``: the densification strategy with its settings; its name (``"default"``, ``"mcmc"``)
    stands for that strategy with its defaults, and its nested dict (:meth:`to_dict`) for itself.
    """

    iterations: int = setting(30_000, kind="int", min=0)
    backend: str = setting("ext", kind="choice", choices=("ext", "torch"))  # "ext" (compiled kernels) or "torch"
    device: str = setting("cpu", check=_device_problem)
    seed: int = setting(0, kind="int", min=0)
    # ---- initialisation ----
    # where training starts (gsworkbench.train.init_points): "auto" = the scene's cloud, else the visual
    # hull of its alpha masks (RGBA objects), else points triangulated from the train views (photos,
    # with init_triangulate), else the cameras' shared view volume; or one by name
    init_rule: str = setting("auto", kind="choice", choices=INIT_RULES)
    init_triangulate: bool = setting(True, kind="bool")  # "auto" may triangulate a cloud for RGB scenes without one
    init_num: int | None = setting(None, kind="int", min=1, optional=True)  # points drawn from the cloud (None: all)
    # random points when there is no cloud (or a random rule is named)
    init_random_num: int = setting(100_000, kind="int", min=1)
    # how far from the camera centroid random points may lie, x scene scale ("cube": around the origin)
    init_extent: float = setting(3.0, kind="number", min=0, min_open=True)
    # share of train views that see a random point (None: by rule)
    init_view_fraction: float | None = setting(None, kind="number", min=0, max=1, min_open=True, optional=True)
    init_opacity: float = setting(0.1, kind="number", min=0, max=1, min_open=True, max_open=True)
    init_scale: float = setting(1.0, kind="number", min=0)  # times the mean distance to the 3 nearest neighbours
    # points for what the sparse cloud misses, added to the rule's (gsworkbench.train.init_background):
    # a far shell (sky, distant surroundings) coloured from the train photos, of init_shell_num points at
    # init_shell_radius x scene scale around the camera centroid (above 1: beyond every camera) ...
    init_shell: bool = setting(False, kind="bool")
    init_shell_num: int = setting(5_000, kind="int", min=1)
    init_shell_radius: float = setting(10.0, kind="number", min=1, min_open=True)
    # ... and up to init_fill_num points on rays through pixels no cloud point projects near, at the depth
    # where the other train photos agree with the pixel's colour
    init_fill: bool = setting(False, kind="bool")
    init_fill_num: int = setting(5_000, kind="int", min=1)
    sh_degree: int = setting(3, kind="int", min=0, max=3)
    sh_degree_interval: int = setting(1000, kind="int", min=1)  # the SH degree in use rises by one every this often
    # ---- optimiser and loss ----
    lr_means: float = setting(1.6e-4, kind="number", min=0)  # times the scene scale
    # fraction of lr_means reached at the last step (exponential decay)
    lr_means_final: float = setting(0.01, kind="number", min=0, max=1)
    lr_scales: float = setting(5e-3, kind="number", min=0)
    lr_quats: float = setting(1e-3, kind="number", min=0)
    lr_opacities: float = setting(5e-2, kind="number", min=0)
    lr_sh0: float = setting(2.5e-3, kind="number", min=0)
    lr_shN: float = setting(2.5e-3 / 20, kind="number", min=0)
    adam_eps: float = 1e-15
    # "adam" (dense), "visible_adam" (only the Gaussians seen in the step's view move; their moments too)
    # or "selective_adam" (gsplat's: visible_adam without bias correction); see gsworkbench.train.adam
    optimizer: str = setting("adam", kind="choice", choices=OPTIMIZERS)
    ssim_lambda: float = setting(0.2, kind="number", min=0, max=1)
    # per-photo appearance (gsworkbench.train.appearance): "affine" learns a colour transform per training
    # photo (exposure, white balance) beside the splats, at lr_appearance; held-out photos get their mean
    appearance: str = setting("none", kind="choice", choices=APPEARANCES)
    lr_appearance: float = setting(1e-3, kind="number", min=0)
    # camera refinement (gsworkbench.train.pose_refinement, gsplat's pose_opt): each training view's pose
    # gets a learned rigid correction at lr_pose (rotation's 6D deviations; translation in scene scales)
    pose_opt: bool = setting(False, kind="bool")
    lr_pose: float = setting(1e-4, kind="number", min=0)
    # with pose_opt: a per-view focal scale, principal-point shift and radial residual too (photos
    # undistorted with one shared lens that differs a little from each photo's own)
    intrinsics_opt: bool = setting(False, kind="bool")
    # test-time pose alignment of each held-out view before it is scored (splats fixed; 0: none): steps
    # of Adam at lr_eval_pose on the L1 error against its photo, for poses recovered as the training
    # ones were (a held-out pose is as wrong as theirs, and the splats cannot learn it)
    eval_pose_steps: int = setting(0, kind="int", min=0)
    lr_eval_pose: float = setting(1e-3, kind="number", min=0)
    # "scene" (the colour the images were composited over) or "random"
    background: str = setting("scene", kind="choice", choices=BACKGROUNDS)
    # the background of the held-out evaluation: "scene", or the dataset protocol's colour ("white" for
    # NeRF-synthetic): RGBA test images are composited over it and the render uses it
    eval_background: str = setting("scene", kind="choice", choices=EVAL_BACKGROUNDS)
    opacity_reg: float = setting(0.0, kind="number", min=0)
    scale_reg: float = setting(0.0, kind="number", min=0)
    # coarse-to-fine (gsworkbench.train.resolution): ((until_step, factor), ...) renders and compares at
    # 1/factor of the image size for steps < until_step (the first entry that applies), full size after;
    # ((1000, 4), (2000, 2)): 1/4 before step 1000, 1/2 before 2000. Text "1000:4,2000:2" is accepted;
    # () = full size throughout. Held-out evaluation is always at full size.
    resolution_schedule: tuple[tuple[int, int], ...] = setting((), convert=check_schedule)
    # ---- anti-aliasing (for views at other sizes than the training images: zoom, coarse-to-fine) ----
    # the rasterizer's mode in training and evaluation: "classic" (3DGS: a 0.3 px screen-space blur added
    # to every splat) or "antialiased" (Mip-Splatting's 2D filter: that blur with the opacity scaled by
    # sqrt(det cov2d / det blurred), so a splat's integral stays the same); see gsworkbench.splat.rasterize
    rasterize_mode: str = setting("classic", kind="choice", choices=RASTERIZE_MODES)
    # the variance (pixels^2) of that screen-space blur; Mip-Splatting's 2D filter uses 0.1 beside its 3D filter
    eps2d: float = setting(0.3, kind="number", min=0)
    # Mip-Splatting's 3D filter (gsworkbench.train.mip_filter): each Gaussian blurred in 3D by what the
    # training cameras sample of it, of variance filter_3d_variance (pixels^2) / rate^2; its rate is
    # recomputed every filter_3d_every steps and after densification; exported splats carry it
    filter_3d: bool = setting(False, kind="bool")
    filter_3d_variance: float = setting(0.2, kind="number", min=0, min_open=True)
    filter_3d_every: int = setting(100, kind="int", min=1)
    # ---- densification ----
    strategy: DefaultStrategy | MCMCStrategy = setting(default_factory=DefaultStrategy, convert=_strategy_of)
    # whenever densification changes the Gaussians, put their rows (and Adam's moments) in Morton order
    # of their centres (gsworkbench.core.spatial_order), so that a tile's Gaussians share cache lines in
    # the rasterizer; given splats keep their order until then
    spatial_order: bool = setting(True, kind="bool")
    # ---- evaluation and output ----
    eval_every: int = setting(0, kind="int", min=0)  # 0: only at the end
    progress: bool = True
    # periodic checkpoints into the results folder (train(results_dir=...)): every this many steps
    # and/or minutes; 0 = only at the end (and when interrupted)
    checkpoint_every: int = setting(0, kind="int", min=0)
    checkpoint_minutes: float = setting(0.0, kind="number", min=0)
    # stop with TrainingDiverged when parameters, gradients or the loss blow up (gsworkbench.train.divergence)
    check_divergence: bool = True
    # torch.compile the photometric loss (L1 + SSIM; the render stays eager, since densification reads
    # the 2D-mean gradients, which a compiled graph does not expose): False, True (inductor) or a
    # backend name ("aot_eager", "inductor"); see gsworkbench.core.compile.compile_step
    compile: bool | str = setting(False, check=_compile_problem)
    near_plane: float = 0.01
    far_plane: float = 1e10

    def __post_init__(self) -> None:
        check_settings(self)
        if self.intrinsics_opt and not self.pose_opt:
            raise ValueError("intrinsics_opt refines the lens beside the poses: it needs pose_opt=True")

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data, the strategy nested with its name: ``{..., "strategy": {"name":
        "mcmc", "cap_max": ..., ...}, ...}`` (what checkpoints and results metadata record)."""
        out = asdict(self)
        out["strategy"] = {"name": self.strategy.name, **asdict(self.strategy)}
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainConfig:
        """The config of :meth:`to_dict`'s form, or of a flat dict (the form before the strategy had its
        own settings: ``strategy`` a name, its settings beside it), read through :meth:`from_flat`."""
        if not isinstance(values.get("strategy"), Mapping):
            return cls.from_flat(values)
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown training parameter(s): {', '.join(unknown)}")
        return cls(**values)

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> TrainConfig:
        """The defaults with flat ``values`` applied (:meth:`with_flat`)."""
        return cls().with_flat(**values)

    @staticmethod
    def flat_names() -> set[str]:
        """Every key :meth:`with_flat` takes: the run-wide fields, ``strategy`` and every strategy's keys."""
        names = {f.name for f in fields(TrainConfig)}
        for kind in STRATEGIES.values():
            names |= set(_flat_keys(kind))
        return names

    def with_flat(self, **overrides: Any) -> TrainConfig:
        """A copy with flat ``overrides``: run-wide fields by name, ``strategy`` as a name, instance or
        nested dict (another strategy than this config's starts from its own defaults), and the
        strategy's settings by name (``refine_every=50``, ``cap_max=10_000``; ``prune_opacity`` is
        MCMC's ``min_opacity``). Keys of the strategy not chosen are ignored, so one flat set serves both;
        ``None`` for a strategy setting that takes no None keeps the strategy's value (old flat
        configs' "by strategy"). Unknown keys: ValueError naming them."""
        unknown = sorted(set(overrides) - self.flat_names())
        if unknown:
            raise ValueError(f"unknown training parameter(s): {', '.join(unknown)}")
        chosen = overrides.get("strategy", self.strategy)
        if isinstance(chosen, str) and chosen == self.strategy.name:
            chosen = self.strategy
        chosen = _strategy_of(chosen)
        own: dict[str, Any] = {}
        optional = {f.name: bool(f.metadata.get("optional")) for f in fields(chosen)}
        for key, name in _flat_keys(type(chosen)).items():
            if key in overrides and (overrides[key] is not None or optional[name]):
                own[name] = overrides[key]
        run_wide = {k: v for k, v in overrides.items() if k in _RUN_WIDE}
        return replace(self, strategy=replace(chosen, **own) if own else chosen, **run_wide)


_RUN_WIDE = frozenset(f.name for f in fields(TrainConfig)) - {"strategy"}
