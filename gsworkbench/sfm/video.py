"""Frames of a video for reconstruction: sampled evenly, the sharpest of each stretch kept (PyAV).

The video is cut into ``num_frames`` stretches of equal length; from each, the frame with the highest
variance of its Laplacian (a standard sharpness score: motion blur and defocus flatten edges) is kept.
A kept frame whose score is below ``min_sharpness`` x the median of the kept frames' scores is dropped
as blurry: every frame of its stretch was. What was decoded, kept and dropped is returned.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BLUR_RATIO = 0.35  # a kept frame sharper than this share of the median kept frame is not blurry


@dataclass
class VideoFrames:
    """What :func:`extract_frames` did: frames decoded, the names written, the frame indices of those
    written, and the indices dropped as blurry (with their sharpness / median sharpness)."""

    decoded: int
    names: list[str] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    blurry: dict[int, float] = field(default_factory=dict)

    def summary(self) -> str:
        return f"{len(self.names)} frames kept of {self.decoded} decoded" + (
            f", {len(self.blurry)} dropped as blurry" if self.blurry else ""
        )


def sharpness(gray: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian of a grey image [H,W] (any scale): higher is sharper."""
    g = gray.astype(np.float64)
    lap = g[1:-1, :-2] + g[1:-1, 2:] + g[:-2, 1:-1] + g[2:, 1:-1] - 4.0 * g[1:-1, 1:-1]
    return float(lap.var()) if lap.size else 0.0


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
    return result
