"""What every saved figure shares: the footer with the machine and commit (:func:`add_footer`, the one
place that writes it), the atomic PNG save that adds it (:func:`save_figure`), and the stage names and
colours that the rasterizer's, training's and profiling's figures use alike.

Figures themselves live beside the capability they draw (``splat/plots.py``, ``train/plots.py``, ...).
Axes carry names with units, images carry colorbars, legends sit outside the data.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from gsworkbench.core.atomic import atomic_write_bytes
from gsworkbench.core.provenance import machine_summary

FOOTER_LABEL = "gsworkbench-footer"
# Display names of the rasterizer's stages and of a training step's (gsworkbench.train.timers.STAGES).
STAGE_NAMES = {"prepare": "prepare (view, target, activations)", "project": "projection",
               "sh": "SH to colour", "isect": "tile intersection", "rasterize": "rasterize (forward)",
               "loss": "loss (L1 + SSIM)", "backward": "backward", "optimizer": "Adam step",
               "densify": "densification"}  # fmt: skip


def stage_colors(stages: list[str], other: str | None = "other") -> dict[str, Any]:
    """A distinct, non-grey colour per stage (tab20's dark shades first, then its light ones); the
    ``other`` stage (time no stage covers) is grey."""
    import matplotlib.pyplot as plt

    tab20 = plt.get_cmap("tab20").colors
    order = [i for i in [*range(0, 20, 2), *range(1, 20, 2)] if i not in (14, 15)]  # 14, 15: greys
    palette = [tab20[i] for i in order]
    out = {s: palette[k % len(palette)] for k, s in enumerate(s for s in stages if s != other)}
    if other is not None:
        out[other] = (0.7, 0.7, 0.7)
    return out


def add_footer(fig: Any, device: str = "cpu", text: str | None = None) -> None:
    """Writes the machine and commit (:func:`gsworkbench.core.provenance.machine_summary`, or ``text``) under
    ``fig``; once."""
    if any(t.get_label() == FOOTER_LABEL for t in fig.texts):
        return
    text = machine_summary(device) if text is None else text
    fig.text(0.0, -0.01, text, fontsize=7, color="0.35", ha="left", va="top", label=FOOTER_LABEL)


def save_figure(path: str | os.PathLike[str], fig: Any, dpi: int = 110, device: str = "cpu") -> Path:
    """Atomically saves a matplotlib figure as PNG, with the machine and commit in a footer
    (:func:`add_footer`; ``device`` says whether to name the CPU or the GPU)."""
    add_footer(fig, device)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return atomic_write_bytes(path, buf.getvalue())
