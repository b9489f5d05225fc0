"""``viewer``: the splat viewer's frame rate in headless Chromium, bytes on the wire and on disk, live-training cost.

Cases (each measures itself: the runner times nothing, the row is the case's own report):

- ``viewer/fps/n<N>/<W>x<H>``: the standalone page (``save_viewer_html``, ``.spz`` inside) of N splats
  in a W x H headless Chromium window, WebGL on SwiftShader (the CPU). After the data loaded and
  :data:`SETTLE_FRAMES` frames, the viewer's own frame counter (``frameIntervals``: the time stamps
  of consecutive animation frames) gives ``frames`` intervals (:data:`FRAMES`): ``median_s`` and ``iqr_s`` (seconds per
  frame, ``samples_s`` every one), ``fps`` (1 / the median) and ``fps_iqr``. The camera stands still.
  A floor: SwiftShader on a few cores is far slower than a laptop's GPU; headless Chromium draws at most
  60 frames a second. Skipped, with a one-line reason, without Chromium or the browser bundle.
- ``viewer/idle/n<N>/<W>x<H>``: the same page left alone after it settled: the browser's CPU time (all
  its processes, SwiftShader's WebGL included) over :data:`IDLE_SECONDS` of wall time, as
  ``idle_cpu_pct`` (percent of one core), with ``idle_frames``, the frames the viewer drew meanwhile
  (it draws only when something changes: 0 expected).
- ``viewer/wire/sh<D>/<encoding>``: the bytes a :class:`~gsworkbench.viewer.SplatViewer` sends to the
  browser for N splats of SH degree D: ``binary_bytes`` (the splats' buffer, sent again at each
  update), ``module_bytes`` (the browser bundle, once per widget shown), ``state_bytes`` (the rest of
  its state, JSON), ``bytes_per_splat`` (binary / N) and ``x_ply`` (binary over the PLY's).
- ``viewer/files/<preset>/<format>``: a scene trained with a preset (its own run, once per suite run:
  the object scene, ``short``: 5,000 steps up to 60k Gaussians) written as PLY, ``.spz`` and
  ``.splat``: ``bytes``, ``bytes_per_splat`` and ``x_ply``.
- ``viewer/live/<preset>/every<K>``: one training run of the preset, in slices of K steps (the
  default ``watch_every`` of :func:`gsworkbench.train.train`), alternately without and with a
  :class:`~gsworkbench.viewer.LiveViewer` called at the end of the slice as ``train(watch=...)`` calls
  it (A B A B ..., after one untimed slice of each: the viewer's first call builds the widget).
  ``steps_per_s`` without and with (median, IQR), ``cost_pct`` (100 (1 - with / without), medians)
  with the median and IQR of the pairs' own costs, and ``watch_ms`` (median per viewer call). No
  browser is attached: the cost is the training process's (encoding the splats, the widget's state).

The splats of the fps and wire cases are the ``dense`` stand-in for a trained object
(:mod:`gsworkbench.studies.scene_splats`), SH degree 3 unless the case says otherwise. quick=True: 2,000
and 20,000 splats at 320x240 over 10 frames, 2,000 on the wire, the ``smoke`` preset (slices of 10
steps, 3 pairs).
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.bench.registry import Case, Prepared, register_suite

SETTLE_FRAMES = 10
# frames timed per case, by splat count: fewer where a frame takes seconds (SwiftShader, 1M splats)
FRAMES = {100_000: 60, 1_000_000: 20}
QUICK_FRAMES = 10
IDLE_SECONDS, QUICK_IDLE_SECONDS = 10.0, 2.0  # the idle window: long against the browser's timers
WATCH_EVERY = 100  # train()'s default watch_every
FILE_FORMATS = ("ply", "spz", "splat")


def browser_missing() -> str | None:
    """Why the frame-rate cases cannot run here (one line), or None."""
    from gsworkbench.viewer.data import bundle_built
    from gsworkbench.viewer.headless import find_chromium

    if find_chromium() is None:
        return "no Chromium (Debian: apt-get install chromium, or set GSW_CHROMIUM)"
    if not bundle_built():
        return "the viewer's browser bundle is not built (make setup with Node.js)"
    return None


@functools.lru_cache(maxsize=2)
def stand_in_splats(num: int, sh_degree: int, quick: bool) -> Any:
    """``num`` dense splats (a trained object's stand-in) on the object scene (cached per suite run)."""
    from gsworkbench.studies.scene_splats import dense_splats, object_scene

    return dense_splats(object_scene(*_scene_size(quick)), num, sh_degree)


def _scene_size(quick: bool) -> tuple[int, int]:
    return (64, 64) if quick else (800, 800)  # the render suite's scene size: its cache is shared


def frame_row(intervals_s: list[float]) -> dict[str, Any]:
    """The columns of a frame-rate case from its frame intervals (seconds): the runner's statistics
    (``median_s``, ``iqr_s``, ``runs``, ``samples_s``), ``fps`` = 1 / the median interval and
    ``fps_iqr`` = 1 / the first quartile - 1 / the third."""
    from gsworkbench.bench.runner import timing_stats

    row = timing_stats(intervals_s)
    q1, q3 = np.percentile(intervals_s, [25, 75])
    row.update(fps=1.0 / row["median_s"], fps_iqr=1.0 / q1 - 1.0 / q3 if len(intervals_s) > 1 else math.nan)
    return row


def _page_setup(
    params: dict[str, Any], quick: bool, browser: Callable[..., Any] | None,
    measure: Callable[[Any, Any, Any, dict[str, Any]], dict[str, Any]],
):  # noqa: ANN202
    """A browser case's setup: the stand-in splats and the object scene's view at the case's size, then
    ``measure(splats, viewmat [4,4], K [3,3], options)`` (``options``: the browser, when one is given)
    gives the row's columns."""

    def setup() -> Prepared:
        from gsworkbench.studies.scene_splats import object_scene, view_camera

        splats = stand_in_splats(params["num"], params["sh_degree"], quick)
        viewmat, Ks = view_camera(object_scene(*_scene_size(quick)), params["width"], params["height"])
        extras: dict[str, Any] = {}
        options = {} if browser is None else {"browser": browser}

        def run() -> bool:
            extras.update(measure(splats, viewmat[0], Ks[0], options))
            return True

        return Prepared(run, lambda: extras)

    return setup


def fps_setup(params: dict[str, Any], quick: bool, browser: Callable[..., Any] | None = None):  # noqa: ANN201
    """A frame-rate case's setup; ``browser(width, height, timeout_s=...)``: the browser (default
    headless Chromium)."""

    def measure(splats: Any, viewmat: Any, K: Any, options: dict[str, Any]) -> dict[str, Any]:
        from gsworkbench.viewer.measure import splats_frame_intervals

        intervals = splats_frame_intervals(splats, viewmat, K, params["width"], params["height"], params["frames"],
                                           encoding=params["encoding"], settle_frames=SETTLE_FRAMES,
                                           **options)  # fmt: skip
        return frame_row(intervals)

    return _page_setup(params, quick, browser, measure)


def idle_setup(params: dict[str, Any], quick: bool, browser: Callable[..., Any] | None = None):  # noqa: ANN201
    """An idle case's setup; ``browser(width, height, timeout_s=...)``: the browser (default headless
    Chromium)."""

    def measure(splats: Any, viewmat: Any, K: Any, options: dict[str, Any]) -> dict[str, Any]:
        from gsworkbench.viewer.measure import page_idle_cpu
        from gsworkbench.viewer.page import save_viewer_html

        w, h = params["width"], params["height"]
        with tempfile.TemporaryDirectory(prefix="gsw-viewer-idle-") as tmp:
            page = save_viewer_html(Path(tmp) / "page.html", splats, viewmat=viewmat, K=K, width=w, height=h,
                                    encoding=params["encoding"])  # fmt: skip
            return page_idle_cpu(page, w, h, params["seconds"], settle_frames=SETTLE_FRAMES, **options)

    return _page_setup(params, quick, browser, measure)


def wire_setup(params: dict[str, Any], quick: bool):  # noqa: ANN201
    def setup() -> Prepared:
        from gsworkbench.viewer import SplatViewer
        from gsworkbench.viewer.data import encode_splats
        from gsworkbench.viewer.measure import widget_payload

        splats = stand_in_splats(params["num"], params["sh_degree"], quick)
        extras: dict[str, Any] = {}

        def run() -> bool:
            payload = widget_payload(SplatViewer(splats, encoding=params["encoding"]))
            ply = len(encode_splats(splats, "ply"))
            extras.update(payload, bytes_per_splat=payload["binary_bytes"] / len(splats),
                          x_ply=payload["binary_bytes"] / ply)  # fmt: skip
            return True

        return Prepared(run, lambda: extras)

    return setup


@functools.lru_cache(maxsize=1)
def trained_splats(preset_name: str) -> Any:
    """The splats of a run of ``preset_name`` on its built-in scene (trained once per suite run)."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset, preset_scene, train

    scene = builtin_scene(**preset_scene(preset_name))
    return train(scene, preset(preset_name, progress=False)).splats


def file_sizes(splats: Any, folder: Path) -> dict[str, int]:
    """Bytes of ``splats`` written as each of :data:`FILE_FORMATS` into ``folder``, by format."""
    from gsworkbench.io.dotsplat import write_splat
    from gsworkbench.io.ply import write_ply
    from gsworkbench.io.spz import write_spz

    writers = {"ply": write_ply, "spz": write_spz, "splat": write_splat}
    return {fmt: writers[fmt](folder / f"splats.{fmt}", splats).stat().st_size for fmt in FILE_FORMATS}


def files_setup(params: dict[str, Any]):  # noqa: ANN201
    def setup() -> Prepared:
        extras: dict[str, Any] = {}

        def run() -> bool:
            splats = trained_splats(params["preset"])
            with tempfile.TemporaryDirectory(prefix="gsw-bench-viewer-") as tmp:
                sizes = file_sizes(splats, Path(tmp))
            size = sizes[params["format"]]
            extras.update(gaussians=len(splats), sh_degree=splats.sh_degree, bytes=size,
                          bytes_per_splat=size / len(splats), x_ply=size / sizes["ply"])  # fmt: skip
            return True

        return Prepared(run, lambda: extras)

    return setup


def _iqr(x: np.ndarray) -> float:
    """The interquartile range of ``x`` (NaN for one value: no spread to report)."""
    return float(np.subtract(*np.percentile(x, [75, 25]))) if len(x) > 1 else math.nan


def live_row(without_s: list[float], with_s: list[float], steps: int, watch_s: list[float]) -> dict[str, Any]:
    """The columns of the live-training case from the seconds of its slices of ``steps`` steps each,
    without and with the viewer (paired in call order), and the seconds of each viewer call."""
    a, b = np.asarray(without_s, dtype=float), np.asarray(with_s, dtype=float)
    if len(a) != len(b) or not len(a):
        raise ValueError(f"expected as many slices with as without the viewer, got {len(b)} and {len(a)}")
    rate_a, rate_b = steps / a, steps / b
    pair_cost = 100.0 * (1.0 - a / b)  # each pair's loss of steps per second, percent
    return {
        "pairs": len(a), "steps_per_slice": steps,
        "steps_per_s_without": float(np.median(rate_a)), "steps_per_s_without_iqr": _iqr(rate_a),
        "steps_per_s_with": float(np.median(rate_b)), "steps_per_s_with_iqr": _iqr(rate_b),
        "cost_pct": 100.0 * (1.0 - float(np.median(rate_b)) / float(np.median(rate_a))),
        "cost_pct_pairs_median": float(np.median(pair_cost)), "cost_pct_pairs_iqr": _iqr(pair_cost),
        "watch_ms": 1e3 * float(np.median(watch_s)) if len(watch_s) else math.nan,
        "samples_without_s": [float(x) for x in a], "samples_with_s": [float(x) for x in b],
    }  # fmt: skip


def live_setup(params: dict[str, Any], clock: Callable[[], float] | None = None):  # noqa: ANN201
    def setup() -> Prepared:
        import time

        from gsworkbench.core.limits import retained_freed_memory
        from gsworkbench.synthetic import builtin_scene
        from gsworkbench.train import Trainer, preset, preset_scene
        from gsworkbench.viewer import LiveViewer
        from gsworkbench.viewer.measure import alternating_slices

        tick = clock or time.perf_counter
        scene = builtin_scene(**preset_scene(params["preset"]))
        trainer = Trainer(scene, preset(params["preset"], progress=False))
        viewer = LiveViewer(scene, display=lambda widget: None, background=scene.background)
        every, extras = params["watch_every"], {}
        watch_s: list[float] = []

        def train_slice(watch: bool) -> None:
            for _ in range(every):
                trainer.step()
                if watch and trainer.step_index % every == 0:  # as train(watch=..., watch_every=every)
                    t0 = tick()
                    viewer(trainer)
                    watch_s.append(tick() - t0)

        def run() -> bool:
            with retained_freed_memory():  # the malloc policy of Trainer.run
                train_slice(False)
                train_slice(True)
                watch_s.clear()
                start = len(trainer.model)
                a, b = alternating_slices(lambda: train_slice(False), lambda: train_slice(True), params["pairs"], tick)
            extras.update(live_row(a, b, every, watch_s), gaussians_start=start, gaussians_end=len(trainer.model))
            return True

        return Prepared(run, lambda: extras)

    return setup


def cases(quick: bool) -> list[Case]:
    missing = browser_missing()
    out = []
    size, frames = ((320, 240), {2_000: QUICK_FRAMES, 20_000: QUICK_FRAMES}) if quick else ((960, 540), FRAMES)
    for num, count in frames.items():
        params = {"measure": "fps", "num": num, "sh_degree": 3, "width": size[0], "height": size[1],
                  "frames": count, "encoding": "spz"}  # fmt: skip
        out.append(Case(f"viewer/fps/n{num}/{size[0]}x{size[1]}", params, fps_setup(params, quick), missing,
                        measured=True))  # fmt: skip
    idle_num = max(frames)
    params = {"measure": "idle", "num": idle_num, "sh_degree": 3, "width": size[0], "height": size[1],
              "seconds": QUICK_IDLE_SECONDS if quick else IDLE_SECONDS, "encoding": "spz"}  # fmt: skip
    out.append(Case(f"viewer/idle/n{idle_num}/{size[0]}x{size[1]}", params, idle_setup(params, quick), missing,
                    measured=True))  # fmt: skip
    wire_num = 2_000 if quick else 100_000
    for deg in (0, 3):
        for encoding in ("ply", "spz", "splat"):
            params = {"measure": "wire", "num": wire_num, "sh_degree": deg, "encoding": encoding}
            out.append(Case(f"viewer/wire/sh{deg}/{encoding}", params, wire_setup(params, quick), measured=True))
    name = "smoke" if quick else "short"
    for fmt in FILE_FORMATS:
        params = {"measure": "files", "preset": name, "format": fmt}
        out.append(Case(f"viewer/files/{name}/{fmt}", params, files_setup(params), measured=True))
    every, pairs = (10, 3) if quick else (WATCH_EVERY, 8)
    params = {"measure": "live", "preset": name, "watch_every": every, "pairs": pairs}
    out.append(Case(f"viewer/live/{name}/every{every}", params, live_setup(params), measured=True))
    return out


INT_COLUMNS = (
    "num", "sh_degree", "width", "height", "frames", "binary_bytes", "module_bytes", "state_bytes", "gaussians",
    "bytes", "watch_every", "pairs", "steps_per_slice", "gaussians_start", "gaussians_end", "idle_frames",
)  # fmt: skip


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Counts as integer columns (empty where a case has none), not floats."""
    df = df.copy()
    for col in INT_COLUMNS:
        if col in df:
            df[col] = df[col].round().astype("Int64")
    return df


register_suite("viewer", __doc__.split("\n\n")[0], summarize)(cases)
