"""The field trains on the model's device: targets and the trainer follow it (CUDA where present)."""

from __future__ import annotations

import pytest
import torch

from gsworkbench import field
from gsworkbench.field.targets import slice_grid
from gsworkbench.field.trainer import held_out_error


@pytest.mark.parametrize("target", ["mixture", "torus"])
def test_train_field_on_the_models_device(device, target):
    tgt = field.make_target(target, seed=1)
    model = field.GaussianField(24, "full", backend="torch", seed=1).to(device)
    before, _ = held_out_error(model, tgt)
    result = field.train_field(model, tgt, field.FieldTrainConfig(iterations=40, batch_size=512, progress=False))
    assert model.means.device.type == device
    assert result.final_error < before  # it learned, on that device


def test_targets_answer_on_the_points_device(device):
    grid = field.GridTarget(torch.rand(4, 5, 6), (-1.0, -1.0, -1.0), (1.0, 1.0, 1.0))
    g = torch.Generator().manual_seed(0)
    for tgt in (field.make_target("mixture"), field.make_target("shell"), grid):
        pts = tgt.sample(100, g, device=device)
        values = tgt(pts)
        assert pts.device.type == device and values.device.type == device
        torch.testing.assert_close(values.cpu(), tgt(pts.cpu()), rtol=1e-5, atol=1e-6)


def test_slice_grid_of_a_field_comes_back_on_the_cpu():
    model = field.GaussianField(8, "diag", backend="torch", seed=0).to(torch.float64)
    img = slice_grid(model, axis=2, res=16)
    assert img.shape == (16, 16) and img.device.type == "cpu" and img.dtype == torch.float64
