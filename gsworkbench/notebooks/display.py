"""What the notebooks show besides figures: links to result files, formatted metric tables, inline SVG,
and whether a frontend is there to show widgets (:func:`headless`).

Links: JupyterLab resolves a relative link in a cell's output against the folder of the notebook that
shows it, and opens the file (or the folder) in a tab. A notebook run by hand in JupyterLab lives in
``notebooks/`` (the kernel's working folder); one run by ``gsworkbench run`` / papermill is saved in its
``results_dir``. :func:`result_link` takes the notebook's ``results_dir`` parameter to pick the right one;
as text (papermill's log, a terminal) a link is the absolute path.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

HEADLESS_ENV = "GSW_HEADLESS"
"""Set to ``1`` in the environment of a kernel that no frontend shows: the headless runner's kernels
(``gsworkbench run``, ``run-all``) and ``make test``'s nbval run."""


def headless() -> bool:
    """Whether this kernel runs headless (:data:`HEADLESS_ENV`): nothing would show a widget, and a cell
    that displays one can leave the notebook client waiting for a reply that never comes, so a notebook
    draws its static view instead."""
    return os.environ.get(HEADLESS_ENV, "") not in ("", "0")


@dataclass(frozen=True)
class ResultLink:
    """A link to a file or folder of results; ``href`` is relative to the showing notebook's folder."""

    path: Path
    href: str
    label: str = ""

    def _repr_html_(self) -> str:
        prefix = f"{html.escape(self.label)}: " if self.label else ""
        return f"{prefix}<a href='{html.escape(self.href)}' target='_blank'>{html.escape(str(self.path))}</a>"

    def __repr__(self) -> str:
        return f"{self.label}: {self.path}" if self.label else str(self.path)


def link_base(results_dir: str | os.PathLike[str] = "") -> Path:
    """The folder the showing notebook lives in: ``results_dir`` when a runner set it (the executed
    notebook is saved there), else the kernel's working folder (the notebook's own, in JupyterLab)."""
    return Path(results_dir).resolve() if str(results_dir) else Path.cwd().resolve()


def result_link(path: str | os.PathLike[str], results_dir: str | os.PathLike[str] = "", label: str = "") -> ResultLink:
    """A :class:`ResultLink` to ``path`` for a notebook whose ``results_dir`` parameter is given."""
    target = Path(path).resolve()
    href = Path(os.path.relpath(target, link_base(results_dir))).as_posix()
    if target.is_dir():
        href = href.rstrip("/") + "/"
    return ResultLink(target, href, label)


# ---- metrics -----------------------------------------------------------------------------------

# name -> (what it is, unit, format): the metrics of gsworkbench.train.train's TrainResult
METRICS: dict[str, tuple[str, str, str]] = {
    "psnr_db": ("PSNR, test views (mean)", "dB", "{:.2f}"),
    "ssim": ("SSIM, test views (mean)", "", "{:.4f}"),
    "lpips": ("LPIPS", "", "{}"),
    "num_gaussians": ("Gaussians at the end", "", "{:,}"),
    "iterations": ("training steps", "", "{:,}"),
    "train_seconds": ("training time", "s", "{:.1f}"),
    "median_step_ms": ("median step time", "ms", "{:.2f}"),
}


def _format_value(value: Any, fmt: str | None) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    if fmt is not None:
        try:
            return fmt.format(value)
        except (TypeError, ValueError):
            pass
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class FullTextTable(pd.DataFrame):
    """A table whose cells are shown whole: pandas cuts text cells to ``display.max_colwidth`` (50)
    characters, which cut a note such as the LPIPS row's mid-sentence."""

    @property
    def _constructor(self) -> type[FullTextTable]:
        return FullTextTable

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.max_colwidth", None):
            return super()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            return super().__repr__()


def metrics_table(metrics: Mapping[str, Any], names: Mapping[str, tuple[str, str, str]] = METRICS) -> pd.DataFrame:
    """A metrics dict as a table: one row per metric (the known ones first, in ``names`` order), with
    its description, its value formatted for reading (as text) and its unit. Unknown keys keep their
    name; floats get 4 significant digits; a NaN reads "n/a". Text values are shown whole
    (:class:`FullTextTable`)."""
    keys = [k for k in names if k in metrics] + [k for k in metrics if k not in names]
    rows = []
    for key in keys:
        what, unit, fmt = names.get(key, (key, "", None))  # type: ignore[arg-type]
        rows.append({"metric": what, "value": _format_value(metrics[key], fmt), "unit": unit})
    return FullTextTable(rows, columns=["metric", "value", "unit"]).set_index("metric")


# ---- SVG ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InlineSVG:
    """An SVG drawn inline in the output (not as an ``<img>``, so its tooltips and script work), as wide
    as the output area, with a link to its file underneath."""

    svg: str
    link: ResultLink | None = None

    def _repr_html_(self) -> str:
        from gsworkbench.profiling.flamegraph import inline_svg

        parts = [f"<div style='width: 100%; overflow: hidden'>{inline_svg(self.svg)}</div>"]
        if self.link is not None:
            parts.append(f"<div style='margin-top: 4px'>{self.link._repr_html_()}</div>")
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"<SVG, {len(self.svg)} characters>" + (f" {self.link!r}" if self.link is not None else "")


def svg_view(
    path: str | os.PathLike[str], results_dir: str | os.PathLike[str] = "", svg: str | None = None
) -> InlineSVG:
    """The SVG file at ``path`` (or the text ``svg`` that was written there) inline, with its link."""
    text = Path(path).read_text(encoding="utf-8") if svg is None else svg
    return InlineSVG(text, result_link(path, results_dir, "file"))
