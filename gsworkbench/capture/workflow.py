"""``capture``: photos or a video to a splat scene you can orbit, in one call.

Three stages, each resumable: **reconstruct** (:func:`gsworkbench.sfm.reconstruct`: poses and sparse
points into ``OUT/scene``), **train** (the ``capture`` preset from the sparse points, held-out photos
every 8th, into ``OUT/training``), **export** (``OUT/splats.ply``, ``OUT/viewer.html`` at the first
held-out photo's view, and ``OUT/summary.html``: the poses report, the training curve, the held-out
photos beside their renders, and the minutes per stage). ``OUT/capture.json`` records the inputs and the
seconds of each finished stage. Ctrl-C keeps what each stage finished (COLMAP's database, the
training's checkpoint): the same call goes on from there.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.capture.summary import summary_html
from gsworkbench.core.atomic import atomic_write_bytes, atomic_write_text, write_json
from gsworkbench.scenes import load_scene
from gsworkbench.sfm import reconstruct
from gsworkbench.sfm.sfm_report import read_report
from gsworkbench.train import preset as train_preset
from gsworkbench.train import train
from gsworkbench.viewer.data import bundle_built, scene_up
from gsworkbench.viewer.page import save_viewer_html

STATE = "capture.json"
STAGES = ("reconstruct", "train", "export")


@dataclass(frozen=True)
class CaptureResult:
    """What :func:`capture` made: the folder and its files (``viewer`` is None where the browser bundle
    was not built), the held-out photos' mean metrics (``psnr_db``, ``ssim``...), the per-step
    history and the per-photo evaluation, and the seconds of each stage this folder has run."""

    folder: Path
    scene: Path
    splats: Path
    viewer: Path | None
    summary: Path
    metrics: dict[str, Any]
    history: pd.DataFrame
    evaluation: pd.DataFrame
    seconds: dict[str, float]


class _State:
    """``capture.json``: the inputs and the seconds of each finished stage; other inputs into the same
    folder are refused, as :func:`~gsworkbench.sfm.reconstruct` does."""

    def __init__(self, out: Path, inputs: dict[str, Any]) -> None:
        self.path = out / STATE
        self.data: dict[str, Any] = {"inputs": inputs, "seconds": {}}
        if self.path.is_file():
            old = json.loads(self.path.read_text())
            if old.get("inputs") != inputs:
                before = old.get("inputs", {})
                diff = sorted(k for k in set(inputs) | set(before) if before.get(k) != inputs.get(k))
                raise ValueError(f"{out} holds a capture of other input or options ({', '.join(diff)} differ); "
                                 "choose another --out or pass overwrite=True (--overwrite)")  # fmt: skip
            self.data["seconds"] = old.get("seconds", {})

    def done(self, stage: str) -> bool:
        return stage in self.data["seconds"]

    def finish(self, stage: str, seconds: float) -> None:
        self.data["seconds"][stage] = round(seconds, 2)
        write_json(self.path, self.data)


def capture(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    preset: str = "capture",
    iterations: int | None = None,
    seed: int = 0,
    overwrite: bool = False,
    progress: bool = True,
    log: Callable[[str], object] | None = print,
    **reconstruct_options: Any,
) -> CaptureResult:
    """Photos (a folder) or a video to a trained splat scene in ``out`` (see the module docstring).

    ``preset``: the training preset (``capture``; ``short`` or ``smoke`` for a quick look), with
    ``iterations`` steps when given; ``seed`` for the mapper and the training; ``reconstruct_options``:
    :class:`~gsworkbench.sfm.ReconstructOptions` fields. ``log`` receives one line per stage and the
    poses report (None: silent). Errors are those of the stages, each naming its file: FileNotFoundError
    or ValueError for bad input, :class:`~gsworkbench.sfm.ReconstructionFailed`, and a KeyboardInterrupt
    after Ctrl-C that says how to go on."""
    from tqdm.auto import tqdm

    src, out = Path(source).resolve(), Path(out).resolve()
    if not src.exists():  # before any folder or progress bar is made
        raise FileNotFoundError(f"photos not found: {src} (give a folder of images or a video file)")
    if overwrite and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    inputs = {"source": str(src), "preset": preset, "iterations": iterations, "seed": seed,
              "reconstruct": dict(sorted(reconstruct_options.items()))}  # fmt: skip
    state = _State(out, inputs)
    say = log or (lambda _s: None)
    scene_dir, run_dir = out / "scene", out / "training"

    with tqdm(total=len(STAGES), desc="capture", unit="stage", disable=not progress, leave=True) as stages:
        # 1. photos to poses (reconstruct keeps its own finished stages)
        t = time.perf_counter()
        reconstruct(src, scene_dir, progress=progress, log=log, seed=seed, **reconstruct_options)
        if not state.done("reconstruct"):
            state.finish("reconstruct", time.perf_counter() - t)
        stages.update(1)
        # 2. poses to splats (a finished run is read back; an interrupted one resumes from its checkpoint)
        data = load_scene(scene_dir)
        if not state.done("train"):
            t = time.perf_counter()
            config = train_preset(preset, seed=seed, progress=progress,
                                  **({"iterations": iterations} if iterations else {}))  # fmt: skip
            resume = run_dir if (run_dir / "checkpoint.pt").is_file() else None
            say(f"training {preset} on {len(data.train_ids)} photos, {len(data.test_ids)} held out"
                + (f" (resuming {run_dir})" if resume else ""))  # fmt: skip
            train(data, config, results_dir=run_dir, resume=resume,
                  resume_hint="run the same capture command again to go on from {run_dir}")  # fmt: skip
            state.finish("train", time.perf_counter() - t)
        stages.update(1)
        # 3. the files a user opens (once: a later call reads them back)
        splats, viewer, summary = out / "splats.ply", out / "viewer.html", out / "summary.html"
        history = pd.read_csv(run_dir / "history.csv")
        evaluation = pd.read_csv(run_dir / "evaluation.csv")
        metrics = json.loads((run_dir / "metrics.json").read_text())
        if not state.done("export"):
            t = time.perf_counter()
            atomic_write_bytes(splats, (run_dir / "splats.ply").read_bytes())
            if bundle_built():
                i = int(data.test_ids[0]) if len(data.test_ids) else 0
                save_viewer_html(viewer, splats, viewmat=data.viewmats[i], K=data.Ks[i], width=data.width,
                                 height=data.height, background=data.background, up=scene_up(data))  # fmt: skip
            state.finish("export", time.perf_counter() - t)
            summary.unlink(missing_ok=True)  # written below, with the export's seconds
        viewer = viewer if viewer.is_file() else None
        if not summary.is_file():
            page = summary_html(read_report(scene_dir), history, evaluation, metrics,
                                sorted(run_dir.glob("test_*.png")), state.data["seconds"], viewer)  # fmt: skip
            atomic_write_text(summary, page)
        stages.update(1)
    minutes = ", ".join(f"{k} {v / 60:.1f}" for k, v in state.data["seconds"].items())
    say(f"capture: {out}  (held-out PSNR {metrics.get('psnr_db', float('nan')):.2f} dB; minutes: {minutes})")
    return CaptureResult(out, scene_dir, splats, viewer, summary, metrics, history, evaluation,
                         dict(state.data["seconds"]))  # fmt: skip
