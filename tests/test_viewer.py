"""The viewer widget without a browser: construction from each input kind, the data sent as one binary
buffer, the camera round trip (Python -> widget state -> Python), the standalone page's contents.
The browser side is tests/test_viewer_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from ipywidgets.widgets.widget import _remove_buffers

from gsworkbench.core.splats import synthetic_splats
from gsworkbench.io import write_ply
from gsworkbench.splat import intrinsics_from_fov, look_at
from gsworkbench.train.config import TrainConfig
from gsworkbench.train.run import TrainResult
from gsworkbench.viewer import SplatViewer, bundle_built, viewer_html
from gsworkbench.viewer.data import BUNDLE, BUNDLE_MISSING, camera_dict, encode_splats
from gsworkbench.viewer.widget import _MISSING_ESM


def _result(splats):  # noqa: ANN001, ANN202
    return TrainResult(splats, pd.DataFrame(), pd.DataFrame(), {}, {}, TrainConfig(), 0.0)


def test_construction_from_each_input_kind(tmp_path: Path) -> None:
    s = synthetic_splats(64, 3, seed=1)
    ply = write_ply(tmp_path / "s.ply", s)
    for source in (s, ply, str(ply), _result(s)):
        w = SplatViewer(source)
        assert w.num_splats == 64 and w.file_type == "ply"
        assert w._data == ply.read_bytes()  # the PLY itself, float32, every SH band
    with pytest.raises(ValueError, match="expected a SplatSet"):
        SplatViewer(42)


def test_data_travels_as_a_binary_buffer() -> None:
    w = SplatViewer(synthetic_splats(32, 1), encoding="spz")
    state, paths, buffers = _remove_buffers(w.get_state())
    assert ["_data"] in paths and "_data" not in state
    assert bytes(buffers[paths.index(["_data"])]) == encode_splats(synthetic_splats(32, 1), "spz")


def test_camera_round_trip() -> None:
    viewmat = look_at((1.3, -2.1, 0.7), (0.1, 0.2, -0.05))
    K = torch.tensor([[410.5, 0.0, 333.25], [0.0, 395.0, 170.5], [0.0, 0.0, 1.0]])
    w = SplatViewer(synthetic_splats(16, 0), viewmat=viewmat, K=K, width=640, height=360)
    assert torch.allclose(w.viewmat, viewmat, atol=1e-5) and torch.allclose(w.K, K, atol=1e-5)
    # the state a browser receives, and what Python reads back when a browser sends it
    state = json.loads(json.dumps(w.get_state()["camera"]))
    assert state["width"] == 640 and len(state["viewmat"]) == 16 and len(state["K"]) == 9
    moved = look_at((-2.0, 0.5, 1.5), (0.0, 0.0, 0.0))
    half = torch.cat([K[:2] * 0.5, K[2:]])  # the same view at half the resolution
    w.set_state({"camera": camera_dict(moved, half, 320, 180)})
    assert torch.allclose(w.viewmat, moved, atol=1e-5) and torch.allclose(w.K, half, atol=1e-5)
    w.set_camera(viewmat)
    assert torch.allclose(w.viewmat, viewmat, atol=1e-5)


def test_scene_views_and_live_updates() -> None:
    from types import SimpleNamespace

    Ks = intrinsics_from_fov(48, 32, 50.0)[None].repeat(3, 1, 1)
    viewmats = torch.stack([look_at((2.0 * np.cos(a), 2.0 * np.sin(a), 0.5)) for a in (0.0, 2.0, 4.0)])
    scene = SimpleNamespace(viewmats=viewmats, Ks=Ks, width=48, height=32, train_ids=torch.tensor([0, 2]),
                            test_ids=torch.tensor([1]), image_names=["a.png", "b.png", "c.png"])  # fmt: skip
    w = SplatViewer(synthetic_splats(16, 0), scene=scene)
    assert (w.width, w.height) == (48, 32) and torch.allclose(w.viewmat, viewmats[1])  # the first test view
    assert [v["name"] for v in w.views] == ["train 0: a.png", "train 2: c.png", "test 1: b.png"]
    w.show_view(2)
    assert torch.allclose(w.viewmat, viewmats[2])
    with pytest.raises(ValueError, match="no view 7"):
        w.show_view(7)
    w.update(synthetic_splats(40, 0), step=120, psnr=23.456)
    assert w.num_splats == 40 and w.status == "step 120  PSNR 23.46 dB"
    assert torch.allclose(w.viewmat, viewmats[2])  # updates keep the camera


def test_bad_cameras_are_refused() -> None:
    s = synthetic_splats(8, 0)
    with pytest.raises(ValueError, match="rigid"):
        SplatViewer(s, viewmat=torch.eye(4) * 2, K=intrinsics_from_fov(64, 64))
    with pytest.raises(ValueError, match="pinhole"):
        SplatViewer(s, viewmat=torch.eye(4), K=-intrinsics_from_fov(64, 64))


def test_missing_bundle_says_so_in_one_line() -> None:
    assert bundle_built() == BUNDLE.is_file()
    assert "\n" not in _MISSING_ESM and BUNDLE_MISSING in _MISSING_ESM.replace('\\"', '"')
    assert _MISSING_ESM.startswith("export default")


@pytest.mark.skipif(not BUNDLE.is_file(), reason="viewer bundle not built (make setup needs Node.js)")
def test_standalone_page_embeds_everything() -> None:
    s = synthetic_splats(20, 3)
    text = viewer_html(s, viewmat=look_at((0.0, -3.0, 1.0)), K=intrinsics_from_fov(200, 100), encoding="ply")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # nothing fetched from elsewhere
    options = json.loads(re.search(r'id="gsw-options">(.*?)</script>', text, re.S).group(1))
    assert (options["width"], options["height"]) == (200, 100)  # from K's principal point
    assert options["fileType"] == "ply" and options["numSplats"] == 20


@pytest.mark.skipif(not BUNDLE.is_file(), reason="viewer bundle not built (make setup needs Node.js)")
def test_export_command_writes_a_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gsworkbench.cli.main import main

    ply = write_ply(tmp_path / "splats.ply", synthetic_splats(30, 2))
    assert main(["export", str(ply), "--to", ".html", "--width", "400", "--height", "300"]) == 0
    page = tmp_path / "splats.html"
    assert f"written: {page}" in capsys.readouterr().out
    options = json.loads(re.search(r'id="gsw-options">(.*?)</script>', page.read_text(), re.S).group(1))
    assert (options["width"], options["height"], options["numSplats"], options["fileType"]) == (400, 300, 30, "spz")


def test_the_live_viewer_shows_itself_once_then_follows_the_run(tmp_path) -> None:
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset, preset_scene, train
    from gsworkbench.viewer import LiveViewer

    scene = builtin_scene(**{**preset_scene("smoke"), "cache_dir": tmp_path / "cache"})
    shown = []
    live = LiveViewer(scene, display=shown.append)
    train(scene, preset("smoke", iterations=9, refine_start=1000), watch=live, watch_every=4)
    assert len(shown) == 1 and shown[0] is live.viewer
    assert live.viewer.status.startswith("step 8  PSNR ") and live.viewer.num_splats > 0


def _ring_scene(up: torch.Tensor, background=(1.0, 1.0, 1.0)):  # noqa: ANN001, ANN202
    """Six cameras on a ring about ``up``, looking at the origin from a little above, upright about it."""
    from types import SimpleNamespace

    up = up / up.norm()
    side = torch.linalg.svd(torch.eye(3) - up[:, None] * up[None]).U[:, 0]  # a unit vector across up
    other = torch.linalg.cross(up, side)
    eyes = [2.0 * (np.cos(a) * side + np.sin(a) * other) + 0.8 * up for a in np.linspace(0, 5, 6)]
    viewmats = torch.stack([look_at(e, (0.0, 0.0, 0.0), up) for e in eyes])
    return SimpleNamespace(viewmats=viewmats, Ks=intrinsics_from_fov(48, 32, 50.0)[None].repeat(6, 1, 1),
                           width=48, height=32, train_ids=torch.arange(5), test_ids=torch.tensor([5]),
                           image_names=[], background=background)  # fmt: skip


@pytest.mark.parametrize("up", [(0.0, 0.0, 1.0), (0.0, -1.0, 0.0), (0.3, 0.2, -0.9)])
def test_the_orbit_axis_is_the_scenes_up(up: tuple[float, float, float]) -> None:
    from gsworkbench.viewer.data import camera_up, scene_up

    want = torch.tensor(up, dtype=torch.float64) / torch.tensor(up, dtype=torch.float64).norm()
    scene = _ring_scene(torch.tensor(up))
    assert np.allclose(scene_up(scene), want.numpy(), atol=1e-5)
    w = SplatViewer(synthetic_splats(16, 0), scene=scene)
    assert np.allclose(w.up, want.numpy(), atol=1e-5)
    # the camera's up is its -y axis: tilted down at the object, so not the scene's
    tilted = torch.tensor(camera_up(scene.viewmats[0]), dtype=torch.float64)
    assert 0.8 < float(tilted @ want) < 0.999
    # no scene: the given camera's up; nothing given: +z (the default view is upright about it)
    assert np.allclose(SplatViewer(synthetic_splats(8, 0), viewmat=scene.viewmats[0], K=scene.Ks[0]).up, tilted)
    assert SplatViewer(synthetic_splats(8, 0)).up == [0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="up must be a nonzero"):
        SplatViewer(synthetic_splats(8, 0), up=(0, 0, 0))


def test_the_scene_gives_the_background_unless_one_is_given() -> None:
    scene = _ring_scene(torch.tensor([0.0, 0.0, 1.0]), background=(1.0, 1.0, 1.0))
    assert SplatViewer(synthetic_splats(8, 0), scene=scene).background == [1.0, 1.0, 1.0]
    assert SplatViewer(synthetic_splats(8, 0), scene=scene, background=(0, 0.5, 0)).background == [0.0, 0.5, 0.0]
    assert SplatViewer(synthetic_splats(8, 0)).background == [0.0, 0.0, 0.0]


def test_rerunning_a_cell_closes_the_viewers_its_last_run_made() -> None:
    from gsworkbench.viewer.widget import adopt

    first = [SplatViewer(synthetic_splats(8, 0)) for _ in range(2)]
    for w in first:  # one run of cell "c1" makes two viewers: both stay
        adopt(w, ("c1", "run-1"))
    other = SplatViewer(synthetic_splats(8, 0))
    adopt(other, ("c2", "run-2"))
    assert all(w.comm is not None for w in (*first, other))
    again = SplatViewer(synthetic_splats(8, 0))
    adopt(again, ("c1", "run-3"))  # the cell runs again: its last run's viewers close, other cells' stay
    assert all(w.comm is None for w in first) and other.comm is not None and again.comm is not None
    adopt(SplatViewer(synthetic_splats(8, 0)), None)  # outside a notebook cell: nothing to close


def test_bad_splat_files_are_named_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_ply(run / "splats.ply", synthetic_splats(12, 1))
    assert SplatViewer(run).num_splats == 12  # a run folder: its splats.ply
    with pytest.raises(FileNotFoundError, match="gone.ply: no such file"):
        SplatViewer(tmp_path / "gone.ply")
    with pytest.raises(FileNotFoundError, match="is a folder with no splats.ply"):
        SplatViewer(tmp_path)
    with pytest.raises(ValueError, match="empty.ply: holds no splats"):
        SplatViewer(write_ply(tmp_path / "empty.ply", synthetic_splats(0, 0)))


def test_a_silent_browser_ends_in_an_error_not_a_hang() -> None:
    """The DevTools pipe gives nothing (a capture waiting for a frame that never comes): the read ends
    with BrowserError at its deadline instead of blocking on the pipe forever."""
    import os
    import time
    from types import SimpleNamespace

    from gsworkbench.viewer.headless import BrowserError, HeadlessChromium

    r, w = os.pipe()
    try:
        browser = HeadlessChromium.__new__(HeadlessChromium)
        browser._buffer, browser._from_browser = b"", r
        browser._proc = SimpleNamespace(poll=lambda: None, returncode=None)
        with pytest.raises(BrowserError, match="did not answer in time"):
            browser._read_message(time.monotonic() + 0.2)
    finally:
        os.close(r)
        os.close(w)
