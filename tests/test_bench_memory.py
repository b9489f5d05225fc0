"""Peak resident memory of one call: the size of what it allocates, whatever ran before."""

from __future__ import annotations

import math

import pytest
import torch

from gsworkbench.bench.peak_rss import peak_rss_increase_mib, rss_measurable

pytestmark = pytest.mark.skipif(not rss_measurable(), reason="needs Linux /proc and glibc")


def _big_tensor() -> float:
    x = torch.ones(16 * 2**20)  # 64 MiB, touched
    return float(x[-1])


def _many_small_tensors() -> int:
    parts = [torch.ones(2**15) for _ in range(400)]  # 400 x 128 KiB = 50 MiB from the C heap
    return len(parts)


@pytest.mark.parametrize(("fn", "mib"), [(_big_tensor, 64.0), (_many_small_tensors, 50.0)])
def test_peak_is_what_the_call_allocates_every_time(fn, mib):
    """Repeated calls measure alike: memory freed by the previous call is not silently reused (which
    made a sampled RSS read ~0 MiB for the second of two identical cases)."""
    got = [peak_rss_increase_mib(fn) for _ in range(3)]
    for value in got:
        assert mib * 0.95 <= value <= mib * 1.25, got


def test_a_call_that_allocates_nothing_reads_near_zero():
    _big_tensor()
    assert peak_rss_increase_mib(lambda: sum(range(1000))) < 2.0


def test_unmeasurable_is_nan_not_zero(monkeypatch):
    from gsworkbench.bench import peak_rss

    monkeypatch.setattr(peak_rss, "_reset_high_water_mark", lambda: False)
    assert math.isnan(peak_rss.peak_rss_increase_mib(lambda: None))
