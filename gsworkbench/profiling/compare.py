"""``diff(before, after)``: what changed between two profiles of the same workload.

- Stages: median seconds before and after, their ratio, and whether the change stands out from the
  run-to-run noise. A stage's change is *significant* when all three hold: Welch's t-test on the
  log-seconds of the repeats gives p < ``alpha`` (default 0.01); the medians differ by at least
  ``min_change`` (default 5%); and the difference is at least ``min_share`` (default 1%) of BEFORE's
  wall time (so a microsecond stage's jitter is not news). It needs at least 2 repeats on each side.
- Ops: the op table's biggest gains and losses of self time.
- Frames: the change of each frame's share of the py-spy samples, and the differential flamegraph.

Profiles of different workloads or parameters are refused, naming the difference; ``backend`` is the
one parameter that may differ (comparing implementations is what the diff is for). A different
machine, thread count or device gets a warning.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.io.atomic import atomic_write_text, write_json, write_table
from gsworkbench.profiling import flamegraph, stages
from gsworkbench.profiling.run import ProfileRun, load_profile
from gsworkbench.runs import new_run_dir

MAY_DIFFER = ("backend",)  # parameters that two compared profiles may set differently


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
    from gsworkbench.bench.compare import environment_warnings

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


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Welch's t-test on log-seconds; nan with fewer than 2 samples on a side."""
    from scipy import stats as sst

    if len(a) < 2 or len(b) < 2:
        return float("nan")
    la, lb = np.log(np.maximum(a, 1e-12)), np.log(np.maximum(b, 1e-12))
    if np.ptp(la) == 0 and np.ptp(lb) == 0:
        return 1.0 if la[0] == lb[0] else 0.0
    return float(sst.ttest_ind(la, lb, equal_var=False).pvalue)


def compare_stages(before: pd.DataFrame, after: pd.DataFrame, order: list[str] | None = None, alpha: float = 0.01,
                   min_change: float = 0.05, min_share: float = 0.01) -> pd.DataFrame:  # fmt: skip
    """Per stage (``repeats`` tables): median before and after, ratio after/before, p-value, significant."""
    wall = float(before.loc[before.stage == stages.TOTAL, "seconds"].median())
    names = order or stages.stage_order([], list(dict.fromkeys([*before.stage, *after.stage])))
    rows = []
    for s in names:
        a = before.loc[before.stage == s, "seconds"].to_numpy(float)
        b = after.loc[after.stage == s, "seconds"].to_numpy(float)
        if s == stages.OTHER:  # 'other' may dip below zero by rounding: compare as it is, no log
            a, b = np.maximum(a, 0.0), np.maximum(b, 0.0)
        ma = float(np.median(a)) if len(a) else 0.0
        mb = float(np.median(b)) if len(b) else 0.0
        ratio = mb / ma if ma > 0 else (math.inf if mb > 0 else 1.0)
        p = welch_p(a, b) if len(a) and len(b) else (0.0 if max(ma, mb) > 0 else 1.0)
        sig = bool(p < alpha and abs(ratio - 1) >= min_change and abs(mb - ma) >= min_share * wall)
        rows.append({"stage": s, "before_s": ma, "after_s": mb, "ratio": ratio, "p_value": p, "significant": sig})
    return pd.DataFrame(rows)


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
    out: str | os.PathLike[str] | None = None, save: bool = True, alpha: float = 0.01, min_change: float = 0.05,
    min_share: float = 0.01, top: int = 10,
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
    if min(nb, na) < 2:
        warnings.append(f"significance needs >= 2 repeats per profile (have {nb} and {na})")
    op = compare_ops(b.ops, a.ops, top)
    frames = svg = None
    if b.folded and a.folded:
        frames = flamegraph.frame_changes(b.folded, a.folded)
        svg = flamegraph.diff_flamegraph_svg(
            b.folded, a.folded, title=f"differential flamegraph: {b.label} -> {a.label}"
        )
    else:
        warnings.append("no differential flamegraph: a profile has no py-spy samples")
    result = ProfileDiff(b, a, st, op, frames, svg, warnings)
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
        "criteria": {"alpha": alpha, "min_change": min_change, "min_share": min_share},
        "significant": r.significant,
        "warnings": r.warnings,
    }


def diff_summary(r: ProfileDiff, top: int = 10) -> str:
    """The diff as text: warnings, the stage table, the ops' gains and losses, the frames that moved most."""
    fmt = {"float_format": lambda v: f"{v:.4g}", "index": False}
    parts = [f"== {r.before.label}  ->  {r.after.label} ==", *(f"WARNING: {w}" for w in r.warnings)]
    parts += ["\n-- stages (median seconds per run) --", r.stages.to_string(**fmt)]
    sig = r.significant
    parts.append("significant changes: " + (", ".join(sig) if sig else "none"))
    ops_view = r.ops.assign(name=r.ops["name"].map(_short_label))
    parts += ["\n-- ops: biggest gains and losses of self time --", ops_view.to_string(**fmt)]
    if r.frames is not None:
        cols = ["frame", "inclusive_before", "inclusive_after", "inclusive_change"]
        frames = r.frames[cols].head(top).assign(frame=lambda d: d.frame.map(_short_label))
        parts += ["\n-- frames: largest changes of inclusive share (py-spy) --", frames.to_string(**fmt)]
    if r.out_dir is not None:
        parts.append(f"\nwritten: {r.out_dir}")
    return "\n".join(parts)


def _short_label(label: str, width: int = 90) -> str:
    return label if len(label) <= width else label[: width - 3] + "..."
