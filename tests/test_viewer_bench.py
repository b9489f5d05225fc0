"""The ``viewer`` benchmark suite: its cases, and what they compute from a fake browser and a fake
clock (no real clock or browser decides anything here; the browser tests are test_viewer_browser.py)."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gsworkbench.bench.registry import get_suite
from gsworkbench.bench.runner import run_cases
from gsworkbench.core.splats import synthetic_splats
from gsworkbench.splat import look_at
from gsworkbench.studies.suites import viewer as suite
from gsworkbench.viewer.data import bundle_built
from gsworkbench.viewer.measure import alternating_slices, page_frame_intervals


def test_the_cases_cover_the_issue_targets() -> None:
    from gsworkbench.train import train

    cases = get_suite("viewer").cases(False)
    by_measure: dict[str, list] = {}
    for case in cases:
        by_measure.setdefault(case.params["measure"], []).append(case)
        assert case.measured and case.name.startswith(f"viewer/{case.params['measure']}/")
    assert sorted(c.params["num"] for c in by_measure["fps"]) == [100_000, 1_000_000]
    assert {(c.params["sh_degree"], c.params["encoding"]) for c in by_measure["wire"]} == {
        (d, e) for d in (0, 3) for e in ("ply", "spz", "splat")
    }
    assert sorted(c.params["format"] for c in by_measure["files"]) == ["ply", "splat", "spz"]
    (idle,) = by_measure["idle"]
    assert idle.params["num"] == 1_000_000 and idle.params["seconds"] >= 10
    (live,) = by_measure["live"]
    assert live.params["watch_every"] == inspect.signature(train).parameters["watch_every"].default
    assert live.params["pairs"] >= 5
    assert len({c.name for c in cases}) == len(cases)
    quick = get_suite("viewer").cases(True)
    assert [c.name.split("/")[1] for c in quick] == [c.name.split("/")[1] for c in cases]
    assert max(c.params.get("num", 0) for c in quick) < 100_000


def test_without_chromium_only_the_browser_cases_skip_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import gsworkbench.viewer.headless as headless

    monkeypatch.setattr(headless, "find_chromium", lambda: None)
    cases = get_suite("viewer").cases(True)
    skipped = [c for c in cases if c.skip]
    assert {c.params["measure"] for c in skipped} == {"fps", "idle"}
    for case in skipped:
        assert "Chromium" in case.skip and "\n" not in case.skip
    table = run_cases(skipped, threads=1, progress=False)
    assert list(table["skipped"]) == [skipped[0].skip] * len(skipped)


class FakeBrowser:
    """Stands in for HeadlessChromium: answers the viewer page's calls with planned frame intervals."""

    calls: list[str] = []
    intervals_ms: list[float] = []

    def __init__(self, width: int, height: int, timeout_s: float) -> None:
        self.size = (width, height)
        assert timeout_s >= 600  # a slow frame must not end the measurement

    def __enter__(self) -> FakeBrowser:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def open(self, path: Path) -> None:
        assert Path(path).is_file()
        FakeBrowser.calls.append(f"open {self.size[0]}x{self.size[1]}")

    def evaluate(self, expression: str) -> object:
        FakeBrowser.calls.append(expression)
        return list(self.intervals_ms) if "frameIntervals" in expression else None


def test_frame_intervals_come_from_the_pages_counter(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html></html>")
    FakeBrowser.calls, FakeBrowser.intervals_ms = [], [20.0, 40.0, 25.0, 50.0]
    seconds = page_frame_intervals(page, 320, 240, 4, settle_frames=7, browser=FakeBrowser)
    assert seconds == [0.02, 0.04, 0.025, 0.05]
    assert FakeBrowser.calls == ["open 320x240", "window.gswReady.then((v) => v.settle(7))",
                                 "gswViewer.frameIntervals(4)"]  # fmt: skip
    with pytest.raises(RuntimeError, match="not 5 frame intervals"):
        page_frame_intervals(page, 320, 240, 5, browser=FakeBrowser)
    FakeBrowser.intervals_ms = [20.0, 0.0, 25.0, 50.0]
    with pytest.raises(RuntimeError, match="not positive"):
        page_frame_intervals(page, 320, 240, 4, browser=FakeBrowser)


class IdleBrowser(FakeBrowser):
    """A FakeBrowser with a process id, whose viewer reports its count of frames drawn."""

    pid = 4242
    frames: list[int] = []

    def evaluate(self, expression: str) -> object:
        FakeBrowser.calls.append(expression)
        return IdleBrowser.frames.pop(0) if expression == "gswViewer.framesDrawn" else None


def test_idle_cpu_share_from_the_browsers_process_times(tmp_path: Path) -> None:
    from fake_clock import FakeClock

    from gsworkbench.viewer.measure import page_idle_cpu

    page = tmp_path / "page.html"
    page.write_text("<html></html>")
    clock, cpu = FakeClock(jitter=0.0), iter([3.0, 3.25])  # 0.25 CPU seconds over 10 s: 2.5% of a core
    FakeBrowser.calls, IdleBrowser.frames = [], [40, 41]
    row = page_idle_cpu(page, 96, 64, 10.0, settle_frames=4, browser=IdleBrowser, clock=clock, sleep=clock.work,
                        cpu_seconds=lambda pid: next(cpu) if pid == 4242 else -1.0)  # fmt: skip
    assert row == {"idle_cpu_pct": pytest.approx(2.5), "idle_s": pytest.approx(10.0), "idle_frames": 1.0}
    assert FakeBrowser.calls[:3] == ["open 96x64", "window.gswReady.then((v) => v.settle(4))", "gswViewer.finish()"]
    assert clock.now == pytest.approx(3.0 + 10.0)  # the quiet time, then the window
    with pytest.raises(ValueError, match="seconds must be > 0"):
        page_idle_cpu(page, 96, 64, 0.0, browser=IdleBrowser)


def test_process_tree_cpu_seconds_sums_the_descendants(tmp_path: Path) -> None:
    """A made-up /proc: the browser (10), its GPU process (11, a child), a renderer (12, a grandchild)
    and an unrelated process (13); times in clock ticks, a command name with spaces and parentheses."""
    import os

    from gsworkbench.viewer.measure import process_tree_cpu_seconds

    tick = os.sysconf("SC_CLK_TCK")
    for pid, ppid, utime, stime, name in ((10, 1, 100, 20, "chromium"), (11, 10, 300, 50, "chromium (gpu)"),
                                         (12, 11, 7, 3, "render) x"), (13, 1, 999, 999, "other")):  # fmt: skip
        (tmp_path / str(pid)).mkdir()
        rest = ["S", str(ppid)] + ["0"] * 9 + [str(utime), str(stime)] + ["0"] * 5
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({name}) " + " ".join(rest))
    (tmp_path / "self").mkdir()  # not a process id: passed over
    assert process_tree_cpu_seconds(10, proc=tmp_path) == pytest.approx((120 + 350 + 10) / tick)
    assert process_tree_cpu_seconds(11, proc=tmp_path) == pytest.approx(360 / tick)


def test_frame_row_statistics() -> None:
    row = suite.frame_row([0.02, 0.04, 0.025, 0.05, 0.1])
    assert row["median_s"] == pytest.approx(0.04) and row["fps"] == pytest.approx(25.0)
    assert row["fps_iqr"] == pytest.approx(1 / 0.025 - 1 / 0.05)
    assert row["runs"] == 5 and row["samples_s"] == [0.02, 0.04, 0.025, 0.05, 0.1]
    assert math.isnan(suite.frame_row([0.02])["fps_iqr"])


def _tiny_scene() -> SimpleNamespace:
    K = torch.tensor([[[60.0, 0.0, 32.0], [0.0, 60.0, 32.0], [0.0, 0.0, 1.0]]])
    return SimpleNamespace(train_ids=torch.tensor([0]), Ks=K, height=64, viewmats=look_at((0, -3, 1), (0, 0, 0))[None])


@pytest.mark.skipif(not bundle_built(), reason="viewer bundle not built (make setup needs Node.js)")
def test_the_fps_case_reports_the_browsers_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    import gsworkbench.studies.scene_splats as scene_splats

    monkeypatch.setattr(suite, "stand_in_splats", lambda num, deg, quick: synthetic_splats(num, deg, seed=0))
    monkeypatch.setattr(scene_splats, "object_scene", lambda w, h: _tiny_scene())
    FakeBrowser.calls, FakeBrowser.intervals_ms = [], [100.0, 125.0, 80.0]
    params = {"measure": "fps", "num": 50, "sh_degree": 3, "width": 96, "height": 64, "frames": 3, "encoding": "spz"}
    prep = suite.fps_setup(params, True, browser=FakeBrowser)()
    assert prep.fn() is True
    row = prep.extra_columns()
    assert row["fps"] == pytest.approx(10.0) and row["runs"] == 3
    assert FakeBrowser.calls[0] == "open 96x64" and FakeBrowser.calls[-1] == "gswViewer.frameIntervals(3)"


def test_the_wire_case_counts_the_widgets_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 300
    monkeypatch.setattr(suite, "stand_in_splats", lambda num, deg, quick: synthetic_splats(num, deg, seed=0))
    rows = {}
    for deg, encoding in ((3, "ply"), (0, "ply"), (3, "spz"), (0, "splat")):
        params = {"measure": "wire", "num": n, "sh_degree": deg, "encoding": encoding}
        prep = suite.wire_setup(params, True)()
        assert prep.fn() is True
        rows[deg, encoding] = prep.extra_columns()
    # Inria PLY: 62 float32 a splat at SH degree 3 (position, normal, 48 colour, opacity, 3 scales, 4 quat),
    # 17 at degree 0, and a header of a few hundred bytes; .splat: 32 bytes a splat, nothing else
    header = rows[3, "ply"]["binary_bytes"] - 62 * 4 * n
    assert 0 < header < 2000 and rows[3, "ply"]["x_ply"] == 1.0
    assert 0 < rows[0, "ply"]["binary_bytes"] - 17 * 4 * n < 2000
    assert rows[0, "splat"]["binary_bytes"] == 32 * n and rows[0, "splat"]["bytes_per_splat"] == 32.0
    assert rows[3, "spz"]["x_ply"] < 0.4
    assert all(0 < r["state_bytes"] < 10_000 for r in rows.values())
    if bundle_built():  # the browser bundle travels once, in the widget's state
        assert all(r["module_bytes"] > suite_bundle_bytes() for r in rows.values())


def suite_bundle_bytes() -> int:
    from gsworkbench.viewer.data import BUNDLE

    return BUNDLE.stat().st_size


def test_file_sizes_of_each_format(tmp_path: Path) -> None:
    sizes = suite.file_sizes(synthetic_splats(200, 3, seed=0), tmp_path)
    assert set(sizes) == {"ply", "spz", "splat"}
    assert sizes["splat"] == 32 * 200 and sizes["spz"] < sizes["ply"]
    assert {p.name for p in tmp_path.iterdir()} == {"splats.ply", "splats.spz", "splats.splat"}


class FakeClock:
    """Seconds that only the work below advances."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_alternating_slices_and_the_live_cost() -> None:
    clock, order = FakeClock(), []

    def without() -> None:
        order.append("A")
        clock.now += 1.0 + 0.1 * len(order)  # the run slows down as it goes on (more Gaussians)

    def with_viewer() -> None:
        order.append("B")
        clock.now += 1.05 * (1.0 + 0.1 * len(order)) + 0.02

    a, b = alternating_slices(without, with_viewer, 5, clock)
    assert "".join(order) == "ABABABABAB"
    assert a == pytest.approx([1.1, 1.3, 1.5, 1.7, 1.9]) and b == pytest.approx([1.28, 1.49, 1.70, 1.91, 2.12])
    row = suite.live_row(a, b, 100, [0.02] * 5)
    assert row["pairs"] == 5 and row["watch_ms"] == pytest.approx(20.0)
    assert row["steps_per_s_without"] == pytest.approx(100 / 1.5)
    assert row["steps_per_s_with"] == pytest.approx(100 / 1.7)
    assert row["cost_pct"] == pytest.approx(100 * (1 - 1.5 / 1.7))
    # each pair's own cost, 1 - a/b: from 14.1 % (first pair) down to 10.4 % (last)
    assert row["cost_pct_pairs_median"] == pytest.approx(100 * (1 - 1.5 / 1.7))
    assert row["cost_pct_pairs_iqr"] == pytest.approx(100 * ((1 - 1.3 / 1.49) - (1 - 1.7 / 1.91)))
    with pytest.raises(ValueError, match="as many slices"):
        suite.live_row(a, b[:-1], 100, [])
    with pytest.raises(ValueError, match="pairs must be an int"):
        alternating_slices(without, with_viewer, 0, clock)


def test_the_summary_keeps_counts_as_integers() -> None:
    import pandas as pd

    table = get_suite("viewer").summarize(pd.DataFrame({"num": [2000.0, math.nan], "bytes": [math.nan, 1234.0],
                                                        "fps": [6.5, math.nan]}))  # fmt: skip
    assert str(table["num"].dtype) == "Int64" and str(table["bytes"].dtype) == "Int64"
    assert table["num"].tolist()[0] == 2000 and table["bytes"].tolist()[1] == 1234
    assert table["fps"].tolist()[0] == 6.5
