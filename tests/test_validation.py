"""The shared input checks."""

from __future__ import annotations

import pytest
import torch

from gsworkbench.validation import check_choice, check_finite, check_same_device_dtype, check_same_size, check_tensor


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
