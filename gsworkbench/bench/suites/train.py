"""``train``: one 3DGS training step (render, loss, backward, Adam) per call, ext against torch.

Gaussians: 10k and 100k (fixed counts, densification off); images 245x136 (the Rust CPU trainer's
size), 400x400 and 800x800 of the built-in object scene. The torch reference runs at 10k up to 400x400.
Each row adds the median milliseconds of every stage (``ms_<stage>``) over the timed steps, and the
first step's peak working memory (``first_step_peak_rss_mib``, see gsworkbench.bench.memory).
quick=True: 2,000 Gaussians at 64x64.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from gsworkbench.bench.registry import Case, Prepared, register_suite

NUMS = (10_000, 100_000)
SIZES = ((245, 136), (400, 400), (800, 800))


class TrainStep:
    """A callable running one training step of a trainer; ``extras()`` gives its stage medians over
    the steps run so far (the runner calls it after the timing)."""

    def __init__(self, trainer: Any) -> None:
        from gsworkbench.bench.memory import peak_rss_increase_mib

        self.trainer = trainer
        # the first step's working memory (MiB above the RSS with scene and splats built); NaN off Linux
        self.peak_rss_mib = peak_rss_increase_mib(trainer.step)

    def __call__(self) -> None:
        self.trainer.step()

    def extras(self) -> dict[str, float]:
        from gsworkbench.train.timers import STAGES

        rows = pd.DataFrame(self.trainer.rows[min(3, len(self.trainer.rows) - 1) :])
        out = {f"ms_{s}": float(rows[f"t_{s}"].median() * 1e3) for s in STAGES}
        out["gaussians"] = len(self.trainer.model)
        out["first_step_peak_rss_mib"] = self.peak_rss_mib
        return out


def bench_splats(scene: Any, num: int, sh_degree: int = 3, seed: int = 0) -> Any:
    """``num`` splats on the scene's surfaces: its point cloud drawn with replacement, jittered by 1% of
    the scene scale, initialised as the trainer would (gsworkbench.train.init.init_splats), so that
    their screen footprints resemble a trained scene's rather than a random cloud's."""
    import torch

    from gsworkbench.train.init import init_splats

    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(scene.points), (num,), generator=gen)
    pts = scene.points[idx] + 0.01 * scene.scene_scale * torch.randn(num, 3, generator=gen)
    rgb = scene.point_colors[idx] if scene.point_colors is not None else None
    return init_splats(pts, rgb, num=None, random_num=num, extent=scene.scene_scale, opacity=0.5, scale=1.0,
                       sh_degree=sh_degree, gen=gen)  # fmt: skip


def step_setup(backend: str, num: int, width: int, height: int, seed: int = 0) -> Callable[[], Prepared]:
    def setup() -> Prepared:
        from gsworkbench.scenes import builtin_scene
        from gsworkbench.train import Trainer, preset

        scene = builtin_scene("object", width=width, height=height, n_train=4, n_test=1)
        cfg = preset("micro", backend=backend, refine_start=10**9, max_gaussians=None, progress=False,
                     iterations=10**6, sh_degree_interval=1)  # fmt: skip  # densification off: a fixed count
        step = TrainStep(Trainer(scene, cfg, bench_splats(scene, num, seed=seed)))
        return Prepared(step, step.extras)

    return setup


def _skip(backend: str, num: int, size: tuple[int, int]) -> str | None:
    if backend == "torch" and (num > 10_000 or size[0] * size[1] > 400 * 400):
        return "torch reference: too slow for this size (sub-sampled grid)"
    return None


def cases(quick: bool) -> list[Case]:
    nums, sizes = ((2_000,), ((64, 64),)) if quick else (NUMS, SIZES)
    out = []
    for num in nums:
        for w, h in sizes:
            for backend in ("ext", "torch"):
                params = {"backend": backend, "num": num, "width": w, "height": h}
                out.append(
                    Case(
                        f"train/{backend}/n{num}/{w}x{h}",
                        params,
                        step_setup(backend, num, w, h),
                        _skip(backend, num, (w, h)),
                    )  # fmt: skip
                )
    return out


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Adds ms per step, steps per second, and ext's speed-up over torch measured in the same run."""
    df = df.copy()
    if "median_s" not in df:
        return df
    df["ms_per_step"] = df["median_s"] * 1e3
    df["steps_per_s"] = 1.0 / df["median_s"]
    ref = df[df["backend"] == "torch"].set_index(["num", "width", "height"])["median_s"]
    df["x_torch"] = [
        ref.get((r.num, r.width, r.height), float("nan")) / r.median_s if r.backend == "ext" else float("nan")
        for r in df.itertuples()
    ]
    return df


register_suite("train", __doc__.split("\n\n")[0], summarize)(cases)
