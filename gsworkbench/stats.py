"""The one significance rule for timings: ``gsworkbench compare`` and ``gsworkbench profile diff`` both judge with it.

The rule: a two-sided **Mann–Whitney U test** on the two sets of samples (``scipy.stats.mannwhitneyu``,
as asv does) at ``p < ALPHA`` (0.002, asv's), and a change counts only when the ratio of medians
(after / before) is also beyond ``THRESHOLD`` (5%): ``>= 1 + threshold`` is *slower*,
``<= 1 / (1 + threshold)`` is *faster*. Beside it, a 95% percentile-bootstrap interval of the ratio of
medians (both sets resampled with replacement). Sets too small for the test ever to reach ``alpha``
(fewer than 7 samples a side at 0.002) get "too few samples" instead of a verdict.

Rank-based, the test makes no assumption about the shape of the timing distribution (timings have a
long right tail) and needs no log transform, so a quantity that may touch zero (a profile's "other"
time) is tested as it is. This module imports nothing of the workbench, so every layer may use it
(and scipy only when a test runs, so the command line reads the constants cheaply).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

ALPHA = 0.002
"""Significance level of the Mann–Whitney U test (two-sided p-value)."""
THRESHOLD = 0.05
"""Smallest relative change of the median that counts (5%)."""
CONFIDENCE = 0.95
"""Coverage of the bootstrap interval of the ratio of medians."""

SLOWER, FASTER, NO_CHANGE = "slower", "faster", "no significant change"


def rule_text(alpha: float = ALPHA, threshold: float = THRESHOLD, counts: Sequence[int] = ()) -> str:
    """The rule in words, printed with every table that applies it; ``counts``: the sample counts of the
    sets compared (shown as ``n=10``, or ``n=3-10`` when they differ)."""
    ns = sorted({int(n) for n in counts})
    shown = "" if not ns else f", n={ns[0]}" if len(ns) == 1 else f", n={ns[0]}-{ns[-1]}"
    return (
        f"Mann-Whitney U (two-sided), p < {alpha:g}{shown}, and ratio of medians beyond {100 * threshold:g}%; "
        f"CI: {100 * CONFIDENCE:g}% bootstrap of the ratio of medians"
    )


def min_p_value(n: int, m: int) -> float:
    """The smallest two-sided Mann–Whitney p-value that n and m samples can give (complete separation)."""
    if n < 1 or m < 1:
        return 1.0
    from scipy import stats

    a, b = np.arange(n, dtype=float), np.arange(n, n + m, dtype=float)
    return float(stats.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue)


def min_samples(alpha: float = ALPHA) -> int:
    """The fewest samples per side (equal sides) with which the test can reach ``p < alpha``."""
    n = 1
    while min_p_value(n, n) >= alpha:
        n += 1
    return n


def mann_whitney_p(before: np.ndarray, after: np.ndarray) -> float:
    """Two-sided Mann–Whitney U p-value; 1.0 for two identical sets (scipy gives nan when all tie)."""
    from scipy import stats

    if np.array_equal(np.sort(before), np.sort(after)):
        return 1.0
    return float(stats.mannwhitneyu(before, after, alternative="two-sided").pvalue)


def bootstrap_ratio_ci(
    baseline: np.ndarray, candidate: np.ndarray, n_boot: int = 2000, confidence: float = CONFIDENCE, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap interval of median(candidate) / median(baseline) (seeded: the same samples
    give the same interval)."""
    rng = np.random.default_rng(seed)
    b = np.median(rng.choice(baseline, (n_boot, baseline.size)), axis=1)
    c = np.median(rng.choice(candidate, (n_boot, candidate.size)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo, hi = np.quantile(c / b, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def median_ratio(before: float, after: float) -> float:
    """after / before; inf when only after is positive, 1.0 when both are zero."""
    if before > 0:
        return after / before
    return math.inf if after > 0 else 1.0


def compare_samples(
    before: Sequence[float] | np.ndarray, after: Sequence[float] | np.ndarray, *, alpha: float = ALPHA,
    threshold: float = THRESHOLD,
) -> dict[str, Any]:  # fmt: skip
    """One quantity measured ``len(before)`` and ``len(after)`` times (seconds): ``before_median``,
    ``after_median``, ``ratio`` (after/before), its CI (``ratio_ci_low``, ``ratio_ci_high``),
    ``p_value``, ``n_before``, ``n_after`` and ``verdict`` (:data:`SLOWER`, :data:`FASTER`,
    :data:`NO_CHANGE`, or "too few samples (n vs m)"; CI and p are nan then)."""
    bs, cs = np.asarray(before, float), np.asarray(after, float)
    if bs.size == 0 or cs.size == 0:
        raise ValueError(f"compare_samples needs samples on both sides (have {bs.size} and {cs.size})")
    b, c = float(np.median(bs)), float(np.median(cs))
    ratio = median_ratio(b, c)
    out: dict[str, Any] = {"before_median": b, "after_median": c, "ratio": ratio, "ratio_ci_low": math.nan,
                           "ratio_ci_high": math.nan, "p_value": math.nan, "n_before": int(bs.size),
                           "n_after": int(cs.size)}  # fmt: skip
    if min_p_value(bs.size, cs.size) >= alpha:
        out["verdict"] = f"too few samples ({bs.size} vs {cs.size})"
        return out
    p = mann_whitney_p(bs, cs)
    lo, hi = bootstrap_ratio_ci(bs, cs)
    if p < alpha and ratio >= 1 + threshold:
        verdict = SLOWER
    elif p < alpha and ratio <= 1 / (1 + threshold):
        verdict = FASTER
    else:
        verdict = NO_CHANGE
    out.update(ratio_ci_low=lo, ratio_ci_high=hi, p_value=p, verdict=verdict)
    return out


def is_significant(verdict: str) -> bool:
    """Whether a :func:`compare_samples` verdict is a significant change."""
    return verdict in (SLOWER, FASTER)
