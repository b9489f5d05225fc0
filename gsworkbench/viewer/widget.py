"""``SplatViewer``: a Jupyter widget (anywidget) that renders splats in the browser with WebGL.

The splats go to the browser as one binary buffer (an Inria PLY by default: float32, every SH
band; or ``.spz``), never as JSON numbers. The camera is the rasterizer's (world-to-camera viewmat,
OpenCV axes; K in pixels) both ways: set it from Python, move it in the browser (orbit, or fly with
WASD), and read the current one back with :attr:`SplatViewer.camera` to render that very view with
``rasterize``. Constructing and updating the widget never waits for a browser, so notebooks that
show one run headless.

The browser draws only when something changes, so an idle widget costs no CPU. Re-running a notebook
cell closes the viewers that the cell's previous run made (each holds its splats in the kernel and a
WebGL context in the browser); ``close()`` frees one by hand.
"""

from __future__ import annotations

import weakref
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
    camera_up,
    checked_rgb,
    checked_up,
    default_camera,
    encode_splats,
    scene_center,
    scene_up,
    scene_views,
)


def current_cell() -> tuple[str, str] | None:
    """(the notebook cell's id, the id of this run of it) for code running in a Jupyter cell, from the
    execute request's metadata (JupyterLab and Notebook 7 send ``cellId``); None elsewhere."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent()
    except Exception:  # an older ipykernel, or no request under way
        return None
    cell = (parent or {}).get("metadata", {}).get("cellId")
    run = (parent or {}).get("header", {}).get("msg_id")
    return (str(cell), str(run)) if cell and run else None


# cell id -> (the run that made them, the viewers it made): a cell's next run closes its last run's
_CELL_VIEWERS: dict[str, tuple[str, list[weakref.ref]]] = {}


def adopt(widget: anywidget.AnyWidget, cell: tuple[str, str] | None) -> None:
    """Records ``widget`` as made by ``cell`` (see :func:`current_cell`), closing the widgets that the
    cell's previous run made; the widgets of one run all stay."""
    if cell is None:
        return
    cell_id, run = cell
    last_run, refs = _CELL_VIEWERS.get(cell_id, (run, []))
    if last_run != run:
        for ref in refs:
            old = ref()
            if old is not None:
                old.close()
        refs = []
    refs.append(weakref.ref(widget))
    _CELL_VIEWERS[cell_id] = (run, refs)


_MISSING_ESM = "export default { render({ el }) { el.textContent = " + repr(BUNDLE_MISSING).replace("'", '"') + "; } };"


class SplatViewer(anywidget.AnyWidget):
    """An interactive splat viewer in the notebook.

    Args:
        source: a SplatSet, a splat file (``.ply``, ``.spz``, ``.splat``, or a run folder holding
            ``splats.ply``), or a training result (a TrainResult, or a Trainer).
        scene: a Scene: its train and test views become the view menu, the first test view (else the
            first view) the initial camera, unless ``viewmat``/``K`` are given, its background the
            background, and its cameras' mean up direction the axis the orbit turns about.
        viewmat [4,4], K [3,3]: the initial camera (default: the scene's view, else a view of the whole
            set); width, height: the image K refers to, in pixels (default: the scene's image size,
            else 960 x 540). The canvas spans the notebook's output width at that aspect ratio (its
            height can be dragged) and shows that image scaled to fit, centred; the camera read back
            is still the one for a width x height image.
        background: RGB in [0, 1] (default: the scene's, else black). up: the world's up axis [3], which
            a horizontal drag orbits about (default: the scene's; else the given camera's up; else +z,
            the axis the default view is upright about). encoding: "ply" (lossless) or "spz" (about six
            times smaller at SH degree 3).

    Re-running the cell that made a viewer closes it (and frees its splats); ``close()`` does so by hand.
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
    up = traitlets.List(traitlets.Float(), [0.0, 0.0, 1.0]).tag(sync=True)
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
        background: tuple[float, float, float] | None = None,
        up: Any = None,
        encoding: str = "ply",
    ) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
        splats = as_splats(source)
        views = scene_views(scene) if scene is not None else []
        if width is None or height is None:
            width, height = (scene.width, scene.height) if scene is not None else DEFAULT_SIZE
        if up is None:
            up = scene_up(scene) if scene is not None else camera_up(viewmat) if viewmat is not None else [0, 0, 1]
        if viewmat is None or K is None:
            if scene is not None:
                i = int(scene.test_ids[0]) if len(scene.test_ids) else 0
                sv, sk = scene.viewmats[i], scene.Ks[i]
            else:
                sv, sk = default_camera(splats, width, height)
            viewmat, K = sv if viewmat is None else viewmat, sk if K is None else K
        if background is None:
            background = tuple(getattr(scene, "background", (0.0, 0.0, 0.0))) if scene is not None else (0.0, 0.0, 0.0)
        rgb = checked_rgb(background)
        self._encoding = encoding
        super().__init__(
            width=int(width), height=int(height), camera=camera_dict(viewmat, K, width, height), views=views,
            background=rgb, center=scene_center(splats), up=checked_up(up), file_type=encoding,
            num_splats=len(splats), _data=encode_splats(splats, encoding),
        )  # fmt: skip
        adopt(self, current_cell())

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
