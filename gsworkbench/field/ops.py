"""The extension's field ops: fake (meta) kernels, registered with torch.library.

``field_forward(points, means, factors, weights) -> values`` is fused (O(B+N) memory); its backward
is the analytic ``field_backward`` op. Both live in csrc/ (CPU: csrc/cpu/field.cpp, CUDA:
csrc/cuda/field.cu), with their per-pair math in csrc/include/gsw/field.h. The autograd of
``field_forward`` is registered in C++ (csrc/field_autograd.cpp): a Python autograd layer
(torch.library.register_autograd) cost tiny calls more than the kernels themselves.
"""

from __future__ import annotations

import torch

from gsworkbench._ext import has_ext, require_ext


def _register() -> None:
    @torch.library.register_fake("gsworkbench::field_forward")
    def _forward_fake(points, means, factors, weights):  # noqa: ANN001, ANN202
        return points.new_empty(points.shape[0])

    @torch.library.register_fake("gsworkbench::field_backward")
    def _backward_fake(grad_values, points, means, factors, weights):  # noqa: ANN001, ANN202
        return (
            torch.empty_like(points),
            torch.empty_like(means),
            torch.empty_like(factors),
            torch.empty_like(weights),
        )


if has_ext():
    _register()


def field_forward(
    points: torch.Tensor, means: torch.Tensor, factors: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """values [B] = sum_n w_n exp(-1/2 |L_n^-1 (x_b - mu_n)|^2); differentiable in every input."""
    require_ext()
    return torch.ops.gsworkbench.field_forward(points, means, factors, weights)
