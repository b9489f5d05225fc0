"""Scaling on log-log axes with a fitted exponent, checked against the one the work implies.

``fit_exponent(x, y)`` fits log y = k log x + c by least squares and returns k with its standard error.
A :class:`ScalingSpec` names a suite's columns (x, y, the series to fit separately, a row filter) and
the exponent expected when the work grows like the size (for example -1 for frames per second against
Gaussian count: twice the Gaussians, twice the work, half the FPS). :func:`plot_scaling` draws one
spec and notes where the fitted exponent departs from the expected one by more than ``tolerance``:
a steeper growth of time than the work ("super-linear" when the work is linear) or a flatter one
(fixed overheads still dominate at these sizes, or the hardware is not yet saturated).

Rows that differ in a variant column (``compile``: eager or a torch.compile mode; ``scene``: the splat
set a case renders or trains, e.g. ``surface``, ``dense``, ``random-init`` in the train and render
suites) are separate series wherever the table has more than one variant, so compiled and eager
timings, or different scenes, are never fitted as one. A series measured at one size only is shown
unfitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


def fit_exponent(x: Any, y: Any) -> tuple[float, float]:
    """Slope k of log y against log x (least squares) and its standard error; needs >= 2 distinct x > 0."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    lx, ly = np.log(x[keep]), np.log(y[keep])
    if np.unique(lx).size < 2:
        raise ValueError("fit_exponent needs at least two distinct positive sizes")
    A = np.stack([lx, np.ones_like(lx)], axis=1)
    coef, *_ = np.linalg.lstsq(A, ly, rcond=None)
    dof = lx.size - 2
    if dof <= 0:
        return float(coef[0]), float("nan")
    resid = ly - A @ coef
    se = np.sqrt(resid @ resid / dof / ((lx - lx.mean()) ** 2).sum())
    return float(coef[0]), float(se)


@dataclass
class ScalingSpec:
    """What to plot from a suite's table: y against x, one fitted line per ``series`` combination."""

    title: str
    x: str
    y: str
    expected: float
    xlabel: str
    ylabel: str
    series: list[str] = field(default_factory=list)
    where: dict[str, Any] = field(default_factory=dict)
    x_of: Any = None  # optional fn(df) -> x values (e.g. pixels = width * height)
    rate: bool = True  # y is a rate (FPS, items/s); False: y is a time


SPECS: dict[str, list[ScalingSpec]] = {
    "render": [
        ScalingSpec("render FPS against Gaussian count", "num", "fps", -1.0, "Gaussians", "frames per second",
                    ["backend", "sh_degree", "width"], {"stage": "forward"}),  # fmt: skip
        ScalingSpec("render FPS against resolution", "pixels", "fps", -1.0, "pixels (width x height)",
                    "frames per second", ["backend", "sh_degree", "num"], {"stage": "forward"},
                    lambda df: df.width * df.height),  # fmt: skip
    ],
    "transforms": [
        ScalingSpec("transform throughput against batch size", "n", "gaussians_per_s", 0.0, "splats per call",
                    "Gaussians per second", ["backend", "sh_degree", "out"], {"kind": "similarity"}),  # fmt: skip
    ],
    "train": [
        ScalingSpec("training step time against Gaussian count", "num", "ms_per_step", 1.0, "Gaussians",
                    "ms per training step", ["backend", "width", "height"], {}, rate=False),  # fmt: skip
        ScalingSpec("training step time against resolution", "pixels", "ms_per_step", 1.0, "pixels (width x height)",
                    "ms per training step", ["backend", "num"], {}, lambda df: df.width * df.height,
                    rate=False),  # fmt: skip
    ],
    "field": [
        ScalingSpec("field throughput against size", "pairs", "pairs_per_s", 0.0, "points x Gaussians",
                    "pairs per second", ["backend", "covariance", "mode"], {}, lambda df: df.N * df.B),  # fmt: skip
    ],
}


VARIANT_COLUMNS = ("compile", "scene")


def series_columns(df: pd.DataFrame, spec: ScalingSpec) -> list[str]:
    """The columns that tell ``spec``'s series apart in ``df``: the spec's own, plus each variant column
    (:data:`VARIANT_COLUMNS`) that takes more than one value there."""
    cols = list(spec.series)
    cols += [c for c in VARIANT_COLUMNS if c in df.columns and c not in cols and df[c].nunique(dropna=False) > 1]
    return cols


def _selected(df: pd.DataFrame, spec: ScalingSpec) -> pd.DataFrame:
    d = df.copy()
    for k, v in spec.where.items():
        d = d[d[k] == v]
    if spec.x_of is not None:
        d[spec.x] = spec.x_of(d)
    return d


def _groups(d: pd.DataFrame, cols: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per series, the label ``col=value, ...`` ("all" with no series columns)."""
    if not cols:
        return [("all", d)]
    out = []
    for key, g in d.groupby(cols, dropna=False):
        values = key if isinstance(key, tuple) else (key,)
        out.append((", ".join(f"{c}={v}" for c, v in zip(cols, values)), g))
    return out


def scaling_fits(df: pd.DataFrame, spec: ScalingSpec, tolerance: float = 0.15) -> pd.DataFrame:
    """One row per series: its fitted exponent, standard error, sizes and a note on the departure."""
    d = _selected(df, spec)
    d = d[d[spec.y].notna() & (d[spec.y] > 0)]
    rows = []
    for label, g in _groups(d, series_columns(d, spec)):
        if g[spec.x].nunique() < 2:
            continue
        k, se = fit_exponent(g[spec.x], g[spec.y])
        note = departure_note(k, spec.expected, tolerance, spec.rate)
        rows.append({"series": label, "exponent": k, "stderr": se, "expected": spec.expected,
                     "sizes": int(g[spec.x].nunique()), "note": note})  # fmt: skip
    return pd.DataFrame(rows, columns=["series", "exponent", "stderr", "expected", "sizes", "note"])


def departure_note(exponent: float, expected: float, tolerance: float = 0.15, rate: bool = True) -> str:
    """'' when within ``tolerance`` of the expected exponent; otherwise what the departure means.

    For a rate (``rate=True``) an exponent below the expected one means the time grows faster than the
    work; for a time, an exponent above it does."""
    d = exponent - expected
    if abs(d) <= tolerance:
        return ""
    if (d < 0) == rate:
        return f"cost grows faster than the work (exponent {exponent:+.2f}, expected {expected:+.2f}): super-linear"
    return f"cost grows slower than the work (exponent {exponent:+.2f}, expected {expected:+.2f}): overheads dominate"


def plot_scaling(ax: Any, df: pd.DataFrame, spec: ScalingSpec, tolerance: float = 0.15) -> pd.DataFrame:
    """Draws ``spec`` on ``ax`` (log-log, one line per series, exponent in its label; a series measured
    at one size only is a marker, unfitted); returns the fits."""
    d = _selected(df, spec)
    fits = scaling_fits(df, spec, tolerance).set_index("series")
    d = d[d[spec.y].notna() & (d[spec.y] > 0)]
    for label, g in _groups(d, series_columns(d, spec)):
        g = g.sort_values(spec.x)
        if label not in fits.index:  # one size: a marker, no line and no fit
            ax.plot(g[spec.x], g[spec.y], "D", label=f"{label}: one size, no fit")
            continue
        fit = fits.loc[label]
        flag = " (!)" if fit.note else ""
        ax.plot(g[spec.x], g[spec.y], "o-", label=f"{label}: k={fit.exponent:+.2f}{flag}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(spec.xlabel)
    ax.set_ylabel(spec.ylabel)
    ax.set_title(f"{spec.title}\nexpected exponent {spec.expected:+g}; (!) departs by > {tolerance:g}", fontsize=9)
    if ax.lines:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fits.reset_index()


def fit_table(fits: pd.DataFrame) -> Any:
    """The fits of :func:`scaling_fits` styled for a notebook: signed exponents to two decimals, the
    ``note`` left-aligned on one line (the table scrolls sideways rather than wrap it), no index."""
    styler = fits.style.format({"exponent": "{:+.2f}", "stderr": "{:.2f}", "expected": "{:+g}"}, na_rep="")
    return styler.hide(axis="index").set_properties(subset=["note"], **{"text-align": "left", "white-space": "nowrap"})
