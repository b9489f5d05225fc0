"""What the ``viewer`` benchmark suite measures, apart from the suite's bookkeeping: the page's frame
intervals in a (headless) browser, the bytes the widget sends, and steps timed with and without a
watcher in alternating slices. Browsers and clocks are arguments, so tests can pass fakes.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gsworkbench.core.splats import SplatSet
from gsworkbench.viewer.headless import HeadlessChromium
from gsworkbench.viewer.page import save_viewer_html

# (width, height, timeout_s=seconds) -> a context manager with open(path) and evaluate(expression)
BrowserFactory = Callable[..., Any]


def page_frame_intervals(
    page: str | os.PathLike[str],
    width: int,
    height: int,
    frames: int,
    *,
    settle_frames: int = 10,
    browser: BrowserFactory = HeadlessChromium,
    timeout_s: float = 3600.0,
) -> list[float]:
    """Seconds between ``frames`` + 1 consecutive frames of a viewer page (``save_viewer_html``) in a
    ``width`` x ``height`` window, read from the viewer's own frame counter (``frameIntervals``) after
    the data loaded and ``settle_frames`` frames were drawn. ``browser(width, height, timeout_s=...)``:
    the browser (default headless Chromium, WebGL on SwiftShader); ``timeout_s`` bounds each of its
    steps (loading, settling, the frames: a million splats on SwiftShader draw a frame in seconds)."""
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ValueError(f"frames must be an int >= 1, got {frames!r}")
    with browser(width, height, timeout_s=timeout_s) as b:
        b.open(page)
        b.evaluate(f"window.gswReady.then((v) => v.settle({int(settle_frames)}))")
        intervals_ms = b.evaluate(f"gswViewer.frameIntervals({frames})")
    if not isinstance(intervals_ms, list) or len(intervals_ms) != frames:
        raise RuntimeError(f"the viewer page {page} reported {intervals_ms!r}, not {frames} frame intervals")
    seconds = [float(v) / 1e3 for v in intervals_ms]
    if not all(math.isfinite(s) and s > 0 for s in seconds):
        raise RuntimeError(f"the viewer page {page} reported frame intervals that are not positive: {intervals_ms}")
    return seconds


def splats_frame_intervals(
    splats: SplatSet,
    viewmat: Any,
    K: Any,
    width: int,
    height: int,
    frames: int,
    *,
    encoding: str = "spz",
    settle_frames: int = 10,
    browser: BrowserFactory = HeadlessChromium,
) -> list[float]:
    """:func:`page_frame_intervals` of a standalone page of ``splats`` at the camera ``viewmat`` [4,4],
    ``K`` [3,3] (pixels) for a ``width`` x ``height`` window, written to a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="gsw-viewer-fps-") as tmp:
        page = save_viewer_html(Path(tmp) / "page.html", splats, viewmat=viewmat, K=K, width=width, height=height,
                                encoding=encoding)  # fmt: skip
        return page_frame_intervals(page, width, height, frames, settle_frames=settle_frames, browser=browser)


def process_tree_cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` and every descendant still alive, from
    ``/proc/<pid>/stat`` (Linux). Processes that end while it reads are skipped."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(times.get(p, 0.0) for p in tree)


def page_idle_cpu(
    page: str | os.PathLike[str],
    width: int,
    height: int,
    seconds: float,
    *,
    settle_frames: int = 10,
    quiet_s: float = 3.0,
    browser: BrowserFactory = HeadlessChromium,
    cpu_seconds: Callable[[int], float] = process_tree_cpu_seconds,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    timeout_s: float = 600.0,
) -> dict[str, float]:
    """What a viewer page costs with nothing moving: after the data loaded, ``settle_frames`` frames
    were drawn, the GPU finished them (``finish``: a software GPU lags the page by seconds) and
    ``quiet_s`` more seconds passed (the sort worker's last pass), the browser's CPU seconds (all its
    processes: the page, the GPU process doing SwiftShader's WebGL) over ``seconds`` of wall time.
    Returns ``idle_cpu_pct`` (percent of one core), ``idle_s`` (the wall seconds measured) and
    ``idle_frames`` (frames the viewer drew meanwhile).
    ``browser`` needs ``pid`` besides ``open`` and ``evaluate``; the clocks are arguments for tests."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds!r}")
    with browser(width, height, timeout_s=timeout_s) as b:
        b.open(page)
        b.evaluate(f"window.gswReady.then((v) => v.settle({int(settle_frames)}))")
        b.evaluate("gswViewer.finish()")
        sleep(quiet_s)
        frames0, cpu0, t0 = b.evaluate("gswViewer.framesDrawn"), cpu_seconds(b.pid), clock()
        sleep(seconds)
        frames1, cpu1, t1 = b.evaluate("gswViewer.framesDrawn"), cpu_seconds(b.pid), clock()
    wall = t1 - t0
    if not wall > 0:
        raise RuntimeError(f"the clock did not advance over the idle window ({t0} -> {t1})")
    return {"idle_cpu_pct": 100.0 * (cpu1 - cpu0) / wall, "idle_s": wall, "idle_frames": float(frames1 - frames0)}


MODULE_KEYS = ("_esm", "_css")  # anywidget's front-end code and style: part of the state, sent at display


def widget_payload(widget: Any) -> dict[str, int]:
    """What a widget sends to the browser when it is shown, as ipywidgets splits its state: its binary
    buffers (``binary_bytes``: the splats, sent again at each update), its front-end module
    (``module_bytes``: anywidget's ``_esm`` and ``_css`` text, the browser bundle) and the rest of its
    state as JSON text (``state_bytes``: cameras, views, options)."""
    from ipywidgets.widgets.widget import _remove_buffers

    state, _, buffers = _remove_buffers(widget.get_state())
    module = {k: state.pop(k) for k in MODULE_KEYS if k in state}
    return {"binary_bytes": sum(memoryview(b).nbytes for b in buffers),
            "module_bytes": len(json.dumps(module).encode("utf-8")) if module else 0,
            "state_bytes": len(json.dumps(state).encode("utf-8"))}  # fmt: skip


def alternating_slices(
    without: Callable[[], object],
    with_: Callable[[], object],
    pairs: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[float], list[float]]:
    """Seconds of ``pairs`` calls of each of ``without()`` and ``with_()``, timed alternately (A B A B
    ...): a drift in the machine's speed, or in the work as a run goes on, hits both alike. Returns the
    two lists of seconds, in call order. ``clock``: seconds (tests pass a fake one)."""
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise ValueError(f"pairs must be an int >= 1, got {pairs!r}")
    a: list[float] = []
    b: list[float] = []
    for _ in range(pairs):
        for fn, out in ((without, a), (with_, b)):
            t0 = clock()
            fn()
            out.append(clock() - t0)
    return a, b
