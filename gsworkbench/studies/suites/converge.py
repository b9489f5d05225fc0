"""``converge``: minutes to held-out PSNRs (25, 30, 33, 35 dB) from random init, by schedule, start and preset.

Each case trains from random initialisation until the mean PSNR of the held-out views (rendered at
full size) has reached each of its targets, or a step or time cap
(:class:`gsworkbench.studies.converge.ConvergeRun`): ``minutes_to_<t>db`` and ``steps_to_<t>db``
per target (NaN when not reached within the caps, or not a target of the case), ``seconds_to_target``
and ``steps_to_target`` of the lowest (25 dB), counting the training steps only (not the evaluations,
every ``eval_every`` steps, nor the set-up); ``final_test_psnr_db``, ``ms_per_step`` (mean over the
run) and ``ms_step_f<k>`` (median per resolution factor) follow, ``curve`` lists every evaluation
(steps, training seconds, dB, views averaged), and ``eval_seconds`` / ``eval_share`` say what the
evaluations cost. Between full evaluations only ``probe_views`` of the test views are rendered (the
module doc of :mod:`gsworkbench.studies.converge` says when the whole set is); a target counts only
on a full evaluation, so every PSNR at a target is the whole test set's.

The cases of one size differ in ``schedule`` (``off``, or a
:attr:`gsworkbench.train.TrainConfig.resolution_schedule` as text), ``init_scale`` (the 3-NN
scales' multiplier, :attr:`~gsworkbench.train.TrainConfig.init_scale`: 1 as in 3DGS, or
:data:`SMALL_INIT_SCALE`; smaller first splats touch fewer tiles and pixels) and ``preset``: the
``nerf_synthetic`` schedule with the suite's start (the train suite's ``random-init`` splats: uniform
in the object's bounding box, here its visual hull's; the trainer's 3-NN scales), densification up to
3x the initial count, capped at :data:`MAX_STEPS` steps; and, at 800x800, the ``nerf_synthetic_800``
preset as the trainer runs it (its own start, schedule, cap and iterations; past its iterations, up to
the same step cap, the run goes on with the positions' learning rate still decaying). They run
interleaved, a slice of ``eval_every`` steps each in turn, so the machine's drift hits all alike; the
summary adds ``x_time_to_target``, the time to the lowest target of the plain case (``nerf_synthetic``,
no schedule, scale 1) over each case's (same run). :func:`gsworkbench.studies.converge.plot_converge_curves`
draws the curves (notebook 06 with ``converge_results``).

The scene is the start of a NeRF-synthetic-like run: the built-in object with 100 train and 10 test
views rendered at 800 px without a point cloud (the ``nerf_synthetic_400`` and ``nerf_synthetic_800``
presets' source), trained at 800x800 (100k points; targets 25, 30, 33 and 35 dB, at most
:data:`MAX_STEPS` steps and 60 minutes of training) and, box-downsampled, at 400x400 (30k points; 25 dB,
30 minutes). Then the ``bricks`` cases: the lego-hard built-in scene (``bricks``: studs, thin rods,
glossy plastic and metal) in the same layout at 800x800, the ``nerf_synthetic_800`` preset and its
:data:`BRICKS_VARIANTS` (column ``variant``: the preset's overrides, which the case's ``overrides``
column spells out), interleaved, to 25, 30, 33, 35 and 37 dB within :data:`BRICKS_MAX_STEPS` steps and
60 minutes; and the same cases on its validation split (``bricks-val``: 90 training views trained on, the
other 10 scored), where settings are tuned, so the test views never choose one.
``$GSW_CONVERGE_MAX_MINUTES`` sets every case's cap instead. Generating an 800 px scene takes tens of
minutes once (then it is cached). quick=True: the smoke scene (64x64, 24 + 4 views) from 300 points to
19 and 21 dB, 2 probe views.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable
from typing import Any

import pandas as pd

from gsworkbench.bench.registry import Case, Prepared, register_suite
from gsworkbench.studies.converge import ConvergeRun, stderr_log

SCHEDULE = "500:4,1000:2"  # the coarse-to-fine schedule the full grid compares with full size throughout
QUICK_SCHEDULE = "40:4,80:2"
SMALL_INIT_SCALE = 0.5  # the smaller initial scales the grid compares with 3DGS's 3-NN scales (1)
MAX_STEPS = 5000  # nerf_synthetic's iterations: the learning-rate decay follows them
# (width, height, downsample of the 800 px renders, random points, targets dB, max minutes of training)
SIZES = ((800, 800, 1, 100_000, (25.0, 30.0, 33.0, 35.0), 60.0), (400, 400, 2, 30_000, (25.0,), 30.0))
QUICK_TARGETS = (19.0, 21.0)
EVAL_EVERY = 100
PROBE_VIEWS = 3  # of the 10 test views, between full evaluations
FULL_PRESET = "nerf_synthetic_800"  # compared at 800x800 as the trainer runs it
# the lego-hard scene's cases: the preset, and the levers weighed against it (its overrides)
BRICKS_VARIANTS: dict[str, dict[str, Any]] = {
    "preset": {},
    "mcmc": {"strategy": "mcmc"},  # gsplat's MCMC: a fixed budget of Gaussians, relocated rather than split
    "threshold": {"budget": None},  # growth by the gradient threshold, not to the budget by score
    "4k": {"iterations": 4000, "refine_stop": 2000, "budget": None},  # half the schedule, by the threshold
    "unordered": {"spatial_order": False},  # the Gaussians' rows left in the order densification leaves them
    # twice the schedule and a larger budget: for 37 dB within the hour
    "16k": {"iterations": 16_000, "refine_stop": 8000, "budget": 350_000},
    # the same with the trainer's second seed (its random start and view order): how far one seed's minutes go
    "16k-seed1": {"iterations": 16_000, "refine_stop": 8000, "budget": 350_000, "seed": 1},
}
BRICKS_TARGETS = (25.0, 30.0, 33.0, 35.0, 37.0)
BRICKS_MAX_STEPS = 16_000  # the longest variant's iterations: the step cap must be one per comparison
VALIDATION_EVERY = 10  # the tuning cases hold out every 10th training view (Scene.validation_split)


@functools.lru_cache(maxsize=1)
def converge_scene(downsample: int, quick: bool, name: str = "object", split: str = "test") -> Any:
    """The NeRF-synthetic-like built-in scene ``name`` (100 + 10 views at 800 px, no cloud) at
    800 / ``downsample`` px, or with ``quick`` the smoke preset's scene (64x64, 24 + 4 views). ``split``:
    ``test`` scores the scene's test views; ``validation`` trains on 90 of the training views and scores
    the other 10 (:meth:`~gsworkbench.scenes.Scene.validation_split`), for tuning without the test views.
    Cached: the cases of a size share it."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset_scene

    if split not in ("test", "validation"):
        raise ValueError(f"split must be 'test' or 'validation', got {split!r}")
    if quick:
        scene = builtin_scene(**preset_scene("smoke"))
    else:
        scene = builtin_scene(name, width=800, height=800, n_train=100, n_test=10, n_points=0, downsample=downsample)
    return scene.validation_split(VALIDATION_EVERY) if split == "validation" else scene


def converge_setup(params: dict[str, Any], downsample: int, quick: bool, name: str) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        from gsworkbench.studies.scene_splats import random_init_splats
        from gsworkbench.train import Trainer, preset

        scene = converge_scene(downsample, quick, params["scene"].split("-")[0], params.get("split", "test"))
        num, schedule = params["num"], "" if params["schedule"] == "off" else params["schedule"]
        if params["preset"] == FULL_PRESET:  # as the trainer runs it: its own start and settings
            overrides = json.loads(params.get("overrides", "{}"))
            trainer = Trainer(scene, preset(FULL_PRESET, progress=False, **overrides))
        else:
            cfg = preset(params["preset"], iterations=params["max_steps"], max_gaussians=3 * num, cap_max=3 * num,
                         progress=False, resolution_schedule=schedule, init_scale=params["init_scale"])  # fmt: skip
            trainer = Trainer(scene, cfg, random_init_splats(scene, num, seed=0, init_scale=cfg.init_scale))
        targets = [float(t) for t in params["targets_db"].split(",")]
        run = ConvergeRun(trainer, targets, eval_every=params["eval_every"], max_steps=params["max_steps"],
                          max_seconds=60 * params["max_minutes"], probe_views=params["probe_views"],
                          log=stderr_log(name))  # fmt: skip
        return Prepared(run, run.extras)

    return setup


def _schedule_text(cfg: Any) -> str:
    """A config's resolution schedule as the ``schedule`` column writes it (``off``: none)."""
    return ",".join(f"{until}:{factor}" for until, factor in cfg.resolution_schedule) or "off"


def _max_minutes(default: float) -> float:
    """A case's cap on training minutes: ``$GSW_CONVERGE_MAX_MINUTES`` (a session's shorter run), else ``default``."""
    return float(os.environ.get("GSW_CONVERGE_MAX_MINUTES", default))


def _case(width: int, height: int, downsample: int, num: int, targets: tuple[float, ...], minutes: float,
          schedule: str, init_scale: float, quick: bool, base: str | None = None) -> Case:  # fmt: skip
    steps, every, probe = (200, 10, 2) if quick else (MAX_STEPS, EVAL_EVERY, PROBE_VIEWS)
    minutes = _max_minutes(minutes)
    base = base or ("smoke" if quick else "nerf_synthetic")
    params = {"scene": "object-smoke" if quick else "object-nerf", "width": width, "height": height, "num": num,
              "preset": base, "schedule": schedule, "init_scale": init_scale, "target_db": min(targets),
              "targets_db": ",".join(f"{t:g}" for t in sorted(targets)), "max_steps": steps, "max_minutes": minutes,
              "eval_every": every, "probe_views": probe}  # fmt: skip
    name = f"converge/{width}x{height}/n{num}/{schedule}" + ("" if init_scale == 1.0 else f"/init-scale{init_scale:g}")
    if base == FULL_PRESET:
        name = f"converge/{width}x{height}/n{num}/preset-{base}"
    return Case(name, params, converge_setup(params, downsample, quick, name), measured=True)


def _preset_case(quick: bool) -> Case:
    """The ``nerf_synthetic_800`` case: its schedule, initial scale and count in the params (what it runs)."""
    from gsworkbench.train import preset

    cfg = preset(FULL_PRESET)
    w, h, d, _, targets, minutes = SIZES[0]
    return _case(w, h, d, cfg.init_random_num, targets, minutes, _schedule_text(cfg), cfg.init_scale, quick,
                 FULL_PRESET)


def _bricks_case(variant: str, split: str = "test") -> Case:
    """The ``nerf_synthetic_800`` preset with :data:`BRICKS_VARIANTS` ``variant``'s overrides on the
    lego-hard ``bricks`` scene at 800x800 (the overrides and what they set in the params), scored on the
    ``split`` (:func:`converge_scene`): scene ``bricks-val`` for ``validation``."""
    from gsworkbench.train import preset

    overrides = BRICKS_VARIANTS[variant]
    cfg = preset(FULL_PRESET, **overrides)
    scene = "bricks-val" if split == "validation" else "bricks-nerf"
    params = {"scene": scene, "split": split, "width": 800, "height": 800, "num": cfg.init_random_num,
              "preset": FULL_PRESET, "variant": variant, "overrides": json.dumps(overrides, sort_keys=True),
              "schedule": _schedule_text(cfg),
              "init_scale": cfg.init_scale, "iterations": cfg.iterations, "target_db": min(BRICKS_TARGETS),
              "targets_db": ",".join(f"{t:g}" for t in BRICKS_TARGETS), "max_steps": BRICKS_MAX_STEPS,
              "max_minutes": _max_minutes(60.0), "eval_every": EVAL_EVERY, "probe_views": PROBE_VIEWS}  # fmt: skip
    name = f"converge/{scene.replace('-nerf', '')}/800x800/preset-{FULL_PRESET}/{variant}"
    return Case(name, params, converge_setup(params, 1, False, name), measured=True)


def cases(quick: bool) -> list[Case]:
    variants = [(s, k) for k in (1.0, SMALL_INIT_SCALE) for s in ("off", QUICK_SCHEDULE if quick else SCHEDULE)]
    if quick:
        return [_case(64, 64, 1, 300, QUICK_TARGETS, 5.0, s, k, True) for s, k in variants]
    grid = [_case(w, h, d, n, t, m, s, k, False) for w, h, d, n, t, m in SIZES for s, k in variants]
    bricks = [_bricks_case(v, split) for split in ("test", "validation") for v in BRICKS_VARIANTS]
    return grid[: len(variants)] + [_preset_case(False)] + grid[len(variants) :] + bricks


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Adds ``x_time_to_target``: the seconds to the lowest target of the plain case of the same size
    (``nerf_synthetic``, schedule ``off``, ``init_scale`` 1) over each case's (measured in the same run);
    NaN where either did not reach the target."""
    df = df.copy()
    if "seconds_to_target" not in df or "schedule" not in df:
        return df
    keys = ["scene", "width", "height", "target_db"] if "scene" in df else ["width", "height", "target_db"]
    plain = df["schedule"] == "off"
    if "init_scale" in df:  # runs from before the init-scale cases had scale 1 throughout
        plain &= df["init_scale"].fillna(1.0) == 1.0
    if "preset" in df:  # runs from before the preset case were all nerf_synthetic's
        plain &= df["preset"].fillna("nerf_synthetic").isin(["nerf_synthetic", "smoke"])
    off = df[plain].drop_duplicates(keys).set_index(keys)["seconds_to_target"]
    df["x_time_to_target"] = [
        off.get(tuple(getattr(r, k) for k in keys), math.nan) / r.seconds_to_target for r in df.itertuples()
    ]
    return df


register_suite("converge", __doc__.split("\n\n")[0], summarize)(cases)
