"""The splat viewer: WebGL in the browser (Spark, a three.js splat renderer, bundled by ``make setup``).

- :class:`SplatViewer`: a Jupyter widget (anywidget) with the camera readable and settable from Python;
- :class:`LiveViewer`: a SplatViewer that follows a training run (``train(..., watch=LiveViewer(scene))``);
- :func:`save_viewer_html`: one standalone HTML file (bundle and splats inside, no network);
- :mod:`gsworkbench.viewer.headless`: headless Chromium to check the viewer against ``rasterize``.
"""

from gsworkbench.viewer.data import bundle_built
from gsworkbench.viewer.live import LiveViewer
from gsworkbench.viewer.page import save_result_page, save_viewer_html, viewer_html
from gsworkbench.viewer.widget import SplatViewer

__all__ = ["LiveViewer", "SplatViewer", "bundle_built", "save_result_page", "save_viewer_html", "viewer_html"]
