"""Flamegraphs from folded stacks, and the differential flamegraph of two profiles.

Folded stacks: one line per distinct stack, ``root;child;...;leaf count`` (py-spy's ``--format raw``,
Brendan Gregg's ``stackcollapse`` output). A flamegraph draws each frame as a box whose width is its
share of the samples (inclusive: the frame and everything it calls), children on top of their callers.

The differential flamegraph (the ``difffolded`` idea of the FlameGraph tools) draws the AFTER profile
and colours each frame by the change of its share, ``after share - before share`` of the same call path
(red: a larger share of the time after, blue: smaller, white: unchanged). Shares, not sample counts,
are compared, so two profiles of different length compare. Line numbers are dropped from the labels
before comparing (``strip_lines``), so a frame whose code moved by a few lines still matches.

Each box carries its tooltip (``<title>``, shown on hover) and its position (``data-x``, ``data-w``,
``data-d``: x, width and depth in SVG units; ``data-n``: the full name where the label is cut). A small
script in the SVG zooms on a click: the clicked frame and its callees fill the width, its callers stay
as full-width bars below, a click on ``all`` (or a caller) zooms back out. It runs where the SVG is a
document of its own (a browser tab) or inline in a page (:func:`inline_svg`, what notebook 04 shows);
an ``<img>`` shows the graph without tooltips or zoom.
"""

from __future__ import annotations

import html
import os
import re
import string
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gsworkbench.core.atomic import atomic_write_text

WIDTH_PX = 1200
ROW_PX = 16
FONT_PX = 11
CHAR_PX = 6.6
MARGIN_PX = 10
_LINE = re.compile(r":\d+\)$")
_ROOT_SIZE = re.compile(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"')


def read_folded(path: str | os.PathLike[str]) -> Counter[str]:
    """Folded stacks from a file; ValueError naming the file and line if one is malformed."""
    counts: Counter[str] = Counter()
    for k, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            raise ValueError(f"{path}:{k}: not a folded stack line ('frame;frame;... count'): {line[:80]!r}")
        counts[stack] += int(n)
    return counts


def write_folded(path: str | os.PathLike[str], counts: Mapping[str, int]) -> Path:
    """Writes folded stacks (most samples first), atomically."""
    lines = [f"{s} {n}" for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n > 0]
    return atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def strip_line_numbers(counts: Mapping[str, int]) -> Counter[str]:
    """The same stacks with ``(file:123)`` shortened to ``(file)`` in every frame (then merged)."""
    out: Counter[str] = Counter()
    for stack, n in counts.items():
        out[";".join(_LINE.sub(")", f) for f in stack.split(";"))] += n
    return out


@dataclass
class Node:
    """A frame on one call path: inclusive sample count and its callees."""

    name: str
    count: int = 0
    children: dict[str, Node] = field(default_factory=dict)


def build_tree(counts: Mapping[str, int]) -> Node:
    """The call tree of folded stacks under a root ``all``."""
    root = Node("all")
    for stack, n in counts.items():
        root.count += n
        node = root
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, Node(frame))
            node.count += n
    return root


def _path_counts(counts: Mapping[str, int]) -> Counter[tuple[str, ...]]:
    """Inclusive samples of every call path (tuple of frames from the root)."""
    out: Counter[tuple[str, ...]] = Counter()
    for stack, n in counts.items():
        frames = tuple(stack.split(";"))
        for k in range(1, len(frames) + 1):
            out[frames[:k]] += n
    return out


def frame_shares(counts: Mapping[str, int]) -> pd.DataFrame:
    """Per frame label, over all its call paths: inclusive share (samples with the frame anywhere on
    the stack) and self share (samples with it on top), of all samples."""
    total = sum(counts.values()) or 1
    incl: Counter[str] = Counter()
    self_: Counter[str] = Counter()
    for stack, n in counts.items():
        frames = stack.split(";")
        for f in set(frames):
            incl[f] += n
        self_[frames[-1]] += n
    return pd.DataFrame(
        {"frame": list(incl), "inclusive": [incl[f] / total for f in incl], "self": [self_[f] / total for f in incl]}
    )


def frame_changes(before: Mapping[str, int], after: Mapping[str, int], strip_lines: bool = True) -> pd.DataFrame:
    """Per frame label: inclusive and self share before and after and the change (after - before),
    sorted by the largest absolute change of the inclusive share."""
    if strip_lines:
        before, after = strip_line_numbers(before), strip_line_numbers(after)
    b = frame_shares(before).set_index("frame")
    a = frame_shares(after).set_index("frame")
    df = b.merge(a, how="outer", left_index=True, right_index=True, suffixes=("_before", "_after")).fillna(0.0)
    df["inclusive_change"] = df["inclusive_after"] - df["inclusive_before"]
    df["self_change"] = df["self_after"] - df["self_before"]
    df = df.reset_index().rename(columns={"index": "frame"})
    order = df["inclusive_change"].abs().sort_values(ascending=False, kind="stable").index
    return df.loc[order].reset_index(drop=True)


# ---- SVG ---------------------------------------------------------------------------------------


def _is_native(name: str) -> bool:
    return not re.search(r"\.py(:\d+)?\)$", name) and not name.startswith("<") and "(<" not in name


def _warm_colour(name: str) -> str:
    """Python frames in warm hues, native frames in blue-greys, the extension's frames in aqua."""
    h = zlib.crc32(name.encode()) & 0xFFFF
    if "(csrc/" in name or "(gsworkbench/_C." in name:
        return f"rgb(60,{170 + h % 40},{170 + h % 50})"
    if _is_native(name):
        return f"rgb({120 + h % 40},{140 + h % 40},{180 + h % 50})"
    return f"rgb({205 + h % 50},{100 + h % 110},{40 + h % 40})"


def _diff_colour(delta: float, scale: float) -> str:
    """White at 0, red for a larger share after, blue for a smaller one, saturated at ``scale``."""
    t = 0.0 if scale <= 0 else min(abs(delta) / scale, 1.0)
    lo = int(round(255 * (1 - 0.75 * t)))
    return f"rgb(255,{lo},{lo})" if delta > 0 else f"rgb({lo},{lo},255)"


def _svg(root: Node, title: str, subtitle: str, colour: dict[tuple[str, ...], str], tip: dict[tuple[str, ...], str],
         min_px: float = 0.3) -> str:  # fmt: skip
    boxes: list[tuple[float, int, float, str, tuple[str, ...]]] = []  # x, depth, width, name, path
    total = root.count or 1
    scale = (WIDTH_PX - 2 * MARGIN_PX) / total

    def walk(node: Node, x: float, depth: int, path: tuple[str, ...]) -> int:
        boxes.append((x, depth, node.count * scale, node.name, path))
        deepest = depth
        for child in sorted(node.children.values(), key=lambda c: c.name):
            if child.count * scale >= min_px:
                deepest = max(deepest, walk(child, x, depth + 1, (*path, child.name)))
            x += child.count * scale
        return deepest

    depth = walk(root, float(MARGIN_PX), 0, ())
    top = 50
    height = top + (depth + 1) * ROW_PX + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{height}" '
        f'viewBox="0 0 {WIDTH_PX} {height}" font-family="monospace" font-size="{FONT_PX}">',
        f'<rect x="0" y="0" width="{WIDTH_PX}" height="{height}" fill="#f8f8f8"/>',
        f'<text x="{WIDTH_PX / 2}" y="20" text-anchor="middle" font-size="15">{html.escape(title)}</text>',
        f'<text x="{WIDTH_PX / 2}" y="38" text-anchor="middle" fill="#555">{html.escape(subtitle)}</text>',
    ]
    for x, d, w, name, path in boxes:
        y = height - 30 - (d + 1) * ROW_PX
        fill = colour.get(path, "rgb(230,230,230)") if path else "rgb(200,200,200)"
        label = name if path else "all"
        text = _fit_label(label, w)
        full = f' data-n="{html.escape(label)}"' if text != label else ""
        out.append(f'<g class="fg-f" data-x="{x:.2f}" data-w="{w:.2f}" data-d="{d}"{full}>'
                   f"<title>{html.escape(tip.get(path, label))}</title>")  # fmt: skip
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.3, 0.1):.2f}" height="{ROW_PX - 1}" fill="{fill}" '
                   'rx="2"/>')  # fmt: skip
        out.append(f'<text x="{x + 3:.2f}" y="{y + ROW_PX - 4}">{html.escape(text)}</text></g>')
    out.append(f"<script><![CDATA[{_ZOOM_JS}]]></script>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _fit_label(label: str, width: float) -> str:
    """The label cut to what fits a box ``width`` px wide ('' when not even 3 characters fit)."""
    chars = int((width - 6) / CHAR_PX)
    if chars < 3:
        return ""
    return label if len(label) <= chars else label[: chars - 2] + ".."


# Click to zoom (see the module docstring). Finds its own <svg> through document.currentScript, so
# several graphs on one page zoom independently; the label cut mirrors _fit_label.
_ZOOM_JS = string.Template("""
(function () {
  var svg = document.currentScript && document.currentScript.closest("svg");
  if (!svg) { return; }
  var W = $width, M = $margin, CH = $char;
  var frames = Array.prototype.slice.call(svg.querySelectorAll("g.fg-f"));
  function fit(label, w) {
    var n = Math.floor((w - 6) / CH);
    return n < 3 ? "" : (label.length <= n ? label : label.slice(0, n - 2) + "..");
  }
  function place(g, x, w) {
    var r = g.querySelector("rect"), t = g.querySelector("text");
    r.setAttribute("x", x.toFixed(2));
    r.setAttribute("width", Math.max(w - 0.3, 0.1).toFixed(2));
    t.setAttribute("x", (x + 3).toFixed(2));
    t.textContent = fit(g.getAttribute("data-n") || g.__label, w);
  }
  frames.forEach(function (g) {
    g.__label = g.querySelector("text").textContent;
    g.style.cursor = "pointer";
  });
  function zoom(target) {
    var x0 = +target.getAttribute("data-x"), w0 = +target.getAttribute("data-w");
    var d0 = +target.getAttribute("data-d"), s = (W - 2 * M) / w0, eps = 1e-3;
    frames.forEach(function (g) {
      var x = +g.getAttribute("data-x"), w = +g.getAttribute("data-w"), d = +g.getAttribute("data-d");
      var inside = x >= x0 - eps && x + w <= x0 + w0 + eps;
      var caller = d < d0 && x <= x0 + eps && x + w >= x0 + w0 - eps;
      g.style.display = (d >= d0 && inside) || caller ? "" : "none";
      g.style.opacity = caller && d0 > 0 ? "0.6" : "";
      if (caller) { place(g, M, W - 2 * M); } else if (inside) { place(g, M + (x - x0) * s, w * s); }
    });
  }
  svg.addEventListener("click", function (e) {
    var g = e.target.closest && e.target.closest("g.fg-f");
    if (g) { zoom(g); }
  });
})();
""").substitute(width=WIDTH_PX, margin=MARGIN_PX, char=CHAR_PX)


def inline_svg(svg: str) -> str:
    """The SVG text to place inline in an HTML page (a notebook output): as wide as the page, the height
    following from the ``viewBox``, the tooltips and the zoom script kept."""
    return _ROOT_SIZE.sub(r'<svg \1width="100%" style="height: auto; max-width: 100%"', svg, count=1)


def flamegraph_svg(counts: Mapping[str, int], title: str = "flamegraph", subtitle: str = "") -> str:
    """The SVG flamegraph of folded stacks (root at the bottom); each box's tooltip gives its samples
    and share. Python frames warm, native frames blue-grey, the extension's C++ frames aqua."""
    root = build_tree(counts)
    total = root.count or 1
    colour: dict[tuple[str, ...], str] = {}
    tip: dict[tuple[str, ...], str] = {(): f"all: {root.count} samples"}

    def walk(node: Node, path: tuple[str, ...]) -> None:
        for child in node.children.values():
            p = (*path, child.name)
            colour[p] = _warm_colour(child.name)
            tip[p] = f"{child.name}: {child.count} samples, {100 * child.count / total:.2f}%"
            walk(child, p)

    walk(root, ())
    sub = (
        subtitle
        or f"{root.count} samples; width = share of samples; aqua = gsworkbench C++ (csrc/), blue-grey = other native"
    )
    return _svg(root, title, sub, colour, tip)


def diff_flamegraph_svg(
    before: Mapping[str, int], after: Mapping[str, int], title: str = "differential flamegraph",
    strip_lines: bool = True,
) -> str:  # fmt: skip
    """The AFTER profile's flamegraph coloured by each call path's change of inclusive share
    (red: more, blue: less; saturated at the largest change). Paths only in BEFORE are not drawn
    (they have no width after); :func:`frame_changes` lists them."""
    if strip_lines:
        before, after = strip_line_numbers(before), strip_line_numbers(after)
    tb, ta = sum(before.values()), sum(after.values())
    if ta == 0:
        raise ValueError("the AFTER profile has no samples: nothing to draw")
    pb, pa = _path_counts(before), _path_counts(after)
    delta = {p: n / ta - (pb.get(p, 0) / tb if tb else 0.0) for p, n in pa.items()}
    scale = max((abs(v) for v in delta.values()), default=0.0)
    colour = {p: _diff_colour(d, scale) for p, d in delta.items()}
    tip = {
        p: f"{p[-1]}: {100 * (pb.get(p, 0) / tb if tb else 0):.2f}% -> {100 * pa[p] / ta:.2f}% ({100 * d:+.2f} points)"
        for p, d in delta.items()
    }
    tip[()] = f"all: {tb} -> {ta} samples"
    sub = f"width: share of AFTER's {ta} samples; colour: change of share vs BEFORE ({tb} samples), red = more, " \
          f"blue = less, full colour = {100 * scale:.1f} points"  # fmt: skip
    return _svg(build_tree(after), title, sub, colour, tip)
