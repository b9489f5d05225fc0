"""``SplatViewer``: a Jupyter widget (anywidget) that renders splats in the browser with WebGL.

The splats go to the browser as one binary buffer (an Inria PLY by default: float32, every SH
band; or ``.spz``), never as JSON numbers. The camera is the rasterizer's (world-to-camera viewmat,
OpenCV axes; K in pixels) both ways: set it from Python, move it in the browser (orbit, or fly with
WASD), and read the current one back with :attr:`SplatViewer.camera` to render that very view with
``rasterize``. Constructing and updating the widget never waits for a browser, so notebooks that
show one run headless.
"""

from __future__ import annotations

from typing import Any

import anywidget
import torch
import traitlets

from gsworkbench.viewer.data import (
    BUNDLE,
    BUNDLE_MISSING,
    DEFAULT_SIZE,
    ENCODINGS,
    as_splats,
    camera_dict,
    camera_tensors,
    default_camera,
    encode_splats,
    scene_center,
    scene_views,
)

_MISSING_ESM = "export default { render({ el }) { el.textContent = " + repr(BUNDLE_MISSING).replace("'", '"') + "; } };"


class SplatViewer(anywidget.AnyWidget):
    """An interactive splat viewer in the notebook.

    Args:
        source: a SplatSet, a PLY path, or a training result (a TrainResult, or a Trainer).
        scene: a Scene: its train and test views become the view menu, and the first test view (else
            the first view) the initial camera, unless ``viewmat``/``K`` are given.
        viewmat [4,4], K [3,3]: the initial camera (default: the scene's view, else a view of the whole
            set); width, height: the image K refers to, in pixels (default: the scene's image size,
            else 960 x 540). The canvas spans the notebook's output width at that aspect ratio (its
            height can be dragged) and shows that image scaled to fit, centred; the camera read back
            is still the one for a width x height image.
        background: RGB in [0, 1]. encoding: "ply" (lossless) or "spz" (about six times smaller at SH degree 3).
    """

    _esm = BUNDLE if BUNDLE.is_file() else _MISSING_ESM
    _data = traitlets.Bytes(b"").tag(sync=True)
    file_type = traitlets.Unicode("ply").tag(sync=True)
    num_splats = traitlets.Int(0).tag(sync=True)
    width = traitlets.Int(DEFAULT_SIZE[0]).tag(sync=True)
    height = traitlets.Int(DEFAULT_SIZE[1]).tag(sync=True)
    camera = traitlets.Dict().tag(sync=True)
    center = traitlets.List(traitlets.Float(), [0.0, 0.0, 0.0]).tag(sync=True)
    background = traitlets.List(traitlets.Float(), [0.0, 0.0, 0.0]).tag(sync=True)
    views = traitlets.List(traitlets.Dict()).tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        source: Any,
        *,
        scene: Any = None,
        viewmat: Any = None,
        K: Any = None,
        width: int | None = None,
        height: int | None = None,
        background: tuple[float, float, float] = (0.0, 0.0, 0.0),
        encoding: str = "ply",
    ) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
        splats = as_splats(source)
        views = scene_views(scene) if scene is not None else []
        if width is None or height is None:
            width, height = (scene.width, scene.height) if scene is not None else DEFAULT_SIZE
        if viewmat is None or K is None:
            if scene is not None:
                i = int(scene.test_ids[0]) if len(scene.test_ids) else 0
                sv, sk = scene.viewmats[i], scene.Ks[i]
            else:
                sv, sk = default_camera(splats, width, height)
            viewmat, K = sv if viewmat is None else viewmat, sk if K is None else K
        rgb = [float(c) for c in background]
        if len(rgb) != 3 or not all(0.0 <= c <= 1.0 for c in rgb):
            raise ValueError(f"background must be 3 numbers in [0, 1], got {background}")
        self._encoding = encoding
        super().__init__(
            width=int(width), height=int(height), camera=camera_dict(viewmat, K, width, height), views=views,
            background=rgb, center=scene_center(splats), file_type=encoding, num_splats=len(splats),
            _data=encode_splats(splats, encoding),
        )  # fmt: skip

    @property
    def viewmat(self) -> torch.Tensor:
        """The current world-to-camera matrix [4,4] float32 (OpenCV axes), as the browser last reported it."""
        return camera_tensors(self.camera)[0]

    @property
    def K(self) -> torch.Tensor:  # noqa: N802
        """The current intrinsics [3,3] float32 (pixels, for a width x height image)."""
        return camera_tensors(self.camera)[1]

    def set_camera(self, viewmat: Any, K: Any = None) -> None:
        """Moves the browser's camera to ``viewmat`` [4,4] (and ``K`` [3,3], default: the current one)."""
        self.camera = camera_dict(viewmat, self.K if K is None else K, self.width, self.height)

    def show_view(self, index: int) -> None:
        """Moves the camera to the scene's view ``index`` (the views given at construction)."""
        matches = [v for v in self.views if v["index"] == index]
        if not matches:
            raise ValueError(f"no view {index} (the viewer has {len(self.views)} scene views)")
        v = matches[0]
        self.camera = {k: v[k] for k in ("viewmat", "K", "width", "height")}

    def update(self, source: Any, *, step: int | None = None, psnr: float | None = None) -> None:
        """Replaces the splats (a SplatSet, PLY path or training result), keeping the camera, and shows
        ``step`` and ``psnr`` (dB) when given: for following a training run every few steps."""
        splats = as_splats(source)
        with self.hold_sync():
            self._data = encode_splats(splats, self._encoding)
            self.num_splats = len(splats)
            parts = ([f"step {step}"] if step is not None else []) + (
                [f"PSNR {psnr:.2f} dB"] if psnr is not None else []
            )
            if parts:
                self.status = "  ".join(parts)
