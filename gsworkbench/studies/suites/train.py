"""``train``: one 3DGS training step (render, loss, backward, Adam) per call, ext against torch.

Gaussians at fixed counts (densification off) on the built-in object scene, in five kinds
(``scene`` column; see gsworkbench.studies.scene_splats): ``surface`` (splats on the surfaces,
initialised as the trainer would) at 10k and 100k on 245x136 (the Rust CPU trainer's size), 400x400
and 800x800, and at 300k and 1M on 800x800; ``dense`` (a stand-in for a trained NeRF-synthetic object:
small, overlapping, mostly opaque splats), 300k at 800x800; ``random-init`` (the start of a
NeRF-synthetic run: 100k random points in the object's bounds, the trainer's 3-NN scales),
``volumetric`` (100k translucent splats filling the object's box) and ``trained`` (the splats of a real
trainer run on the 800 px object capped at 100k; ``gaussians`` says where it ended below), 800x800.
The torch reference runs at 10k up to 400x400. Each row adds the median milliseconds of every stage
(``ms_<stage>``) over the timed steps and of the time outside them (``ms_unstaged``), the tile
intersections of the first view (``n_isects``), the means over the train views (which the steps cycle
through) of the intersections and of the ext forward's blended evaluations (``mean_n_isects``,
``mean_evaluations``; NaN for torch), the SH degree (``sh_degree``; with those, the roofline's counts:
gsworkbench.train.step_work), and the first step's memory (see gsworkbench.bench.peak_rss): its peak
working memory above the RSS with scene and splats built (``first_step_peak_rss_mib``), the peak of
each stage above that same level (``peak_rss_mib_<stage>``), and the process's whole peak RSS during
the step (``first_step_peak_rss_total_mib``, to hold against a memory budget). quick=True: 2,000
Gaussians of each kind at 64x64; the real-size cases are listed as skipped (they run in the full grid
only).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pandas as pd

from gsworkbench.bench.registry import Case, Prepared, register_suite
from gsworkbench.core.limits import retained_freed_memory
from gsworkbench.studies.scene_splats import object_scene

NUMS = (10_000, 100_000)
SIZES = ((245, 136), (400, 400), (800, 800))
# the real-size cases: (scene kind, Gaussians, image size); full grid only
LARGE = (
    ("surface", 300_000, (800, 800)),
    ("surface", 1_000_000, (800, 800)),
    ("dense", 300_000, (800, 800)),
    ("random-init", 100_000, (800, 800)),
    ("volumetric", 100_000, (800, 800)),
    ("trained", 100_000, (800, 800)),
)
QUICK_SKIP = "real-size case: runs in the full grid only (skipped in --quick)"
UNSTAGED = "unstaged"  # ms_unstaged: the median step's time outside the timed stages


class TrainStep:
    """A callable running one training step of a trainer; ``extras()`` gives its stage medians over
    the steps run so far (the runner calls it after the timing) and the first step's memory."""

    def __init__(self, trainer: Any) -> None:
        from gsworkbench.bench.peak_rss import StagePeaks

        self.trainer = trainer
        # the malloc policy of Trainer.run while the runner times the steps; extras() (called after the
        # timing) leaves it
        self._policy = contextlib.ExitStack()
        self._policy.enter_context(retained_freed_memory())
        with_peaks = StagePeaks(trainer.timer)
        trainer.timer = with_peaks
        try:  # the first step's working memory (MiB above the RSS with scene and splats built); NaN off Linux
            self.peak_rss_mib = with_peaks.measure(trainer.step)
        except BaseException:  # no extras() will come to put the malloc policy back
            self._policy.close()
            raise
        finally:
            trainer.timer = with_peaks.timer
        self.stage_peaks = with_peaks.peaks
        self.peak_total_mib = with_peaks.peak_total_mib

    def __call__(self) -> None:
        self.trainer.step()

    def extras(self) -> dict[str, float]:
        from gsworkbench.train.timers import STAGES

        self._policy.close()

        rows = pd.DataFrame(self.trainer.rows[min(3, len(self.trainer.rows) - 1) :])
        out = {f"ms_{s}": float(rows[f"t_{s}"].median() * 1e3) for s in STAGES}
        # the step's time outside its stages (Python between them, the history row), step by step
        out[f"ms_{UNSTAGED}"] = float((rows["t_step"] - rows[[f"t_{s}" for s in STAGES]].sum(axis=1)).median() * 1e3)
        out["gaussians"] = len(self.trainer.model)
        out["first_step_peak_rss_mib"] = self.peak_rss_mib
        out["first_step_peak_rss_total_mib"] = self.peak_total_mib
        out.update({f"peak_rss_mib_{s}": self.stage_peaks.get(s, float("nan")) for s in STAGES})
        return out


def view_counts(trainer: Any, view: int) -> tuple[int, float]:
    """The tile intersections of a render of ``view`` (an index into the trainer's scene) at its full size
    and, with the ext backend, the forward's blended evaluations
    (:func:`gsworkbench.splat.ops.blended_evaluations`; NaN with another backend)."""
    import torch

    from gsworkbench.splat.ops import blended_evaluations, last_contributors

    with torch.no_grad():
        meta = trainer.render([view])[2]
    if trainer.cfg.backend != "ext":
        return int(meta["n_isects"]), float("nan")
    ts, toff = meta["tile_size"], meta["tile_offsets"]
    last = last_contributors(meta["means2d"], meta["conics"], meta["opacities"], meta["width"], meta["height"], ts,
                             toff, meta["flatten_ids"])  # fmt: skip
    return int(meta["n_isects"]), float(blended_evaluations(toff, last, ts))


def step_setup(
    backend: str, num: int, width: int, height: int, seed: int = 0, kind: str = "surface"
) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        from gsworkbench.studies.scene_splats import scene_splats
        from gsworkbench.train import Trainer, preset

        scene = object_scene(width, height)
        cfg = preset("micro", backend=backend, refine_start=10**9, max_gaussians=None, progress=False,
                     iterations=10**6, sh_degree_interval=1)  # fmt: skip  # densification off: a fixed count
        trainer = Trainer(scene, cfg, scene_splats(kind, scene, num, seed=seed))
        counts = [view_counts(trainer, view) for view in trainer.scene.train_ids.tolist()]
        views = {"n_isects": counts[0][0], "sh_degree": cfg.sh_degree,
                 "mean_n_isects": sum(c[0] for c in counts) / len(counts),
                 "mean_evaluations": sum(c[1] for c in counts) / len(counts)}  # fmt: skip
        step = TrainStep(trainer)
        return Prepared(step, lambda: {**step.extras(), **views})

    return setup


def _skip(backend: str, num: int, size: tuple[int, int]) -> str | None:
    if backend == "torch" and (num > 10_000 or size[0] * size[1] > 400 * 400):
        return "torch reference: too slow for this size (sub-sampled grid)"
    return None


def step_case(backend: str, kind: str, num: int, size: tuple[int, int], skip: str | None = None) -> Case:
    """The case of one training step of ``num`` Gaussians of ``kind`` at ``size`` (width, height)."""
    w, h = size
    name = f"train/{backend}/n{num}/{w}x{h}" if kind == "surface" else f"train/{backend}/{kind}/n{num}/{w}x{h}"
    params = {"backend": backend, "scene": kind, "num": num, "width": w, "height": h}
    return Case(name, params, step_setup(backend, num, w, h, kind=kind), skip)


def cases(quick: bool) -> list[Case]:
    out = []
    if quick:
        out += [step_case(b, "surface", 2_000, (64, 64), None) for b in ("ext", "torch")]
        out += [step_case("ext", kind, 2_000, (64, 64)) for kind in ("dense", "random-init", "volumetric", "trained")]
    else:
        for num in NUMS:
            for size in SIZES:
                out += [step_case(b, "surface", num, size, _skip(b, num, size)) for b in ("ext", "torch")]
    for kind, num, size in LARGE:
        backends = ("ext", "torch") if kind == "surface" else ("ext",)
        out += [step_case(b, kind, num, size, QUICK_SKIP if quick else _skip(b, num, size)) for b in backends]
    return out


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Adds ms per step, steps per second, and ext's speed-up over torch measured in the same run."""
    df = df.copy()
    if "median_s" not in df:
        return df
    if "scene" not in df:  # runs from before the scene kinds: all surface
        df["scene"] = "surface"
    df["ms_per_step"] = df["median_s"] * 1e3
    df["steps_per_s"] = 1.0 / df["median_s"]
    ref = df[df["backend"] == "torch"].set_index(["scene", "num", "width", "height"])["median_s"]
    df["x_torch"] = [
        ref.get((r.scene, r.num, r.width, r.height), float("nan")) / r.median_s if r.backend == "ext" else float("nan")
        for r in df.itertuples()
    ]
    return df


register_suite("train", __doc__.split("\n\n")[0], summarize)(cases)
