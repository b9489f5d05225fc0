"""Frames of a video for reconstruction: sampled evenly, the sharpest of each stretch kept (PyAV).

The video is cut into ``num_frames`` stretches of equal length; from each, the frame with the highest
variance of its Laplacian (a standard sharpness score: motion blur and defocus flatten edges) is kept.
A kept frame whose score is below ``min_sharpness`` x the median of the kept frames' scores is dropped
as blurry: every frame of its stretch was. What was decoded, kept and dropped is returned.

That rule is relative: a video blurred throughout (a camera never held still) keeps its frames. So each
kept frame is also measured against an absolute floor that neither contrast, exposure nor image size
moves: :func:`motion_blur_ratio`, the detail along the frame's blurriest direction over that along its
sharpest, on the frame brought to :data:`ANALYSIS_SIDE` pixels and lightly smoothed (sensor and
compression noise is fine detail in every direction, which would hide a smear). Motion smears detail
along one direction only; a still frame has about as much in every direction (0.55 to 0.75 on the built-in scenes,
with noise), a smear over 4 % of the frame's width or more brings it under 0.45. Frames under
:data:`MOTION_BLUR_RATIO` are kept (they may be all there is) but counted, and a video most of whose
kept frames are smeared is named in one line (:meth:`VideoFrames.warning`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BLUR_RATIO = 0.35  # a kept frame sharper than this share of the median kept frame is not blurry
MOTION_BLUR_RATIO = 0.5  # a frame with less detail than this along one direction as along another is smeared
ANALYSIS_SIDE = 128  # the long side (pixels) at which motion blur is measured: a smear as a share of the frame
ANALYSIS_SMOOTHING = 0.7  # the Gaussian's sigma (analysis pixels) that takes out noise before measuring
_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))  # (dy, dx): across, down and the two diagonals


@dataclass
class VideoFrames:
    """What :func:`extract_frames` did: frames decoded, the names written, the frame indices of those
    written, the indices dropped as blurry (with their sharpness / median sharpness) and the indices
    of written frames that are motion-blurred (with their :func:`motion_blur_ratio`)."""

    decoded: int
    names: list[str] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    blurry: dict[int, float] = field(default_factory=dict)
    smeared: dict[int, float] = field(default_factory=dict)  # kept frames under MOTION_BLUR_RATIO: their ratio

    def summary(self) -> str:
        return (
            f"{len(self.names)} frames kept of {self.decoded} decoded"
            + (f", {len(self.blurry)} dropped as blurry" if self.blurry else "")
            + (f", {len(self.smeared)} of the kept motion-blurred" if self.smeared else "")
        )

    def warning(self, video: str) -> str | None:
        """One line naming ``video`` when half or more of the kept frames are motion-blurred (None
        otherwise): no stretch of it was filmed holding still, so the poses rest on smeared features."""
        n, kept = len(self.smeared), len(self.names)
        if not kept or 2 * n < kept:
            return None
        which = "no frame is sharp" if n == kept else f"{kept - n} sharp frames"
        return (
            f"video {video}: {n} of {kept} kept frames are motion-blurred ({which}; detail along the motion "
            f"under {MOTION_BLUR_RATIO:.0%} of that across it); the poses will be rough: film slower or in "
            "more light, or give photos"
        )


def sharpness(gray: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian of a grey image [H,W] (any scale): higher is sharper."""
    g = gray.astype(np.float64)
    lap = g[1:-1, :-2] + g[1:-1, 2:] + g[:-2, 1:-1] + g[2:, 1:-1] - 4.0 * g[1:-1, 1:-1]
    return float(lap.var()) if lap.size else 0.0


def directional_detail(gray: np.ndarray) -> np.ndarray:
    """For each of four directions (across, down, the two diagonals), the variance of the grey image's
    [H,W] second difference along it over that of its first difference [4]: the mean squared frequency
    of the detail along that direction (3 for white noise, falling as a blur spreads it), free of the
    image's contrast and exposure."""
    g = gray.astype(np.float64)
    H, W = g.shape
    out = np.zeros(len(_DIRECTIONS))
    if H < 5 or W < 5:
        return out
    core = g[2:-2, 2:-2]
    for k, (dy, dx) in enumerate(_DIRECTIONS):
        ahead = g[2 + dy : H - 2 + dy, 2 + dx : W - 2 + dx]
        behind = g[2 - dy : H - 2 - dy, 2 - dx : W - 2 - dx]
        first = float((ahead - core).var())
        out[k] = float((ahead - 2.0 * core + behind).var()) / first if first > 0 else 0.0
    return out


def motion_blur_ratio(gray: np.ndarray) -> float:
    """The detail (:func:`directional_detail`) along a grey image's [H,W] blurriest direction over that
    along its sharpest, in [0, 1], measured with its long side brought to :data:`ANALYSIS_SIDE` (area
    average) and smoothed by :data:`ANALYSIS_SMOOTHING`: high for a still frame, low where motion
    smeared it one way (1.0 for a flat image: nothing to smear)."""
    from PIL import Image
    from scipy.ndimage import gaussian_filter

    im = Image.fromarray(np.asarray(gray, dtype=np.float32))  # mode "F"
    scale = ANALYSIS_SIDE / max(im.size)
    if scale < 1:
        im = im.resize((max(5, round(im.width * scale)), max(5, round(im.height * scale))), Image.Resampling.BOX)
    d = directional_detail(gaussian_filter(np.asarray(im, dtype=np.float64), ANALYSIS_SMOOTHING))
    return float(d.min() / d.max()) if d.max() > 0 else 1.0


def _open(path: Path):  # noqa: ANN202 (an av container)
    import av

    try:
        container = av.open(str(path))
        stream = container.streams.video[0]
    except (av.error.FFmpegError, IndexError, OSError) as e:
        raise ValueError(f"cannot read video {path}: {e}") from None
    return container, stream


def extract_frames(
    video: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    num_frames: int = 100,
    min_sharpness: float = BLUR_RATIO,
) -> VideoFrames:
    """Writes up to ``num_frames`` sharp frames of ``video`` to ``dest/frame_NNNNN.jpg`` (NNNNN: the
    frame's index in the video). ValueError naming the file when it cannot be decoded or has no frame."""
    import av
    from PIL import Image

    path = Path(video)
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    container, stream = _open(path)
    # the frame count from the header where there is one; else decode once to count
    total = int(stream.frames or 0)
    try:
        if total <= 0:
            total = sum(1 for _ in container.decode(stream))
            container.close()
            container, stream = _open(path)
        if total <= 0:
            raise ValueError(f"video {path} has no frames")
        n = min(num_frames, total)
        edges = np.linspace(0, total, n + 1)
        best: dict[int, tuple[float, int, np.ndarray]] = {}
        decoded = 0
        for i, frame in enumerate(container.decode(stream)):
            decoded += 1
            slot = min(int(np.searchsorted(edges, i, side="right")) - 1, n - 1)
            rgb = frame.to_ndarray(format="rgb24")
            s = sharpness(rgb.mean(axis=2))
            if slot not in best or s > best[slot][0]:
                best[slot] = (s, i, rgb)
    except av.error.FFmpegError as e:
        raise ValueError(f"cannot decode video {path}: {e}") from None
    finally:
        container.close()
    if not best:
        raise ValueError(f"video {path} has no decodable frames")
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    median = float(np.median([b[0] for b in best.values()]))
    result = VideoFrames(decoded=decoded)
    for slot in sorted(best):
        s, i, rgb = best[slot]
        ratio = s / median if median > 0 else 1.0
        if ratio < min_sharpness:
            result.blurry[i] = ratio
            continue
        name = f"frame_{i:05d}.jpg"
        Image.fromarray(rgb).save(out / name, quality=95)
        result.names.append(name)
        result.kept.append(i)
        smear = motion_blur_ratio(rgb.mean(axis=2))
        if smear < MOTION_BLUR_RATIO:
            result.smeared[i] = smear
    return result
