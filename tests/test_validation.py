"""The shared input checks."""

from __future__ import annotations

import pytest
import torch
from conftest import requires_ext

from gsworkbench.core.validation import (
    check_choice,
    check_finite,
    check_same_device_dtype,
    check_same_size,
    check_tensor,
)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_check_finite_catches_every_non_finite(bad):
    x = torch.zeros(7, 3)
    x[4, 1] = bad
    with pytest.raises(ValueError, match="x contains non-finite"):
        check_finite("x", x)


def test_check_finite_accepts_an_overflowing_sum():
    x = torch.full((4,), 3e38)  # finite values whose float32 sum is inf
    assert check_finite("x", x) is x
    check_finite("empty", torch.zeros(0))


def test_shape_dtype_size_device_and_choice_messages():
    with pytest.raises(ValueError, match=r"a must have shape \[\*,3\], got \[2, 2\]"):
        check_tensor("a", torch.zeros(2, 2), (None, 3))
    with pytest.raises(ValueError, match="a must have dtype float32, float64, got int64"):
        check_tensor("a", torch.zeros(2, 3, dtype=torch.long), (None, 3))
    with pytest.raises(ValueError, match=r"inconsistent N .*a: 2, b: 3"):
        check_same_size("N", ("a", torch.zeros(2), 0), ("b", torch.zeros(3), 0))
    with pytest.raises(ValueError, match="different dtypes"):
        check_same_device_dtype(a=torch.zeros(1), b=torch.zeros(1, dtype=torch.float64))
    with pytest.raises(ValueError, match="mode must be one of 'x', 'y'; got 'z'"):
        check_choice("mode", "z", ("x", "y"))


def _stats_inputs(gen: torch.Generator) -> list[torch.Tensor]:
    big = torch.randn(300_000, generator=gen)  # above the op's parallel grain
    big[123_457] = float("nan")
    with_inf = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    with_inf[2, 3] = -float("inf")
    return [
        torch.randn(17, 3, generator=gen) * 10,
        torch.randn(6, 8, generator=gen).t(),  # not contiguous
        torch.zeros(0, 3),
        big,
        with_inf,
        torch.rand(9, generator=gen, dtype=torch.float64),
    ]


@requires_ext
def test_value_stats_extension_matches_torch_reference(seed):
    from gsworkbench.core.validation import value_stats, value_stats_torch

    ts = _stats_inputs(torch.Generator().manual_seed(seed))
    fast = value_stats(ts)
    ref = value_stats_torch(ts)
    assert [f[0] for f in fast] == [r[0] == 0 for r in ref] == [True, True, True, False, False, True]
    for (finite, lo, hi), (_, rlo, rhi) in zip(fast, ref):
        if finite:
            assert (lo, hi) == (rlo, rhi)
    assert fast[2][1:] == (float("inf"), float("-inf"))


def test_value_stats_torch_reference_values():
    from gsworkbench.core.validation import value_stats_torch

    rows = value_stats_torch([torch.tensor([1.0, -2.0, 5.0]), torch.tensor([0.0, float("nan")])])
    assert rows[0] == [0.0, -2.0, 5.0] and rows[1][0] == 1.0
