"""The browser renders what ``rasterize`` renders: the standalone page in headless Chromium (WebGL on
SwiftShader) against the workbench's rasterizer at the same camera.

- an asymmetric scene of a few coloured splats, seen by a camera with an off-centre principal point
  and fx != fy: each splat lands within 2 px of its projected centre (a flipped axis, a focal length
  off by the aspect ratio or a principal point mirrored moves them by tens of pixels), for each file
  format the page can carry (PLY, .spz, .splat: all three load in the browser's reader);
- the camera the page reports is the one it was given, to 1e-5;
- the canvas follows its window (page) or its container (widget) and shows the camera's image scaled
  to fit, centred; at the image's own size, exactly that image.

Needs Chromium (Debian: ``apt-get install chromium``) and the browser bundle (``make setup`` with
Node.js); skips with one line otherwise, or fails with ``GSW_REQUIRE_BROWSER=1`` (CI).
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ext_built
from PIL import Image

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet
from gsworkbench.splat import look_at, rasterize
from gsworkbench.viewer import save_viewer_html
from gsworkbench.viewer.data import BUNDLE
from gsworkbench.viewer.headless import HeadlessChromium, find_chromium


def _missing() -> str | None:
    if find_chromium() is None:
        return "no Chromium for the browser check (Debian: apt-get install chromium)"
    if not BUNDLE.is_file():
        return "the viewer's browser bundle is not built (make setup with Node.js)"
    return None


# GSW_REQUIRE_BROWSER=1 (CI): a missing Chromium or bundle fails these tests instead of skipping them
if _missing() and os.environ.get("GSW_REQUIRE_BROWSER", "0") not in ("", "0"):
    pytestmark = pytest.mark.usefixtures("_browser_required")
else:
    pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


@pytest.fixture
def _browser_required() -> None:
    pytest.fail(f"GSW_REQUIRE_BROWSER is set but {_missing()}")


W, H = 320, 240
K = torch.tensor([[300.0, 0.0, 181.5], [0.0, 270.0, 103.25], [0.0, 0.0, 1.0]])
VIEWMAT = look_at((0.7, -3.0, 1.1), (0.15, 0.0, 0.25))
COLOURS = torch.tensor([[1.0, 0.1, 0.1], [0.1, 1.0, 0.1], [0.15, 0.3, 1.0], [1.0, 1.0, 0.1], [0.1, 1.0, 1.0]])
POINTS = torch.tensor([[-0.9, 0.2, 0.9], [0.6, -0.3, 0.7], [-0.3, 0.4, -0.3], [1.0, 0.6, -0.2], [0.05, -0.5, 0.35]])


def few_splats(sh_degree: int) -> SplatSet:
    """Five small round splats of distinct colours at asymmetric places (SH rest small but nonzero)."""
    n = len(POINTS)
    g = torch.Generator().manual_seed(0)
    k = (sh_degree + 1) ** 2 - 1
    return SplatSet(POINTS.clone(), torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(n, 1),
                    torch.full((n, 3), float(np.log(0.035))), torch.full((n,), 5.0),
                    gaussians.rgb_to_sh_dc(COLOURS), 0.03 * torch.randn(n, k, 3, generator=g))  # fmt: skip


def render(splats: SplatSet, viewmat: torch.Tensor, K: torch.Tensor, w: int, h: int) -> np.ndarray:
    """``rasterize``'s image [H,W,3] in [0,1] on a black background."""
    img, _, _ = rasterize(splats.means, splats.quats, splats.scales, splats.opacities, splats.sh,
                          viewmat[None], K[None], w, h, sh_degree=splats.sh_degree)  # fmt: skip
    return img[0].clamp(0, 1).numpy()


def browser_image(path: Path, w: int, h: int, camera: dict | None = None) -> tuple[np.ndarray, dict]:
    """The page's canvas [H,W,3] in [0,1] once the data loaded and the sort settled, and its camera."""
    with HeadlessChromium(w, h) as browser:
        browser.open(path)
        browser.evaluate("window.gswReady.then((v) => v.settle(20))")
        page_size = browser.evaluate("[innerWidth, innerHeight]")
        png = browser.evaluate("gswViewer.snapshot()")
        reported = browser.evaluate("gswViewer.getCamera()")
    canvas = np.asarray(Image.open(io.BytesIO(base64.b64decode(png.split(",", 1)[1]))).convert("RGB"))
    assert page_size == [w, h] and canvas.shape == (h, w, 3)
    return canvas / 255.0, reported


def projected(points: torch.Tensor, viewmat: torch.Tensor, K: torch.Tensor) -> np.ndarray:
    """Pixel coordinates [N,2] (u, v; pixel i covers [i, i+1)) of world points."""
    cam = points.double() @ viewmat[:3, :3].double().T + viewmat[:3, 3].double()
    uv = cam @ K.double().T
    return (uv[:, :2] / uv[:, 2:]).numpy()


def splat_centre(img: np.ndarray, colour: np.ndarray, near: np.ndarray, radius: int = 14) -> tuple[np.ndarray, float]:
    """The intensity-weighted centroid (u, v) of the pixels that look like ``colour`` within ``radius``
    of ``near``, and the summed weight."""
    h, w, _ = img.shape
    u0, v0 = int(near[0]), int(near[1])
    ys, xs = np.mgrid[max(v0 - radius, 0) : min(v0 + radius, h), max(u0 - radius, 0) : min(u0 + radius, w)]
    patch = img[ys, xs]
    c = colour / np.linalg.norm(colour)
    bright = patch @ c
    off = np.linalg.norm(patch - bright[..., None] * c, axis=-1)  # the part of the colour that is not c
    weight = np.clip(bright - 2 * off, 0, None)
    total = float(weight.sum())
    if total == 0:
        return np.array([np.nan, np.nan]), 0.0
    return np.array([(weight * (xs + 0.5)).sum(), (weight * (ys + 0.5)).sum()]) / total, total


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    return float(-10 * np.log10(np.mean((a - b) ** 2) + 1e-12))


@pytest.mark.parametrize("encoding", ["ply", "spz", "splat"])
def test_each_splat_lands_on_its_projected_centre(tmp_path: Path, encoding: str) -> None:
    splats = few_splats(0 if encoding == "splat" else 1)
    page = save_viewer_html(tmp_path / "page.html", splats, viewmat=VIEWMAT, K=K, width=W, height=H, encoding=encoding)
    img, camera = browser_image(page, W, H)
    ours = render(splats, VIEWMAT, K, W, H)
    want = projected(splats.means, VIEWMAT, K)
    for i, colour in enumerate(COLOURS.numpy()):
        assert 20 < want[i, 0] < W - 20 and 20 < want[i, 1] < H - 20  # the scene is in view
        ref, ref_weight = splat_centre(ours, colour, want[i])
        got, weight = splat_centre(img, colour, want[i])
        assert np.abs(ref - want[i]).max() < 0.5, (i, ref, want[i])  # the measurement itself
        assert weight > 0.3 * ref_weight, f"splat {i} ({encoding}) is missing near {want[i]} in the browser"
        assert np.abs(got - want[i]).max() <= 2.0, f"splat {i} ({encoding}): browser {got}, projected {want[i]}"
    assert psnr(img, ours) > 25.0, psnr(img, ours)
    np.testing.assert_allclose(np.array(camera["viewmat"]).reshape(4, 4), VIEWMAT.double().numpy(), atol=1e-5)
    np.testing.assert_allclose(np.array(camera["K"]).reshape(3, 3), K.double().numpy(), atol=1e-5)
    assert (camera["width"], camera["height"]) == (W, H)


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["ply", "spz"])
def test_trained_scene_matches_rasterize(tmp_path: Path, encoding: str) -> None:
    """A scene trained briefly (the smoke preset: the object, 64 px), at a test view, over its white
    background: the page's image against ``rasterize``'s, PSNR >= 25 dB."""
    from gsworkbench.synthetic import builtin_scene
    from gsworkbench.train import preset, preset_scene, train

    scene = builtin_scene(**preset_scene("smoke"))
    result = train(scene, preset("smoke", backend="ext" if ext_built() else "torch"))
    splats = result.splats
    assert splats.sh_degree == 3 and len(splats) > 500
    i = int(scene.test_ids[0])
    viewmat, K, w, h = scene.viewmats[i], scene.Ks[i], scene.width, scene.height
    page = save_viewer_html(tmp_path / "page.html", splats, viewmat=viewmat, K=K, width=w, height=h,
                            background=scene.background, encoding=encoding)  # fmt: skip
    img, _ = browser_image(page, w, h)
    bg = torch.tensor(scene.background)
    ours, _, _ = rasterize(splats.means, splats.quats, splats.scales, splats.opacities, splats.sh, viewmat[None],
                           K[None], w, h, sh_degree=3, backgrounds=bg[None])  # fmt: skip
    ours = ours[0].clamp(0, 1).numpy()
    Image.fromarray((np.concatenate([ours, img], 1) * 255).round().astype(np.uint8)).save(tmp_path / "compare.png")
    assert psnr(img, ours) >= 25.0, f"{encoding}: PSNR {psnr(img, ours):.2f} dB (images: {tmp_path / 'compare.png'})"


# The widget's module in a page, with the model a Jupyter frontend would give it: the widget's own
# state (JSON) and its binary buffer (a DataView), set/on/save_changes as in anywidget's model API.
_WIDGET_PAGE = """<!DOCTYPE html><html><body style="margin:0">
<script type="application/json" id="state">{state}</script>
<script type="application/octet-stream" id="buffer">{buffer}</script>
<script type="module">
const state = JSON.parse(document.getElementById("state").textContent);
const raw = Uint8Array.from(atob(document.getElementById("buffer").textContent.trim()), (c) => c.charCodeAt(0));
state._data = new DataView(raw.buffer);
const handlers = {{}};
window.saved = [];
const model = {{
  get: (k) => state[k],
  set: (k, v) => {{ state[k] = v; (handlers["change:" + k] || []).forEach((f) => f()); }},
  on: (ev, f) => {{ (handlers[ev] = handlers[ev] || []).push(f); }},
  save_changes: () => window.saved.push(JSON.parse(JSON.stringify(state.camera))),
}};
window.gswModel = model;
window.gswReady = import("data:text/javascript;base64,{bundle}")
  .then((m) => m.default.render({{ model, el: document.body }}));
</script></body></html>"""


# The canvas once it stops changing: the same picture 10 frames apart (Spark sorts in a worker, so a
# new camera's frames change until its sort has come back), however long that takes on a busy machine.
_STEADY_CANVAS = """(async () => {
  const frames = (n) => new Promise((r) => { const f = () => (--n > 0 ? requestAnimationFrame(f) : r());
                                               requestAnimationFrame(f); });
  const canvas = document.querySelector("canvas");
  let before = canvas.toDataURL();
  for (let i = 0; i < 200; i++) {
    await frames(10);
    const now = canvas.toDataURL();
    if (now === before) return now;
    before = now;
  }
  throw new Error("the canvas kept changing");
})()"""


def test_widget_camera_round_trip_through_the_browser(tmp_path: Path) -> None:
    """Python -> the widget's state -> the widget's module in Chromium; the user picks a view there ->
    the module reports the camera -> Python reads it back, to 1e-5. Also the new camera from Python
    (a model change) moves the browser's, and the canvas follows a wider output area."""
    from types import SimpleNamespace

    from ipywidgets.widgets.widget import _remove_buffers

    from gsworkbench.viewer import SplatViewer

    viewmats = torch.stack([VIEWMAT, look_at((-2.5, 1.5, 1.2), (0.1, 0.0, 0.2))])
    scene = SimpleNamespace(viewmats=viewmats, Ks=torch.stack([K, K]), width=W, height=H, image_names=[],
                            train_ids=torch.tensor([1]), test_ids=torch.tensor([0]))  # fmt: skip
    widget = SplatViewer(few_splats(1), scene=scene)
    state, paths, buffers = _remove_buffers(widget.get_state())
    assert paths == [["_data"]]
    page = tmp_path / "widget.html"
    page.write_text(_WIDGET_PAGE.format(
        state=json.dumps(state).replace("</", "<\\/"), buffer=base64.b64encode(bytes(buffers[0])).decode(),
        bundle=base64.b64encode(BUNDLE.read_bytes()).decode(),
    ))  # fmt: skip
    # a window tall enough that the widget (at most 70% of the window's height) shows the W x H image
    with HeadlessChromium(W, math.ceil(H / 0.7)) as browser:
        browser.open(page)
        browser.evaluate("window.gswReady.then(() => new Promise((r) => setTimeout(r, 1500)))")
        assert browser.evaluate("window.saved.length") == 0  # nothing moved yet: nothing reported
        # the user picks the first entry of the widget's view menu: the train view, scene view 1
        browser.evaluate("""(() => { const s = document.querySelector("select"); s.value = "0";
                            s.dispatchEvent(new Event("change")); })()""")
        browser.evaluate("new Promise((r) => setTimeout(r, 1500))")
        saved = browser.evaluate("window.saved")
        assert saved, "the widget did not report the camera the user chose"
        widget.set_state({"camera": saved[-1]})
        assert torch.allclose(widget.viewmat, viewmats[1], atol=1e-5) and torch.allclose(widget.K, K, atol=1e-5)
        # Python moves the camera back to the test view: the module applies it and draws it
        widget.set_camera(viewmats[0])
        browser.evaluate(f"gswModel.set('camera', {json.dumps(widget.get_state()['camera'])})")
        png = browser.evaluate(_STEADY_CANVAS)
        # a wider output area: the widget spans its width at the image's aspect ratio, up to 70% of the
        # window's height (so its controls stay in view), and its canvas follows
        browser.resize(2 * W, 2 * H)
        size = browser.evaluate(
            "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))).then(() => "
            "[...['clientWidth', 'clientHeight'].map((k) => document.querySelector('canvas')[k])])"
        )
        assert size == [2 * W, int(0.7 * 2 * H)]
    img = np.asarray(Image.open(io.BytesIO(base64.b64decode(png.split(",", 1)[1]))).convert("RGB")) / 255.0
    want = projected(POINTS, VIEWMAT, K)
    for i, colour in enumerate(COLOURS.numpy()):
        got, weight = splat_centre(img, colour, want[i])
        assert weight > 0 and np.abs(got - want[i]).max() <= 2.0, (i, got, want[i])


def _image(data_url: str) -> np.ndarray:
    """A PNG data URL as [H,W,3] in [0,1]."""
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))).convert("RGB")) / 255.0


def test_the_page_follows_its_window_and_keeps_the_exact_camera(tmp_path: Path) -> None:
    """A wider and taller window: the canvas takes its size and shows the camera's W x H image scaled to
    fit and centred (each splat at its projected centre, scaled and shifted); back at W x H the canvas
    shows exactly the image ``rasterize`` renders. The camera read back stays the W x H one."""
    splats = few_splats(1)
    page = save_viewer_html(tmp_path / "page.html", splats, viewmat=VIEWMAT, K=K, width=W, height=H, encoding="ply")
    big_w, big_h = 2 * W, H + 60
    with HeadlessChromium(W, H) as browser:
        browser.open(page)
        browser.evaluate("window.gswReady.then((v) => v.settle(10))")
        assert browser.evaluate("gswViewer.viewSize") == [W, H]
        intervals = browser.evaluate("gswViewer.frameIntervals(5)")
        assert len(intervals) == 5 and all(t > 0 for t in intervals)
        browser.resize(big_w, big_h)
        browser.evaluate("gswViewer.settle(10)")
        assert browser.evaluate("gswViewer.viewSize") == [big_w, big_h]
        wide, camera = _image(browser.evaluate("gswViewer.snapshot()")), browser.evaluate("gswViewer.getCamera()")
        browser.resize(W, H)
        browser.evaluate("gswViewer.settle(10)")
        back = _image(browser.evaluate("gswViewer.snapshot()"))
    assert wide.shape == (big_h, big_w, 3) and back.shape == (H, W, 3)
    scale = min(big_w / W, big_h / H)  # 1.25: the height binds; the image is centred left to right
    fitted = K.clone().double()
    fitted[:2] *= scale
    fitted[0, 2] += (big_w - scale * W) / 2
    fitted[1, 2] += (big_h - scale * H) / 2
    for name, img, k in (("wide", wide, fitted), ("back", back, K)):
        want = projected(POINTS, VIEWMAT, k)
        for i, colour in enumerate(COLOURS.numpy()):
            got, weight = splat_centre(img, colour, want[i], radius=18)
            assert weight > 0 and np.abs(got - want[i]).max() <= 2.0, (name, i, got, want[i])
    assert psnr(back, render(splats, VIEWMAT, K, W, H)) > 25.0
    np.testing.assert_allclose(np.array(camera["K"]).reshape(3, 3), K.double().numpy(), atol=1e-5)
    assert (camera["width"], camera["height"]) == (W, H)


def _centre(camera: dict) -> np.ndarray:
    """The camera's centre in world coordinates from its wire viewmat."""
    v = np.array(camera["viewmat"]).reshape(4, 4)
    return -v[:3, :3].T @ v[:3, 3]


@pytest.mark.parametrize("up", [(0.0, 0.0, 1.0), (0.0, -1.0, 0.0)], ids=["z-up", "y-down"])
def test_a_horizontal_drag_orbits_about_the_scenes_up_axis(tmp_path: Path, up: tuple[float, float, float]) -> None:
    """A user drags 200 px sideways: the camera circles the scene about its up axis, so its height along
    that axis stays put (the built-in scenes are z up; COLMAP's worlds are often y down)."""
    u = np.array(up)
    eye = np.array([0.7, -3.0, 1.1]) if up[2] else np.array([0.7, -1.1, -3.0])
    viewmat = look_at(tuple(eye), (0.15, 0.0, 0.25), up)  # looking down at the splats: tilted about up
    page = save_viewer_html(tmp_path / "page.html", few_splats(1), viewmat=viewmat, K=K, width=W, height=H,
                            up=up, encoding="ply")  # fmt: skip
    with HeadlessChromium(W, H) as browser:
        browser.open(page)
        browser.evaluate("window.gswReady.then((v) => v.settle(5))")
        assert np.allclose(browser.evaluate("gswViewer.up"), u)
        before = _centre(browser.evaluate("gswViewer.getCamera()"))
        browser.drag((60, 120), (260, 120))
        browser.evaluate("gswViewer.settle(2)")
        after = _centre(browser.evaluate("gswViewer.getCamera()"))
    assert abs(float((after - before) @ u)) < 1e-4, (before, after)  # the height along up: unchanged
    flat = [c - (c @ u) * u for c in (before, after)]
    turned = np.degrees(np.arccos(flat[0] @ flat[1] / np.linalg.norm(flat[0]) / np.linalg.norm(flat[1])))
    assert turned > 20.0, f"the drag turned the camera by only {turned:.1f} degrees about up"


def test_an_untouched_viewer_draws_nothing(tmp_path: Path) -> None:
    """Once the data is drawn and Spark's sort is back, the page draws no frame until something changes
    (an idle widget takes no CPU); a camera change draws again."""
    import time

    page = save_viewer_html(tmp_path / "page.html", few_splats(1), viewmat=VIEWMAT, K=K, width=W, height=H)
    with HeadlessChromium(W, H) as browser:
        browser.open(page)
        browser.evaluate("window.gswReady.then((v) => v.settle(5))")
        drawn = browser.evaluate("gswViewer.framesDrawn")
        time.sleep(1.0)  # a second of animation frames the page could have drawn
        assert browser.evaluate("new Promise((r) => requestAnimationFrame(() => r(gswViewer.framesDrawn)))") == drawn
        moved = look_at((-2.5, 1.5, 1.2), (0.1, 0.0, 0.2))
        browser.evaluate(f"gswViewer.setCamera({{viewmat: {moved.reshape(-1).tolist()}, K: {K.reshape(-1).tolist()}}})")
        browser.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        assert browser.evaluate("gswViewer.framesDrawn") > drawn


def test_fly_mode_draws_while_a_key_is_held_and_stops_after(tmp_path: Path) -> None:
    """Fly mode (WASD): holding W moves the camera forward, frame by frame; once the key is released and
    the camera has stopped, the page draws nothing more."""
    import time

    page = save_viewer_html(tmp_path / "page.html", few_splats(1), viewmat=VIEWMAT, K=K, width=W, height=H)
    with HeadlessChromium(W, H) as browser:
        browser.open(page)
        browser.evaluate("window.gswReady.then((v) => v.settle(5))")
        browser.evaluate("document.querySelector('button').click(); document.querySelector('canvas').focus()")
        before, drawn = _centre(browser.evaluate("gswViewer.getCamera()")), browser.evaluate("gswViewer.framesDrawn")
        browser.key("KeyW", down=True)
        # held for 5 frames of the page's own, however slowly a busy machine draws them
        browser.evaluate(f"new Promise((r) => {{ const f = () => gswViewer.framesDrawn >= {drawn + 5} ? r() :"
                         " requestAnimationFrame(f); f(); })")  # fmt: skip
        browser.key("KeyW", down=False)
        after = _centre(browser.evaluate("gswViewer.getCamera()"))
        # the movement's last frames: wait until none is drawn for 1.5 s (the browser's timeout bounds it)
        stopped = browser.evaluate("""new Promise((r) => { let n = gswViewer.framesDrawn;
            const poll = () => { if (gswViewer.framesDrawn === n) r(n); else { n = gswViewer.framesDrawn;
                                                                               setTimeout(poll, 1500); } };
            setTimeout(poll, 1500); })""")
        time.sleep(1.0)
        still = browser.evaluate("gswViewer.framesDrawn")
    forward = VIEWMAT[2, :3].double().numpy()  # the camera's viewing direction (OpenCV +z) in world axes
    assert float((after - before) @ forward) > 0, (before, after)
    assert stopped >= drawn + 5 and still == stopped


def test_a_lost_webgl_context_says_so_and_comes_back(tmp_path: Path) -> None:
    """The browser takes the WebGL context away (as when its GPU process restarts): one line over the
    canvas says so; when the context is restored the splats load again and the same picture comes
    back, with no WebGL error."""
    page = save_viewer_html(tmp_path / "page.html", few_splats(1), viewmat=VIEWMAT, K=K, width=W, height=H)
    lose = "document.querySelector('canvas').getContext('webgl2').getExtension('WEBGL_lose_context')"
    with HeadlessChromium(W, H) as browser:
        browser.open(page)
        browser.evaluate("window.gswReady.then((v) => v.settle(10))")
        before = _image(browser.evaluate("gswViewer.snapshot()"))
        browser.evaluate(f"(window.gswLose = {lose}).loseContext()")
        browser.evaluate("new Promise((r) => setTimeout(r, 200))")
        assert browser.evaluate("gswViewer.notice").startswith("WebGL context lost")
        browser.evaluate("gswLose.restoreContext()")
        browser.evaluate("new Promise((r) => setTimeout(r, 200)).then(() => gswViewer.settle(10))")
        assert browser.evaluate("gswViewer.notice") == ""
        after = _image(browser.evaluate("gswViewer.snapshot()"))
        errors = [m for m in browser.console if "GL_INVALID" in m or "WebGL: INVALID" in m]
    assert before.max() > 0.5  # the splats were drawn
    assert psnr(before, after) > 40.0 and not errors, (psnr(before, after), errors)
