"""What the notebooks show besides figures: links to result files, formatted tables, inline SVG, and
whether a frontend is there to show widgets (:func:`headless`).

Links: JupyterLab resolves a relative link in a cell's output against the folder of the notebook that
shows it and opens the file in a tab with the viewer its type has, or in the text editor, which refuses
a folder ("is a directory") and a binary file ("is not UTF-8 encoded"). So a link is one of three kinds
(:class:`ResultLink`): a file JupyterLab can show (text, images, PDF) gets a plain relative link; any
other file a download link (the ``download`` attribute: JupyterLab lets the browser fetch it from the
server's files URL); an HTML page (the viewer page: its scripts must run) a link to the server's
``files/<path>`` URL in a new browser tab, since JupyterLab's own HTML viewer runs no script until the
user clicks "Trust HTML"; a folder a link to ``lab/tree/<path>`` that points the file browser there.
The last two need the path relative to the Jupyter server's root (:func:`jupyter_server_root`, from
the running server's record); with no server found, a page gets a relative link and the words of what
to click, and a folder is named without a link. A notebook run by hand in
JupyterLab lives in ``notebooks/`` (the kernel's working folder); one run by ``gsworkbench run`` /
papermill is saved in its ``results_dir``. :func:`result_link` takes the notebook's ``results_dir``
parameter to pick the right one; as text (papermill's log, a terminal) a link is the absolute path.
"""

from __future__ import annotations

import codecs
import html
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import numpy as np
import pandas as pd

from gsworkbench.profiling.flamegraph import inline_svg

HEADLESS_ENV = "GSW_HEADLESS"
"""Set to ``1`` in the environment of a kernel that no frontend shows: the headless runner's kernels
(``gsworkbench run``, ``run-all``) and ``make test``'s nbval run."""

# files JupyterLab shows with a viewer of their own though they are not UTF-8 text
VIEWABLE_BINARY_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".pdf"}
LinkKind = Literal["file", "download", "folder", "name", "page"]
PAGE_SUFFIXES = {".html", ".htm"}
TRUST_HINT = "in JupyterLab's HTML viewer, click \"Trust HTML\" in its toolbar so that the page's scripts run"


def headless() -> bool:
    """Whether this kernel runs headless (:data:`HEADLESS_ENV`): nothing would show a widget, and a cell
    that displays one can leave the notebook client waiting for a reply that never comes, so a notebook
    draws its static view instead."""
    return os.environ.get(HEADLESS_ENV, "") not in ("", "0")


@dataclass(frozen=True)
class ResultLink:
    """A link to a file or folder of results. ``kind``: "file" (``href`` relative to the showing
    notebook's folder; JupyterLab opens it in a tab), "download" (the same, downloaded), "folder"
    (``href`` is the server's ``lab/tree/...`` URL and ``tree_path`` the folder relative to the server's
    root, for the file browser), "page" (an HTML page with scripts: ``href`` is the server's ``files/...``
    URL, opened in a new browser tab, or relative with the words of what to click where no server was
    found) or "name" (a folder with no server to link into: shown as text)."""

    path: Path
    href: str
    label: str = ""
    kind: LinkKind = "file"
    tree_path: str = ""

    def _repr_html_(self) -> str:
        prefix = f"{html.escape(self.label)}: " if self.label else ""
        shown, href = html.escape(str(self.path)), html.escape(self.href)
        if self.kind == "name":
            return f"{prefix}<code>{shown}</code> (folder; open it from the file browser)"
        if self.kind == "page":
            if self.href.startswith("/") or "://" in self.href:
                return f"{prefix}<a href='{href}' target='_blank'>{shown}</a> (opens in a new browser tab)"
            return f"{prefix}<a href='{href}' target='_blank'>{shown}</a> ({html.escape(TRUST_HINT)})"
        if self.kind == "download":
            return f"{prefix}<a href='{href}' download>{shown}</a> (download)"
        if self.kind == "folder":
            # in a trusted output the command link turns the file browser to the folder in place; where
            # the attributes are stripped, the URL opens JupyterLab in a new tab at that folder
            args = html.escape(json.dumps({"path": self.tree_path}))
            return (f"{prefix}<a href='{href}' target='_blank' data-commandlinker-command='filebrowser:go-to-path' "
                    f"data-commandlinker-args='{args}'>{shown}</a> (folder)")  # fmt: skip
        return f"{prefix}<a href='{href}' target='_blank'>{shown}</a>"

    def __repr__(self) -> str:
        return f"{self.label}: {self.path}" if self.label else str(self.path)


def link_base(results_dir: str | os.PathLike[str] = "") -> Path:
    """The folder the showing notebook lives in: ``results_dir`` when a runner set it (the executed
    notebook is saved there), else the kernel's working folder (the notebook's own, in JupyterLab)."""
    return Path(results_dir).resolve() if str(results_dir) else Path.cwd().resolve()


@dataclass(frozen=True)
class ServerRoot:
    """A running Jupyter server: the folder it serves (``root_dir``) and its URL prefix (``base_url``,
    ``/`` unless it runs behind a hub or proxy)."""

    root_dir: Path
    base_url: str = "/"


def jupyter_server_root(near: str | os.PathLike[str] | None = None) -> ServerRoot | None:
    """The running Jupyter server whose root holds ``near`` (default: the working folder), from the
    records servers leave in Jupyter's runtime folder; the deepest root when several do. None when
    headless (:func:`headless`), when ``jupyter_server`` is not installed or no such server runs."""
    if headless():
        return None
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:
        return None
    here = Path(near if near is not None else Path.cwd()).resolve()
    found: list[ServerRoot] = []
    try:
        for info in list_running_servers():
            root = Path(info.get("root_dir") or info.get("notebook_dir") or "").expanduser().resolve()
            if str(root) and here.is_relative_to(root):
                found.append(ServerRoot(root, info.get("base_url") or "/"))
    except (OSError, ValueError):
        return None
    return max(found, key=lambda r: len(r.root_dir.parts)) if found else None


def opens_as_text_or_image(path: str | os.PathLike[str], probe_bytes: int = 65536) -> bool:
    """Whether JupyterLab can open the file in a tab: an image or PDF by its suffix, else when its first
    ``probe_bytes`` decode as UTF-8 (a character cut at the probe's end is fine)."""
    p = Path(path)
    if p.suffix.lower() in VIEWABLE_BINARY_SUFFIXES:
        return True
    with p.open("rb") as f:
        head = f.read(probe_bytes)
    if b"\0" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def result_link(
    path: str | os.PathLike[str], results_dir: str | os.PathLike[str] = "", label: str = "",
    server: ServerRoot | None = None,
) -> ResultLink:  # fmt: skip
    """A :class:`ResultLink` to ``path`` for a notebook whose ``results_dir`` parameter is given: a
    link JupyterLab opens (text, images), a download link (other files), for an HTML page a link that
    opens it in a new browser tab with its scripts running, or for a folder a link that points the
    file browser there (``server``: the Jupyter server, default :func:`jupyter_server_root`;
    without one, the folder is named without a link)."""
    target = Path(path).resolve()
    href = Path(os.path.relpath(target, link_base(results_dir))).as_posix()
    if target.is_file() and target.suffix.lower() in PAGE_SUFFIXES:
        server = server if server is not None else jupyter_server_root(target)
        if server is None or not target.is_relative_to(server.root_dir):
            return ResultLink(target, href, label, "page")
        base = server.base_url if server.base_url.endswith("/") else server.base_url + "/"
        return ResultLink(target, f"{base}files/{quote(target.relative_to(server.root_dir).as_posix())}", label, "page")
    if target.is_dir():
        server = server if server is not None else jupyter_server_root(target)
        if server is None or not target.is_relative_to(server.root_dir):
            return ResultLink(target, "", label, "name")
        tree = target.relative_to(server.root_dir).as_posix()
        tree = "" if tree == "." else tree
        base = server.base_url if server.base_url.endswith("/") else server.base_url + "/"
        return ResultLink(target, f"{base}lab/tree/{quote(tree)}", label, "folder", tree)
    if target.is_file() and not opens_as_text_or_image(target):
        return ResultLink(target, href, label, "download")
    return ResultLink(target, href, label)


# ---- metrics -----------------------------------------------------------------------------------

# name -> (what it is, unit, format): the metrics of gsworkbench.train.train's TrainResult
METRICS: dict[str, tuple[str, str, str]] = {
    "psnr_db": ("PSNR, test views (mean)", "dB", "{:.2f}"),
    "ssim": ("SSIM, test views (mean)", "", "{:.4f}"),
    "psnr_background_db": ("PSNR, background only (no SfM point near; mean)", "dB", "{:.2f}"),
    "ssim_background": ("SSIM, background only (mean)", "", "{:.4f}"),
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


def readable_number(value: Any, digits: int = 4) -> str:
    """A number as a table shows it for reading: ``digits`` significant digits, never in exponent form
    (``2509551.0`` -> ``2,509,551``, ``0.0000231`` -> ``0.0000231``); whole numbers of 10,000 or more
    with thousands separators; NaN as an empty string (a table shows NaN as pandas does)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if abs(v) >= 10 ** (digits + 1) or (abs(v) >= 10**digits and v == round(v)):
        return f"{round(v):,}"
    return np.format_float_positional(v, precision=digits, unique=False, fractional=False, trim="-")


class ReadableTable(pd.DataFrame):
    """A table whose floats read as :func:`readable_number` writes them (no ``2.509551e+06``), in the
    notebook's HTML and as text, text cells whole; the values themselves are unchanged."""

    @property
    def _constructor(self) -> type[ReadableTable]:
        return ReadableTable

    def _repr_html_(self) -> str | None:
        with pd.option_context("display.float_format", readable_number, "display.max_colwidth", None):
            return super()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.float_format", readable_number, "display.max_colwidth", None):
            return super().__repr__()


def readable(table: pd.DataFrame) -> ReadableTable:
    """``table`` shown with readable numbers (:class:`ReadableTable`), for a notebook cell's output."""
    return ReadableTable(table)


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
