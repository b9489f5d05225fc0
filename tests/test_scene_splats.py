"""The benchmark splat kinds (gsworkbench.bench.scene_splats): each has the count and SH degree asked
for; the volumetric kind fills the object's box with splats of the documented sizes and one opacity."""

import math

import pytest
import torch

from gsworkbench import gaussians
from gsworkbench.bench import scene_splats as ss
from gsworkbench.scenes import builtin_scene


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return builtin_scene("object", width=64, height=64, n_train=4, n_test=1, cache_dir=tmp_path_factory.mktemp("c"))


@pytest.mark.parametrize("kind", ss.KINDS)
def test_each_kind_has_the_count_and_degree(scene, kind):
    s = ss.scene_splats(kind, scene, 500, sh_degree=2, seed=1)
    assert len(s.means) == 500 and s.sh.shape == (500, gaussians.num_sh_bases(2), 3)
    assert all(torch.isfinite(t).all() for t in (s.means, s.quats, s.log_scales, s.opacity_logits, s.sh))


def test_volumetric_fills_the_box_with_the_documented_sizes(scene):
    s = ss.volumetric_splats(scene, 4_000, seed=0)
    lo, hi = ss.object_box(scene, torch.Generator().manual_seed(0))
    assert ((s.means >= lo - 1e-6) & (s.means <= hi + 1e-6)).all()
    # spread over the box, not on surfaces: each axis's quartiles near a uniform's
    q = torch.quantile((s.means - lo) / (hi - lo), torch.tensor([0.25, 0.75]), dim=0)
    assert torch.allclose(q, torch.tensor([[0.25], [0.75]]).expand(2, 3), atol=0.05)
    size = float((hi - lo).max())
    lo_s, hi_s = (math.log(f * size) for f in ss.VOLUMETRIC_SCALES)
    assert s.log_scales.min() >= lo_s - 1e-5 and s.log_scales.max() <= hi_s + 1e-5
    assert torch.allclose(gaussians.opacity_from_logit(s.opacity_logits), torch.tensor(ss.VOLUMETRIC_OPACITY))


def test_an_unknown_kind_is_named(scene):
    with pytest.raises(ValueError, match="kind must be one of"):
        ss.scene_splats("hazy", scene, 10)
