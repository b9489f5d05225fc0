"""``diff(before, after)``: what changed between two profiles of the same workload.

- Stages: median seconds before and after, their ratio, and whether the change stands out from the
  run-to-run noise, judged by the workbench's one rule (:mod:`gsworkbench.bench.significance`, as ``gsworkbench
  compare`` judges): Mann–Whitney U on the repeats' seconds at p < ``alpha`` (0.002), the medians
  differing by at least ``min_change`` (5%), with a bootstrap interval of the ratio. A profile diff adds
  one condition: the difference is at least ``min_share`` (default 1%) of BEFORE's wall time (so a
  microsecond stage's jitter is not news). The test needs 7 repeats on each side to reach 0.002; with
  fewer, a stage reads "too few samples" and the warnings say how many repeats to take.
- Ops: the op table's biggest gains and losses of self time.
- Frames: the change of each frame's share of the py-spy samples, and the differential flamegraph.

Profiles of different workloads or parameters are refused, naming the difference; ``backend`` is the
one parameter that may differ (comparing implementations is what the diff is for). A different
machine, thread count or device gets a warning.
"""

from __future__ import annotations

import math
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.bench import significance
from gsworkbench.bench.compare import environment_warnings
from gsworkbench.core.atomic import atomic_write_text, write_json, write_table
from gsworkbench.core.runs import new_run_dir
from gsworkbench.profiling import flamegraph, stages
from gsworkbench.profiling.run import ProfileRun, load_profile

MAY_DIFFER = ("backend",)  # parameters that two compared profiles may set differently
OP_NAME_WIDTH = 40  # characters of an op's name in the printed table (the csv keeps it whole)
FRAME_NAME_WIDTH = 60
SUMMARY_WIDTH = 100  # characters per line of the printed summary's prose


@dataclass
class ProfileDiff:
    """The comparison of two profiles (see the module docstring); ``frames`` and ``svg`` are None when a
    profile has no py-spy samples."""

    before: ProfileRun
    after: ProfileRun
    stages: pd.DataFrame
    ops: pd.DataFrame
    frames: pd.DataFrame | None
    svg: str | None
    warnings: list[str] = field(default_factory=list)
    out_dir: Path | None = None
    rule: str = ""
    """The significance rule the stage table applied, in words (with the repeat counts)."""

    @property
    def significant(self) -> list[str]:
        """The stages whose change is significant (the wall total left out)."""
        s = self.stages
        return [str(x) for x in s.loc[s["significant"] & (s["stage"] != stages.TOTAL), "stage"]]


def check_comparable(before: ProfileRun, after: ProfileRun) -> list[str]:
    """ValueError naming the difference when the workloads or parameters differ; otherwise the warnings
    (machine, threads, device, py-spy settings, and parameters only one side has: a revision that added
    a setting, e.g. a training option, is compared with one that lacked it, and the warning names it)."""
    if before.workload != after.workload:
        raise ValueError(f"different workloads: before {before.workload!r}, after {after.workload!r}")
    pb, pa = before.metadata["parameters"], after.metadata["parameters"]
    shared = sorted((set(pb) & set(pa)) - set(MAY_DIFFER))
    diffs = [f"{k}: before {pb[k]!r}, after {pa[k]!r}" for k in shared if pb[k] != pa[k]]
    if diffs:
        raise ValueError(f"the two profiles of {before.workload} differ in parameters: " + "; ".join(diffs))
    # the machine, threads, versions and extension as `gsworkbench compare` checks them; then the profile's own
    warnings = environment_warnings(before.metadata, after.metadata, ("before", "after"))
    for side, mine, other in (("before", pb, pa), ("after", pa, pb)):
        for k in sorted((set(mine) - set(other)) - set(MAY_DIFFER)):
            warnings.append(f"parameter {k} only {side} ({mine[k]!r}): the other revision has no such setting")
    if before.metadata.get("platform") != after.metadata.get("platform"):
        warnings.append(f"different platform: before {before.metadata.get('platform')!r}, after "
                        f"{after.metadata.get('platform')!r}")  # fmt: skip
    sb, sa = before.metadata.get("settings", {}), after.metadata.get("settings", {})
    for key in ("threads", "device", "rate", "native"):
        if sb.get(key) != sa.get(key):
            warnings.append(f"different {key}: before {sb.get(key)!r}, after {sa.get(key)!r}")
    return warnings


def compare_stages(before: pd.DataFrame, after: pd.DataFrame, order: list[str] | None = None,
                   alpha: float = significance.ALPHA, min_change: float = significance.THRESHOLD,
                   min_share: float = 0.01) -> pd.DataFrame:  # fmt: skip
    """Per stage (``repeats`` tables: repeat, stage, seconds): median seconds before and after, ratio
    after/before with its bootstrap interval, p-value, n before and after, verdict (by
    :func:`gsworkbench.bench.significance.compare_samples`) and ``significant`` (a significant verdict whose change is
    also at least ``min_share`` of BEFORE's wall time). A stage only one side has is a change
    ("new stage", "stage gone") when it is that large."""
    wall = float(before.loc[before.stage == stages.TOTAL, "seconds"].median())
    names = order or stages.stage_order([], list(dict.fromkeys([*before.stage, *after.stage])))
    rows = []
    for s in names:
        a = before.loc[before.stage == s, "seconds"].to_numpy(float)
        b = after.loc[after.stage == s, "seconds"].to_numpy(float)
        if len(a) and len(b):
            judged = significance.compare_samples(a, b, alpha=alpha, threshold=min_change)
            ma, mb, verdict = judged["before_median"], judged["after_median"], judged["verdict"]
            row = {k: judged[k] for k in ("ratio", "ratio_ci_low", "ratio_ci_high", "p_value", "n_before", "n_after")}
            big = significance.is_significant(verdict)
        else:
            ma = float(np.median(a)) if len(a) else 0.0
            mb = float(np.median(b)) if len(b) else 0.0
            verdict = "stage gone" if len(a) else "new stage"
            row = {"ratio": significance.median_ratio(ma, mb), "ratio_ci_low": math.nan, "ratio_ci_high": math.nan,
                   "p_value": math.nan, "n_before": len(a), "n_after": len(b)}  # fmt: skip
            big = max(ma, mb) > 0
        sig = bool(big and abs(mb - ma) >= min_share * wall)
        rows.append({"stage": s, "before_s": ma, "after_s": mb, **row, "verdict": verdict, "significant": sig})
    return pd.DataFrame(rows)


def stage_rule(alpha: float, min_change: float, min_share: float, counts: tuple[int, int]) -> str:
    """The stage table's rule in words: the workbench's rule with the repeat counts, and the share condition."""
    return f"{significance.rule_text(alpha, min_change, counts)}; and at least {100 * min_share:g}% of the wall time"


def compare_ops(before: pd.DataFrame, after: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The ``top`` biggest gains (self time fell) and losses (rose) per op, ``stage:`` ranges left out:
    name, self seconds before and after, change, calls before and after; gains first."""
    col = "self_device_s" if "self_device_s" in before and "self_device_s" in after else "self_cpu_s"
    b = before[~before.name.str.startswith("stage:")].groupby("name")[[col, "calls"]].sum()
    a = after[~after.name.str.startswith("stage:")].groupby("name")[[col, "calls"]].sum()
    df = b.merge(a, how="outer", left_index=True, right_index=True, suffixes=("_before", "_after")).fillna(0.0)
    df["change_s"] = df[f"{col}_after"] - df[f"{col}_before"]
    df = df.reset_index()
    gains = df[df.change_s < 0].nsmallest(top, "change_s").assign(kind="gain")
    losses = df[df.change_s > 0].nlargest(top, "change_s").assign(kind="loss")
    return pd.concat([gains, losses], ignore_index=True)


def diff(
    before: str | os.PathLike[str] | ProfileRun, after: str | os.PathLike[str] | ProfileRun, *,
    out: str | os.PathLike[str] | None = None, save: bool = True, alpha: float = significance.ALPHA,
    min_change: float = significance.THRESHOLD, min_share: float = 0.01, top: int = 10,
) -> ProfileDiff:  # fmt: skip
    """Compares two profile runs (folders or :class:`ProfileRun`). With ``save``, writes
    ``stages_diff.csv``, ``ops_diff.csv``, ``frames_diff.csv``, ``diff_flamegraph.svg`` and
    ``metadata.json`` to ``out`` (default: a new ``results/<run-id>/``)."""
    b = before if isinstance(before, ProfileRun) else load_profile(before)
    a = after if isinstance(after, ProfileRun) else load_profile(after)
    warnings = check_comparable(b, a)
    order = stages.stage_order(list(b.stages.stage), list(a.stages.stage))
    st = compare_stages(b.repeats, a.repeats, order, alpha, min_change, min_share)
    nb, na = b.repeats.repeat.nunique(), a.repeats.repeat.nunique()
    if significance.min_p_value(nb, na) >= alpha:
        warnings.append(f"no stage can be significant: the test at p < {alpha:g} needs "
                        f"{significance.min_samples(alpha)} repeats per profile (have {nb} and {na}; "
                        "profile --repeats)")
    op = compare_ops(b.ops, a.ops, top)
    frames = svg = None
    if b.folded and a.folded:
        frames = flamegraph.frame_changes(b.folded, a.folded)
        svg = flamegraph.diff_flamegraph_svg(
            b.folded, a.folded, title=f"differential flamegraph: {b.label} -> {a.label}"
        )
    else:
        warnings.append("no differential flamegraph: a profile has no py-spy samples")
    result = ProfileDiff(b, a, st, op, frames, svg, warnings, rule=stage_rule(alpha, min_change, min_share, (nb, na)))
    if save:
        d = Path(out) if out is not None else new_run_dir("profile-diff")
        d.mkdir(parents=True, exist_ok=True)
        write_table(d / "stages_diff.csv", st)
        write_table(d / "ops_diff.csv", op)
        if frames is not None and svg is not None:
            write_table(d / "frames_diff.csv", frames)
            atomic_write_text(d / "diff_flamegraph.svg", svg)
        write_json(d / "metadata.json", _diff_meta(result, alpha, min_change, min_share))
        result.out_dir = d
    return result


def _diff_meta(r: ProfileDiff, alpha: float, min_change: float, min_share: float) -> dict[str, Any]:
    return {
        "kind": "gsworkbench-profile-diff-v1",
        "before": str(r.before.run_dir),
        "after": str(r.after.run_dir),
        "workload": r.before.workload,
        "criteria": {"alpha": alpha, "min_change": min_change, "min_share": min_share, "test": "Mann-Whitney U"},
        "rule": r.rule,
        "significant": r.significant,
        "warnings": r.warnings,
    }


def stages_view(table: pd.DataFrame) -> pd.DataFrame:
    """The stage table as shown: stage, medians, ratio with its interval (text), p, verdict, significant."""
    ci = ["" if math.isnan(lo) else f"[{lo:.3g}, {hi:.3g}]" for lo, hi in zip(table.ratio_ci_low, table.ratio_ci_high)]
    return pd.DataFrame({"stage": table.stage, "before_s": table.before_s, "after_s": table.after_s,
                         "ratio": table.ratio, "ratio_95ci": ci, "p": table.p_value, "verdict": table.verdict,
                         "significant": table.significant})  # fmt: skip


def ops_view(table: pd.DataFrame, width: int = OP_NAME_WIDTH) -> pd.DataFrame:
    """The ops table as shown, narrow enough not to wrap: the op name cut to ``width`` characters, self
    milliseconds (device time where the profiles have it, else CPU) before, after and their change,
    calls before -> after, gain or loss."""
    col = "self_device_s" if "self_device_s_before" in table else "self_cpu_s"
    calls = [f"{int(b)}->{int(a)}" for b, a in zip(table["calls_before"], table["calls_after"])]
    return pd.DataFrame({
        "op": table["name"].map(lambda n: _short_label(str(n), width)),
        "self_ms_before": 1e3 * table[f"{col}_before"], "self_ms_after": 1e3 * table[f"{col}_after"],
        "change_ms": 1e3 * table["change_s"], "calls": calls, "kind": table["kind"],
    })  # fmt: skip


def frames_view(frames: pd.DataFrame, top: int = 10, width: int = FRAME_NAME_WIDTH) -> pd.DataFrame:
    """The ``top`` frames whose inclusive share of the samples changed most, the name cut to ``width``."""
    cols = ["frame", "inclusive_before", "inclusive_after", "inclusive_change"]
    return frames[cols].head(top).assign(frame=lambda d: d.frame.map(lambda n: _short_label(str(n), width)))


def diff_summary(r: ProfileDiff, top: int = 10) -> str:
    """The diff as text, no line much over 100 characters: warnings, the stage table with the rule it
    applied, the ops' gains and losses, the frames that moved most."""
    fmt = {"float_format": lambda v: f"{v:.4g}", "index": False}
    prose = lambda text: textwrap.fill(text, SUMMARY_WIDTH, subsequent_indent="    ")  # noqa: E731
    parts = [f"== {r.before.label}  ->  {r.after.label} ==", *(prose(f"WARNING: {w}") for w in r.warnings)]
    parts += ["\n-- stages (median seconds per run) --", stages_view(r.stages).to_string(**fmt)]
    sig = r.significant
    parts.append(prose(f"significance: {r.rule}"))
    parts.append("significant changes: " + (", ".join(sig) if sig else "none"))
    what = "device" if "self_device_s_before" in r.ops else "CPU"
    parts += [f"\n-- ops: biggest gains and losses of self {what} time (ms) --", ops_view(r.ops).to_string(**fmt)]
    if r.frames is not None:
        parts += ["\n-- frames: largest changes of inclusive share (py-spy) --",
                  frames_view(r.frames, top).to_string(**fmt)]  # fmt: skip
    if r.out_dir is not None:
        parts.append(f"\nwritten: {r.out_dir}")
    return "\n".join(parts)


def _short_label(label: str, width: int = 90) -> str:
    return label if len(label) <= width else label[: width - 3] + "..."
