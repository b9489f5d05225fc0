"""The one significance rule for timings: ``gsworkbench compare`` and ``gsworkbench profile diff`` both judge with it.

The rule: a two-sided **Mann–Whitney U test** on the two sets of samples (``scipy.stats.mannwhitneyu``,
as asv does) at ``p < ALPHA`` (0.002, asv's), and a change counts only when the ratio of medians
(after / before) is also beyond ``THRESHOLD`` (5%): ``>= 1 + threshold`` is *slower*,
``<= 1 / (1 + threshold)`` is *faster*. Beside it, a 95% percentile-bootstrap interval of the ratio of
medians (both sets resampled with replacement). Sets too small for the test ever to reach ``alpha``
(fewer than 7 samples a side at 0.002) get "too few samples" instead of a verdict.

Rank-based, the test makes no assumption about the shape of the timing distribution (timings have a
long right tail) and needs no log transform, so a quantity that may touch zero (a profile's "other"
time) is tested as it is.

**Paired form**, for samples timed in interleaved rounds (``gsworkbench compare`` of two git
revisions: round ``i`` of both sides ran back to back, ABBA): the same level and threshold, applied to
the per-round ratios ``after_i / before_i`` by a two-sided **Wilcoxon signed-rank test** on their
logarithms (``scipy.stats.wilcoxon``), the change being their median, with a bootstrap interval of
that median (rounds resampled). A machine whose speed drifts over minutes moves both samples of a
round alike: the drift that widens each side's spread, and so hides a change from the unpaired test,
cancels in the ratio. 10 rounds are the fewest that can reach ``p < 0.002`` (all ten ratios on one
side of 1).

This module imports nothing of the workbench, so every layer may use it (and scipy only when a test
runs, so the command line reads the constants cheaply).
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


def rule_text(alpha: float = ALPHA, threshold: float = THRESHOLD, counts: Sequence[int] = (),
              paired: bool = False) -> str:  # fmt: skip
    """The rule in words, printed with every table that applies it; ``counts``: the sample counts of the
    sets compared (shown as ``n=10``, or ``n=3-10`` when they differ); ``paired``: the paired form."""
    ns = sorted({int(n) for n in counts})
    shown = "" if not ns else f", n={ns[0]}" if len(ns) == 1 else f", n={ns[0]}-{ns[-1]}"
    if paired:
        return (
            f"Wilcoxon signed-rank (two-sided) on the per-round ratios of interleaved rounds, p < {alpha:g}{shown}, "
            f"and median ratio beyond {100 * threshold:g}%; CI: {100 * CONFIDENCE:g}% bootstrap of the median "
            "ratio (rounds resampled)"
        )
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


def min_paired_p_value(n: int) -> float:
    """The smallest two-sided Wilcoxon signed-rank p-value that n pairs can give (every ratio on one side
    of 1): 2 / 2^n."""
    return 1.0 if n < 1 else min(1.0, 2.0 / 2.0**n)


def wilcoxon_p(log_ratios: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of the log ratios against 0 (exact for small sets without
    ties or zeros, scipy's normal approximation otherwise); 1.0 when every ratio is 1."""
    from scipy import stats

    if not np.any(log_ratios != 0):
        return 1.0
    return float(stats.wilcoxon(log_ratios, alternative="two-sided").pvalue)


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


def bootstrap_median_ci(values: np.ndarray, n_boot: int = 2000, confidence: float = CONFIDENCE,
                        seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Percentile-bootstrap interval of median(values) (seeded, like :func:`bootstrap_ratio_ci`)."""
    rng = np.random.default_rng(seed)
    m = np.median(rng.choice(values, (n_boot, values.size)), axis=1)
    lo, hi = np.quantile(m, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def median_ratio(before: float, after: float) -> float:
    """after / before; inf when only after is positive, 1.0 when both are zero."""
    if before > 0:
        return after / before
    return math.inf if after > 0 else 1.0


def verdict_of(p: float, ratio: float, alpha: float = ALPHA, threshold: float = THRESHOLD) -> str:
    """The rule's verdict from a test's p-value and the change's ratio (after / before)."""
    if p < alpha and ratio >= 1 + threshold:
        return SLOWER
    if p < alpha and ratio <= 1 / (1 + threshold):
        return FASTER
    return NO_CHANGE


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
    out.update(ratio_ci_low=lo, ratio_ci_high=hi, p_value=p, verdict=verdict_of(p, ratio, alpha, threshold))
    return out


def compare_paired(
    before: Sequence[float] | np.ndarray, after: Sequence[float] | np.ndarray, *, alpha: float = ALPHA,
    threshold: float = THRESHOLD,
) -> dict[str, Any]:  # fmt: skip
    """The paired form of :func:`compare_samples`, for ``before[i]`` and ``after[i]`` timed in one round
    (positive seconds, equal counts): the same keys, with ``ratio`` the median of the per-round ratios
    ``after[i] / before[i]``, its CI a bootstrap over rounds and ``p_value`` the Wilcoxon signed-rank
    test's; "too few samples" below 10 rounds at ``alpha`` 0.002."""
    bs, cs = np.asarray(before, float), np.asarray(after, float)
    if bs.size != cs.size or bs.size == 0:
        raise ValueError(f"compare_paired needs one sample a side per round (have {bs.size} and {cs.size})")
    if not (np.all(bs > 0) and np.all(cs > 0)):
        raise ValueError("compare_paired needs positive samples (seconds): a ratio of zero is undefined")
    ratios = cs / bs
    ratio = float(np.median(ratios))
    out: dict[str, Any] = {"before_median": float(np.median(bs)), "after_median": float(np.median(cs)),
                           "ratio": ratio, "ratio_ci_low": math.nan, "ratio_ci_high": math.nan,
                           "p_value": math.nan, "n_before": int(bs.size), "n_after": int(cs.size)}  # fmt: skip
    if min_paired_p_value(bs.size) >= alpha:
        out["verdict"] = f"too few samples ({bs.size} rounds)"
        return out
    p = wilcoxon_p(np.log(ratios))
    lo, hi = bootstrap_median_ci(ratios)
    out.update(ratio_ci_low=lo, ratio_ci_high=hi, p_value=p, verdict=verdict_of(p, ratio, alpha, threshold))
    return out


def is_significant(verdict: str) -> bool:
    """Whether a :func:`compare_samples` verdict is a significant change."""
    return verdict in (SLOWER, FASTER)
