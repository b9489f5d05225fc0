"""SplatSet container: checks, activated forms, SH degree, subsets and concatenation."""

from __future__ import annotations

import pytest
import torch

from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet, synthetic_splats


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_shapes_and_degree(degree: int) -> None:
    s = synthetic_splats(64, degree)
    k = (degree + 1) ** 2 - 1
    assert len(s) == 64 and s.sh_degree == degree and s.sh_rest.shape == (64, k, 3)
    assert s.sh.shape == (64, k + 1, 3) and torch.equal(s.sh[:, 0], s.sh_dc)


def test_activated_round_trip() -> None:
    s = synthetic_splats(100, 3, dtype=torch.float64)
    t = SplatSet.from_activated(s.means, s.quats, s.scales, s.opacities, s.sh)
    for name in ("log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        assert torch.allclose(getattr(t, name), getattr(s, name), rtol=1e-9, atol=1e-9), name
    assert ((s.opacities > 0) & (s.opacities < 1)).all() and (s.scales > 0).all()


def test_covariances_match_gaussians() -> None:
    s = synthetic_splats(10, 0, dtype=torch.float64)
    R = gaussians.quat_to_rotmat(s.quats)
    want = R @ torch.diag_embed(s.scales**2) @ R.transpose(-1, -2)
    assert torch.allclose(s.covariances, want, rtol=1e-12, atol=1e-15)


FIELDS = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")


def test_subset_concat_clone_to() -> None:
    s = synthetic_splats(10, 2)
    both = SplatSet.concat([s[:4], s[4:]])
    for name in FIELDS:
        assert torch.equal(getattr(both, name), getattr(s, name)), name
    # a mask keeps exactly its rows, in order, in every field; an index tensor picks (and repeats) rows
    mask = s.opacity_logits > s.opacity_logits.median()
    idx = torch.tensor([7, 2, 2, 0])
    for index, rows in ((mask, mask.nonzero()[:, 0]), (idx, idx)):
        sub = s[index]
        assert len(sub) == len(rows) and 0 < len(sub) != len(s)
        for name in FIELDS:
            assert torch.equal(getattr(sub, name), getattr(s, name)[rows]), name
    c = s.clone()
    c.means += 1
    assert not torch.equal(c.means, s.means)
    assert s.to(torch.float64).means.dtype == torch.float64
    with pytest.raises(ValueError, match="SH degrees"):
        SplatSet.concat([s, synthetic_splats(3, 1)])


def test_bad_inputs_raise() -> None:
    s = synthetic_splats(5, 1)
    with pytest.raises(ValueError, match="quats must have shape"):
        SplatSet(s.means, s.quats[:, :3], s.log_scales, s.opacity_logits, s.sh_dc, s.sh_rest)
    with pytest.raises(ValueError, match="inconsistent N"):
        SplatSet(s.means[:4], s.quats, s.log_scales, s.opacity_logits, s.sh_dc, s.sh_rest)
    with pytest.raises(ValueError, match="1, 4, 9 or 16"):
        SplatSet(s.means, s.quats, s.log_scales, s.opacity_logits, s.sh_dc, torch.zeros(5, 5, 3))
    bad = s.means.clone()
    bad[2, 1] = float("inf")
    with pytest.raises(ValueError, match="means contains non-finite"):
        SplatSet(bad, s.quats, s.log_scales, s.opacity_logits, s.sh_dc, s.sh_rest)
    with pytest.raises(ValueError, match="different dtypes"):
        SplatSet(s.means.double(), s.quats, s.log_scales, s.opacity_logits, s.sh_dc, s.sh_rest)
