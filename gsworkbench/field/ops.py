"""The extension's field ops: fake (meta) kernels, registered with torch.library.

``field_forward(points, means, factors, weights) -> values`` is fused (O(B+N) memory); its backward
is the analytic ``field_backward`` op. Both live in csrc/ (CPU: csrc/cpu/field.cpp, CUDA:
csrc/cuda/field.cu), with their per-pair math in csrc/include/gsw/field.h. The autograd of
``field_forward`` is registered in C++ (csrc/autograd/field_autograd.cpp): a Python autograd layer
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


# Floating-point operations per (point, Gaussian) pair, an FMA counted as two, as the formula is
# evaluated in the plain form of the backward (csrc/cpu/field.cpp backward_blocks, per-pair math in
# csrc/include/gsw/field.h); the one fixed count of a pair's work, so that a kernel that does the same
# work in fewer instructions (the forward folds -1/2 and log2(e) into its factors and drops two of
# these) shows as a higher rate:
#   whiten: d = x - mu (3), z = M d with M lower (1 + 3 + 5), q = |z|^2 (5)               = 17
#   kernel: -q/2 (1), exp: scale, round (2 adds), reduce (4), degree-7 poly (14), 2^n (1) = 23
#   forward: acc += w e (2)                                                                = 42
#   backward: whiten and kernel again (40),
#   ge = grad e and its sum (2), ge z_i and their sums (6), the six ge z_i d_j sums (12), w e (1),
#   the point gradient -w e M^T z (7 + 5 + 3)                                              = 76
FIELD_FORWARD_FLOPS_PER_PAIR = 42
FIELD_BACKWARD_FLOPS_PER_PAIR = 76


def field_work(B: int, N: int, mode: str = "forward", itemsize: int = 4) -> dict[str, float]:
    """The work of one ``field_forward`` call (``mode="forward"``) or of a forward and its
    ``field_backward`` (``"forward+backward"``) on B points and N Gaussians: ``flops_per_call`` (pairs
    x flops per pair, :data:`FIELD_FORWARD_FLOPS_PER_PAIR` and :data:`FIELD_BACKWARD_FLOPS_PER_PAIR`)
    and ``bytes_per_call`` (each input read once and each output written once, ``itemsize`` bytes a
    value: points 3B, means 3N, factors 9N, weights N read, values B written; the backward reads them and
    the B incoming gradients again and writes the four gradients, 3B + 3N + 9N + N).

    Left out: the O(B + N) work per point and per Gaussian (inverting the factors, the backward's final
    per-Gaussian reduction and its per-thread double sums), and the re-reads of the packed Gaussians
    from cache for every block of points: the count is the pair work and the compulsory traffic."""
    if mode not in ("forward", "forward+backward"):
        raise ValueError(f"field_work: mode must be 'forward' or 'forward+backward', got {mode!r}")
    inputs = 3 * B + 13 * N
    flops = FIELD_FORWARD_FLOPS_PER_PAIR * B * N
    values = inputs + B
    if mode == "forward+backward":
        flops += FIELD_BACKWARD_FLOPS_PER_PAIR * B * N
        values += inputs + B + 3 * B + 13 * N
    return {"flops_per_call": float(flops), "bytes_per_call": float(values * itemsize)}
