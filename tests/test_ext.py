"""The one availability check of the ext backends (gsworkbench._ext.require_kernel)."""

from __future__ import annotations

import pytest
import torch
from conftest import requires_ext

from gsworkbench import _ext


@requires_ext
def test_require_kernel_passes_for_a_built_kernel_and_names_a_missing_one():
    _ext.require_kernel("field_forward", "cpu")
    with pytest.raises(ValueError, match="no cpu kernel for no_such_op in this build.*backend='torch'"):
        _ext.require_kernel("no_such_op", "cpu")
    _ext.require_kernel("no_such_op", "meta")  # no kernel table for meta: left to torch's dispatcher


@requires_ext
def test_every_ext_backend_checks_its_kernel_for_the_inputs_device(monkeypatch):
    """With the CPU kernels taken out of the table, the field, the rasterizer and the transforms each
    refuse CPU inputs with the same ValueError (as CUDA inputs are refused by a CPU-only build)."""
    from gsworkbench import field, splat
    from gsworkbench.core.splats import synthetic_splats
    from gsworkbench.transforms import transform

    monkeypatch.setattr(_ext, "_KERNELS", frozenset(k for k in _ext._KERNELS if k[1] != "cpu"))
    with pytest.raises(ValueError, match="no cpu kernel for field_forward"):
        field.evaluate(torch.zeros(1, 3), torch.zeros(1, 3), torch.eye(3)[None], torch.ones(1), backend="ext")
    s = synthetic_splats(10, 0, seed=0)
    vm, Ks = splat.orbit_cameras(1, 16, 16, distance=3.0)
    with pytest.raises(ValueError, match="no cpu kernel for splat_rasterize"):
        splat.rasterize(s.means, s.quats, s.scales, s.opacities, s.sh, vm, Ks, 16, 16, sh_degree=0, backend="ext")
    with pytest.raises(ValueError, match="no cpu kernel for transform_splats"):
        transform(s, translation=torch.ones(3), backend="ext")


def test_require_kernel_without_the_extension(monkeypatch):
    monkeypatch.setattr(_ext, "_LOAD_ERROR", "No module named 'gsworkbench._C'")
    with pytest.raises(_ext.ExtensionMissingError, match="not built"):
        _ext.require_kernel("field_forward", "cpu")
