"""``save_viewer_html``: one HTML file holding the browser bundle and the splats, which opens in any
browser with no server and no network.

The page's canvas fills the window and its camera is the given ``viewmat`` and ``K`` for a ``width``
x ``height`` image. In a window of exactly that size (device pixel ratio 1) the canvas shows the image
``rasterize`` renders at that camera (up to the renderers' sorting and clipping); in any other window
it shows that image scaled to fit and centred, with more of the scene beyond two of its edges, and it
follows the window when it is resized. In the page, ``window.gswViewer`` is the viewer
(``getCamera()``, ``setCamera({viewmat, K})``, ``settle()``, ``frameIntervals(n)``, ``snapshot()``,
``setHud(bool)``) once ``window.gswReady`` (a promise) resolves.
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path
from typing import Any

from gsworkbench.core.atomic import atomic_write_bytes
from gsworkbench.viewer.data import (
    BUNDLE_MISSING,
    DEFAULT_SIZE,
    as_splats,
    bundle_built,
    bundle_source,
    camera_dict,
    camera_up,
    checked_rgb,
    checked_up,
    default_camera,
    encode_splats,
    scene_center,
    scene_up,
)

# The bundle and the splats travel base64-encoded in inert <script type="application/octet-stream">
# blocks (no escaping of "</script>" inside them), and the bundle is imported from a data: URL.
_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>html, body {{ margin: 0; padding: 0; background: {css_background}; overflow: hidden; }}</style>
</head>
<body>
<script type="application/octet-stream" id="gsw-bundle">{bundle}</script>
<script type="application/octet-stream" id="gsw-data">{data}</script>
<script type="application/json" id="gsw-options">{options}</script>
<script type="module">
const text = (id) => document.getElementById(id).textContent.trim();
const bytes = Uint8Array.from(atob(text("gsw-data")), (c) => c.charCodeAt(0));
const options = JSON.parse(text("gsw-options"));
window.gswReady = import("data:text/javascript;base64," + text("gsw-bundle")).then(() => {{
  const viewer = globalThis.gswMountViewer(document.body, options);
  window.gswViewer = viewer;
  return viewer.setData(bytes, options.fileType, options.numSplats).then(() => viewer);
}});
</script>
</body>
</html>
"""


def viewer_html(
    splats: Any,
    *,
    viewmat: Any = None,
    K: Any = None,
    width: int | None = None,
    height: int | None = None,
    background: tuple[float, float, float] = (0.0, 0.0, 0.0),
    up: Any = None,
    encoding: str = "spz",
    title: str = "gsworkbench splat viewer",
) -> str:
    """The standalone page's text (see :func:`save_viewer_html`)."""
    bundle = bundle_source()
    if bundle is None:
        raise RuntimeError(BUNDLE_MISSING)
    s = as_splats(splats)
    if K is not None and (width is None or height is None):
        k = [[float(x) for x in row] for row in (K.tolist() if hasattr(K, "tolist") else K)]
        width, height = round(2 * k[0][2]), round(2 * k[1][2])  # a centred principal point's image
    width, height = width or DEFAULT_SIZE[0], height or DEFAULT_SIZE[1]
    if up is None:
        up = camera_up(viewmat) if viewmat is not None else [0.0, 0.0, 1.0]
    if viewmat is None or K is None:
        dv, dk = default_camera(s, width, height)
        viewmat, K = dv if viewmat is None else viewmat, dk if K is None else K
    rgb = checked_rgb(background)
    options = {
        "width": width, "height": height, "layout": "page", "background": rgb,
        "camera": camera_dict(viewmat, K, width, height), "center": scene_center(s), "up": checked_up(up),
        "fileType": encoding, "numSplats": len(s), "views": [],
    }  # fmt: skip
    data = base64.b64encode(encode_splats(s, encoding)).decode("ascii")
    return _PAGE.format(
        title=html.escape(title),
        css_background="rgb({}, {}, {})".format(*(round(255 * c) for c in rgb)),
        bundle=base64.b64encode(bundle.encode("utf-8")).decode("ascii"),
        data=data,
        options=json.dumps(options).replace("</", "<\\/"),
    )


def save_viewer_html(
    path: str | os.PathLike[str],
    splats: Any,
    *,
    viewmat: Any = None,
    K: Any = None,
    width: int | None = None,
    height: int | None = None,
    background: tuple[float, float, float] = (0.0, 0.0, 0.0),
    up: Any = None,
    encoding: str = "spz",
) -> Path:
    """Writes a standalone viewer page of ``splats`` (a SplatSet, a PLY path or a training result).

    viewmat [4,4] (world-to-camera, OpenCV axes) and K [3,3] (pixels), as ``rasterize`` takes them: the
    page opens at that view of a ``width`` x ``height`` image (default: the image whose centre is K's
    principal point; without K, 960 x 540 and a view of the whole set), which a window of that size in
    CSS pixels shows exactly (a larger or smaller one: scaled to fit). ``background``: RGB in [0, 1].
    ``up``: the world's up axis [3], which a horizontal drag orbits about (default: the given camera's
    up; without a camera, +z, the axis the default view is upright about).
    ``encoding``: ``"spz"`` (compact, quantised as :mod:`gsworkbench.io.spz` states), ``"ply"``
    (float32, exact, about six times larger at SH degree 3) or ``"splat"`` (no view-dependent colour). Returns the
    path. RuntimeError when the browser bundle was not built (no Node.js at set-up).
    """
    text = viewer_html(splats, viewmat=viewmat, K=K, width=width, height=height, background=background, up=up,
                       encoding=encoding)  # fmt: skip
    return atomic_write_bytes(path, text.encode("utf-8"))


def save_result_page(path: str | os.PathLike[str], result: Any, scene: Any) -> Path | None:
    """The notebooks' viewer page: ``result``'s splats at ``scene``'s first test view (its first view
    when it has none), over its background, orbiting about its up axis; None, with nothing written,
    where the bundle is not built."""
    if not bundle_built():
        return None
    i = int(scene.test_ids[0]) if len(scene.test_ids) else 0
    return save_viewer_html(path, result, viewmat=scene.viewmats[i], K=scene.Ks[i], width=scene.width,
                            height=scene.height, background=scene.background, up=scene_up(scene))  # fmt: skip
