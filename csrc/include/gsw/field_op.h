// Host-side (ATen) plumbing of the field ops shared by the CPU and CUDA bindings: input checks,
// contiguous copies and output allocation. Not for .cu files (they stay ATen-free).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <tuple>

namespace gsw {
namespace field {

struct FieldArgs {
  at::Tensor points, means, factors, weights;  // contiguous
  int64_t B, N;
};

inline FieldArgs field_args(const at::Tensor& points, const at::Tensor& means, const at::Tensor& factors,
                            const at::Tensor& weights) {
  TORCH_CHECK(points.dim() == 2 && points.size(1) == 3, "field: points must be [B,3]");
  TORCH_CHECK(means.dim() == 2 && means.size(1) == 3, "field: means must be [N,3]");
  const int64_t N = means.size(0);
  TORCH_CHECK(factors.dim() == 3 && factors.size(0) == N && factors.size(1) == 3 && factors.size(2) == 3,
              "field: factors must be [N,3,3]");
  TORCH_CHECK(weights.dim() == 1 && weights.size(0) == N, "field: weights must be [N]");
  for (const auto* t : {&means, &factors, &weights}) {
    TORCH_CHECK(t->scalar_type() == points.scalar_type(), "field: all inputs must share one dtype");
    TORCH_CHECK(t->device() == points.device(), "field: all inputs must be on one device");
  }
  TORCH_CHECK(points.scalar_type() == at::kFloat || points.scalar_type() == at::kDouble,
              "field: dtype must be float32 or float64");
  return {points.contiguous(), means.contiguous(), factors.contiguous(), weights.contiguous(), points.size(0), N};
}

inline at::Tensor grad_values_arg(const at::Tensor& grad_values, const FieldArgs& a) {
  TORCH_CHECK(grad_values.dim() == 1 && grad_values.size(0) == a.B, "field: grad_values must be [B]");
  TORCH_CHECK(grad_values.device() == a.points.device(), "field: grad_values must be on ", a.points.device(),
              ", got ", grad_values.device());
  TORCH_CHECK(at::isFloatingType(grad_values.scalar_type()), "field: grad_values must be floating point");
  return grad_values.to(a.points.scalar_type()).contiguous();
}

using FieldGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// (grad_points [B,3], grad_means [N,3], grad_factors [N,3,3], grad_weights [N]), uninitialised.
inline FieldGrads empty_grads(const FieldArgs& a) {
  const auto opt = a.points.options();
  return {at::empty({a.B, 3}, opt), at::empty({a.N, 3}, opt), at::empty({a.N, 3, 3}, opt), at::empty({a.N}, opt)};
}

}  // namespace field
}  // namespace gsw
