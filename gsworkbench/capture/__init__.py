"""Photos or a video to a splat scene you can orbit, in one call: :func:`capture` (poses with
:mod:`gsworkbench.sfm`, training with :mod:`gsworkbench.train`, the viewer page with
:mod:`gsworkbench.viewer`, and a one-page summary); ``gsworkbench capture`` on the command line and
notebook 07 call it."""

from gsworkbench.capture.workflow import CaptureResult, capture

__all__ = ["CaptureResult", "capture"]
