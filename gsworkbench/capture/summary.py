"""The one-page summary of a capture (``summary.html``): what a user checks before trusting the splats.
Everything is inside the page (figures as PNG data), so it opens anywhere with no server."""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.core.figures import add_footer
from gsworkbench.core.provenance import machine_summary
from gsworkbench.sfm.sfm_report import format_report
from gsworkbench.train.plots import training_curves

MAX_VIEWS = 4  # held-out photos shown (photo | render | error)
# metrics.json key -> (label, format)
SHOWN_METRICS = {"psnr_db": ("PSNR, held-out photos (mean)", "{:.2f} dB"), "ssim": ("SSIM (mean)", "{:.4f}"),
                 "psnr_background_db": ("PSNR, background only (no SfM point near)", "{:.2f} dB"),
                 "ssim_background": ("SSIM, background only", "{:.4f}"),
                 "num_gaussians": ("Gaussians", "{:,}"), "iterations": ("training steps", "{:,}")}  # fmt: skip


def _png_data(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _figure_png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    add_footer(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def summary_html(
    report: Mapping[str, Any],
    history: pd.DataFrame,
    evaluation: pd.DataFrame,
    metrics: Mapping[str, Any],
    test_images: Sequence[Path],
    seconds: Mapping[str, float],
    viewer: Path | None,
) -> str:
    """The page's text: the poses report, minutes per stage, the held-out metrics, the training curve
    and up to :data:`MAX_VIEWS` held-out photos (photo | render | error x 4)."""
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td>{html.escape(fmt.format(metrics[k]))}</td></tr>"
        for k, (label, fmt) in SHOWN_METRICS.items()
        if isinstance(metrics.get(k), (int, float)) and math.isfinite(float(metrics[k]))
    )
    minutes = "".join(f"<tr><td>{html.escape(k)}</td><td>{v / 60:.1f} min</td></tr>" for k, v in seconds.items())
    total = sum(seconds.values()) / 60
    curve = _png_data(_figure_png(training_curves(history))) if len(history) else ""
    views = "".join(
        f"<figure><img src='{_png_data(p.read_bytes())}' alt='{html.escape(p.name)}'>"
        f"<figcaption>{html.escape(p.stem)}: held-out photo | render | error x 4</figcaption></figure>"
        for p in list(test_images)[:MAX_VIEWS]
    )
    link = ""
    if viewer is not None:
        name = html.escape(viewer.name)
        link = f"<p><a href='{name}'>Open the splats in the viewer</a> (<code>{name}</code>, beside this page).</p>"
    per_view = html.escape(evaluation.to_string(index=False)) if len(evaluation) else "(no held-out photos)"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gsworkbench capture</title>
<style>body{{font:14px sans-serif;max-width:1100px;margin:1em auto;padding:0 1em}} td{{padding:2px 12px 2px 0}}
pre{{background:#f4f4f4;padding:8px;overflow-x:auto}} img{{max-width:100%}} figure{{margin:0 0 1em 0}}
footer{{color:#666;font-size:12px;margin-top:2em}}</style></head><body>
<h1>Capture summary</h1>
{link}
<h2>Held-out photos</h2><table>{rows}</table>
<h2>Minutes per stage</h2><table>{minutes}<tr><td><b>total</b></td><td><b>{total:.1f} min</b></td></tr></table>
<h2>Poses</h2><pre>{html.escape(format_report(report))}</pre>
<h2>Training</h2>{f"<img src='{curve}' alt='training curves'>" if curve else ""}
<h2>Held-out photo, render, error</h2>{views}
<details><summary>Every held-out photo</summary><pre>{per_view}</pre></details>
<footer>{html.escape(machine_summary("cpu"))}</footer>
</body></html>
"""
