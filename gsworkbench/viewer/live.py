"""A splat viewer that follows a training run: the ``watch`` callback of :func:`gsworkbench.train.train`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gsworkbench.viewer.widget import SplatViewer


class LiveViewer:
    """``train(scene, cfg, watch=LiveViewer(scene))``: at its first call it shows a :class:`SplatViewer`
    of the run's splats (``display``, the notebook's output), then updates it with the current splats,
    the step and the step's train PSNR (dB). ``viewer`` is the widget once shown."""

    def __init__(self, scene: Any, display: Callable[[Any], object] | None = None, **viewer_options: Any) -> None:
        if display is None:
            from IPython.display import display
        self.scene, self.display, self.options = scene, display, viewer_options
        self.viewer: SplatViewer | None = None

    def __call__(self, trainer: Any) -> None:
        hist = trainer.history
        psnr = float(hist["psnr_db"].iloc[-1]) if len(hist) else None
        if self.viewer is None:
            self.viewer = SplatViewer(trainer, scene=self.scene, **self.options)
            self.display(self.viewer)
        self.viewer.update(trainer, step=trainer.step_index, psnr=psnr)
