"""Baseline against candidate, case by case, with a significance test on the raw samples.

The test is the workbench's one rule (:mod:`gsworkbench.bench.significance`, named in every table): a two-sided
Mann–Whitney U test on the per-round samples of the two runs at ``p < alpha`` (0.002), a change
counting only beyond the threshold (5%), with a 95% bootstrap interval of the ratio of medians.

Two runs timed together in interleaved rounds (``gsworkbench compare`` of two git revisions, which
marks both runs ``interleaved`` with one id) are judged by the rule's paired form instead: the
Wilcoxon signed-rank test on the per-round ratios, so that the machine's drift over the run, which
moves both samples of a round alike, does not hide a change.

A case without samples on either side (runs written before samples were kept) gets "no samples";
one with too few samples for the test to ever reach ``alpha`` gets "too few samples".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gsworkbench.bench import significance
from gsworkbench.bench.significance import ALPHA, THRESHOLD, bootstrap_ratio_ci, min_p_value, rule_text
from gsworkbench.bench.store import SAMPLES, BenchRun, load_bench_run
from gsworkbench.core.atomic import atomic_write_text, write_table

__all__ = ["ALPHA", "THRESHOLD", "Comparison", "bootstrap_ratio_ci", "compare_bench_runs", "compare_runs",
           "compare_samples", "environment_warnings", "interleaved_pair", "min_p_value", "rule_text",
           "select_backend"]  # fmt: skip

ROOF = "pct_of_peak"  # the roofline column (gsworkbench.bench.roofline), shown beside the times
TIMING_COLUMNS = {"case", "median_s", "iqr_s", "runs", "calls_per_run", "threads", "skipped", SAMPLES}
# integer measurements, not parameters: they may change between revisions (the tile lists' lengths)
MEASURED_COLUMNS = {"n_isects"}
# run parameters that change how long the timing takes, not what is timed: a warning, not a refusal
TIMING_PARAMETERS = {"threads", "min_run_time", "revision"}


def compare_samples(
    baseline: list[float] | None,
    candidate: list[float] | None,
    *,
    base_median: float | None = None,
    cand_median: float | None = None,
    alpha: float = ALPHA,
    threshold: float = THRESHOLD,
    paired: bool = False,
) -> dict[str, Any]:
    """One case: medians (s), ratio candidate/baseline with its CI, speedup, p-value and verdict, by
    :func:`gsworkbench.bench.significance.compare_samples`, or with ``paired`` (samples in round order, one a side
    per round) by :func:`gsworkbench.bench.significance.compare_paired`, whose ratio is the median per-round ratio;
    without samples, the stored medians and "no samples"."""
    out: dict[str, Any] = {"ratio_ci_low": np.nan, "ratio_ci_high": np.nan, "p_value": np.nan}
    if not baseline or not candidate:
        b, c = base_median, cand_median
        out.update(baseline_s=b, candidate_s=c, verdict="no samples")
        ok = b is not None and c is not None and b > 0 and c > 0
        ratio = c / b if ok else np.nan
    else:
        judge = significance.compare_paired if paired else significance.compare_samples
        judged = judge(baseline, candidate, alpha=alpha, threshold=threshold)
        b, c = judged["before_median"], judged["after_median"]
        out.update({k: judged[k] for k in ("ratio_ci_low", "ratio_ci_high", "p_value", "verdict")})
        out.update(baseline_s=b, candidate_s=c, n_baseline=judged["n_before"], n_candidate=judged["n_after"])
        ratio = judged["ratio"] if b > 0 and c > 0 else np.nan
    out["ratio"] = ratio
    out["speedup"] = 1 / ratio if ratio > 0 else np.nan
    return out


def interleaved_pair(base: dict[str, Any], cand: dict[str, Any]) -> bool:
    """Whether two runs' metadata say they were timed together in interleaved rounds (the two runs of
    one revisions compare: one ``interleaved`` id, roles baseline and candidate)."""
    a, b = base.get("interleaved"), cand.get("interleaved")
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return False
    return a.get("id") is not None and a.get("id") == b.get("id") and {a.get("role"), b.get("role")} == {
        "baseline", "candidate"}  # fmt: skip


@dataclass
class Comparison:
    """The per-case table, the warnings about the two runs' environments, and the rule used."""

    table: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    rule: str = rule_text()
    baseline: str = ""
    candidate: str = ""

    @property
    def slower(self) -> pd.DataFrame:
        return self.table[self.table.verdict == "slower"]

    @property
    def exit_code(self) -> int:
        """1 when any case is significantly slower than the threshold (a CI gate), else 0."""
        return 1 if len(self.slower) else 0

    def display_table(self) -> pd.DataFrame:
        """The table as printed: times in ms, ratios to 3 digits."""
        t = self.table
        out = pd.DataFrame({"case": t["case"], "metric": "time per call (ms)"})
        out["baseline"] = t.baseline_s * 1e3
        out["candidate"] = t.candidate_s * 1e3
        out["speedup"] = t.speedup
        out["ratio"] = t.ratio
        out["ratio 95% CI"] = [
            "" if np.isnan(lo) else f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(t.ratio_ci_low, t.ratio_ci_high)
        ]
        out["p"] = t.p_value
        for side in ("baseline", "candidate"):  # the roofline's share, where the runs have it
            col = f"{side}_pct_of_peak"
            if col in t and t[col].notna().any():
                out[f"{side} % of roof"] = t[col]
        out["verdict"] = t.verdict
        return out

    def to_markdown(self) -> str:
        d = self.display_table()
        fmt = {"baseline": "{:.4g}", "candidate": "{:.4g}", "speedup": "{:.3f}", "ratio": "{:.3f}", "p": "{:.2g}",
               "baseline % of roof": "{:.3g}", "candidate % of roof": "{:.3g}"}  # fmt: skip
        lines = ["| " + " | ".join(d.columns) + " |", "|" + "---|" * len(d.columns)]
        for _, row in d.iterrows():
            cells = [("" if pd.isna(row[c]) else fmt[c].format(row[c])) if c in fmt else str(row[c]) for c in d]
            lines.append("| " + " | ".join(cells) + " |")
        head = [f"baseline: `{self.baseline}`  ", f"candidate: `{self.candidate}`  ", f"test: {self.rule}", ""]
        warn = [f"> warning: {w}" for w in self.warnings]
        return "\n".join(head + lines + ([""] + warn if warn else [])) + "\n"

    def to_text(self) -> str:
        with pd.option_context("display.max_rows", 1000, "display.width", 250, "display.max_colwidth", 70):
            body = self.display_table().to_string(index=False, float_format=lambda v: f"{v:.4g}")
        warn = "".join(f"\nwarning: {w}" for w in self.warnings)
        counts = self.table.verdict.value_counts().to_dict()
        summary = ", ".join(f"{n} {v}" for v, n in counts.items())
        head = f"baseline:  {self.baseline}\ncandidate: {self.candidate}\ntest: {self.rule}"
        return f"{head}\n\n{body}\n\n{summary}{warn}"

    def write(self, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
        """Writes ``compare.csv`` (full precision) and ``compare.md`` atomically into ``out_dir``."""
        out = Path(out_dir)
        return {
            "csv": write_table(out / "compare.csv", self.table),
            "md": atomic_write_text(out / "compare.md", self.to_markdown()),
        }


def _check_same_work(base: BenchRun, cand: BenchRun) -> None:
    """ValueError naming the first difference in what the two runs timed."""
    if base.suite != cand.suite:
        raise ValueError(f"runs of different suites: baseline {base.suite!r}, candidate {cand.suite!r}")
    bp, cp = base.metadata.get("parameters", {}), cand.metadata.get("parameters", {})
    for key in sorted((set(bp) | set(cp)) - TIMING_PARAMETERS):
        if bp.get(key) != cp.get(key):
            raise ValueError(
                f"runs with different parameter {key!r}: baseline {bp.get(key)!r}, candidate {cp.get(key)!r}"
            )
    bc, cc = list(base.table["case"]), list(cand.table["case"])
    only_b, only_c = sorted(set(bc) - set(cc)), sorted(set(cc) - set(bc))
    if only_b or only_c:
        raise ValueError(f"runs with different cases: only in baseline {only_b[:5]}, only in candidate {only_c[:5]}")
    # case parameters are ints, strings and bools; float columns are derived (throughput, speedups, memory)
    params = [
        c
        for c in base.table.columns
        if c not in TIMING_COLUMNS | MEASURED_COLUMNS
        and c in cand.table
        and not pd.api.types.is_float_dtype(base.table[c])
    ]
    b = base.table.set_index("case")[params].astype(str)
    c = cand.table.set_index("case")[params].astype(str).loc[b.index]
    bad = [p for p in params if (b[p] != c[p]).any()]
    if bad:
        raise ValueError(f"runs whose cases differ in parameter(s) {bad}")


def environment_warnings(
    base: dict[str, Any], cand: dict[str, Any], sides: tuple[str, str] = ("baseline", "candidate")
) -> list[str]:
    """Differences in CPU, threads, package versions and the extension between two metadata dicts
    (also what ``gsworkbench profile diff`` warns about; ``sides`` names the two in the messages)."""
    out = []
    checks = [
        ("CPU", lambda m: m.get("cpu_model")),
        ("threads", lambda m: (m.get("parameters", {}).get("threads"), m.get("threads", {}).get("torch_threads"))),
        ("OMP_WAIT_POLICY", lambda m: m.get("threads", {}).get("OMP_WAIT_POLICY")),
        ("OMP_NUM_THREADS", lambda m: m.get("threads", {}).get("OMP_NUM_THREADS")),
        ("extension", lambda m: m.get("extension")),
        ("python", lambda m: m.get("python")),
    ]
    for name in ("torch", "numpy", "numba"):
        checks.append((f"{name} version", lambda m, n=name: m.get("packages", {}).get(n)))
    for name, get in checks:
        if get(base) != get(cand):
            out.append(f"different {name}: {sides[0]} {get(base)!r}, {sides[1]} {get(cand)!r}")
    for side, m in zip(sides, (base, cand)):
        if m.get("git_dirty"):
            out.append(f"{side} ran on a working tree with uncommitted changes")
    return out


def compare_bench_runs(
    base: BenchRun, cand: BenchRun, *, alpha: float = ALPHA, threshold: float = THRESHOLD
) -> Comparison:
    """Case-by-case comparison of two runs of the same suite and parameters (ValueError otherwise).
    Rows without a case name (values a suite derives from other rows, such as the render suite's
    backward = forward+backward - forward) have no samples of their own and are left out."""
    base, cand = (BenchRun(r.path, r.suite, r.metadata, r.table[r.table["case"].notna()].reset_index(drop=True))
                  for r in (base, cand))  # fmt: skip
    _check_same_work(base, cand)
    paired = interleaved_pair(base.metadata, cand.metadata)
    c_rows = cand.table.set_index("case")
    rows = []
    for _, b in base.table.iterrows():
        c = c_rows.loc[b["case"]]
        row: dict[str, Any] = {"case": b["case"]}
        skipped = [str(r[k]) for r in (b, c) for k in ("skipped",) if k in r and isinstance(r[k], str)]
        if skipped or pd.isna(b.get("median_s")) or pd.isna(c.get("median_s")):
            row.update(verdict=f"skipped: {skipped[0]}" if skipped else "not timed")
        else:
            row.update(
                compare_samples(
                    b.get(SAMPLES),
                    c.get(SAMPLES),
                    base_median=float(b["median_s"]),
                    cand_median=float(c["median_s"]),
                    alpha=alpha,
                    threshold=threshold,
                    paired=paired,
                )
            )
        rows.append(row)
    cols = ["case", "baseline_s", "candidate_s", "ratio", "ratio_ci_low", "ratio_ci_high", "speedup", "p_value"]
    judged = pd.DataFrame(rows)
    counts = [int(n) for col in ("n_baseline", "n_candidate") if col in judged for n in judged[col].dropna()]
    table = judged.reindex(columns=[*cols, "verdict"])
    for side, run in (("baseline", base), ("candidate", cand)):
        if ROOF in run.table:
            table[f"{side}_pct_of_peak"] = table["case"].map(run.table.set_index("case")[ROOF]).astype(float)
    warnings = environment_warnings(base.metadata, cand.metadata)
    for side, run in (("baseline", base), ("candidate", cand)):
        warnings += [str(w) for w in run.metadata.get("warnings", [])]
        if not run.has_samples:
            warnings.append(f"{side} run has no raw samples (written before they were kept): no test possible")
    label = lambda r: f"{r.path} (commit {r.commit[:10]})"  # noqa: E731
    return Comparison(table, warnings, rule_text(alpha, threshold, counts, paired), label(base), label(cand))


def select_backend(run: BenchRun, backend: str) -> BenchRun:
    """The rows of ``backend`` only, with the backend's segment of each case name replaced by ``*``, so
    that two backends of one run (timed in the same interleaved rounds) compare case by case."""
    if "backend" not in run.table or backend not in set(run.table.backend):
        known = sorted(set(run.table.get("backend", [])))
        raise ValueError(f"run {run.path.name} has no backend {backend!r}; it has {known}")
    t = run.table[(run.table.backend == backend) & run.table["case"].notna()].copy()  # derived rows: no case
    t["case"] = ["/".join("*" if seg == backend else seg for seg in str(name).split("/")) for name in t["case"]]
    t["backend"] = "*"
    return BenchRun(run.path, run.suite, run.metadata, t.reset_index(drop=True))


def compare_runs(
    baseline: str | os.PathLike[str],
    candidate: str | os.PathLike[str],
    backends: tuple[str, str] | None = None,
    **kw: Any,
) -> Comparison:
    """:func:`compare_bench_runs` of two run folders (the same folder twice is fine); with ``backends``
    = (b, c), backend b of the baseline against backend c of the candidate."""
    base, cand = load_bench_run(baseline), load_bench_run(candidate)
    if backends is None:
        return compare_bench_runs(base, cand, **kw)
    b, c = select_backend(base, backends[0]), select_backend(cand, backends[1])
    # cases that exist for one backend only (e.g. a compiled variant timed for ext alone) have no pair
    common = set(b.table["case"]) & set(c.table["case"])
    unpaired = sorted((set(b.table["case"]) | set(c.table["case"])) - common)
    if not common:
        raise ValueError(f"backends {backends[0]!r} and {backends[1]!r} share no case in these runs")
    b, c = (BenchRun(r.path, r.suite, r.metadata, r.table[r.table["case"].isin(common)].reset_index(drop=True))
            for r in (b, c))  # fmt: skip
    out = compare_bench_runs(b, c, **kw)
    if unpaired:
        out.warnings.append(f"{len(unpaired)} case(s) timed for one backend only, left out: {unpaired[:3]}")
    out.baseline += f" [backend {backends[0]}]"
    out.candidate += f" [backend {backends[1]}]"
    return out
