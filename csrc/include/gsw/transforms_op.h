// Host-side (ATen) input checks of gsworkbench::transform_splats, shared by the CPU
// (csrc/cpu/transforms.cpp) and CUDA (csrc/cuda/transforms_cuda.cpp) bindings: both accept the same
// inputs. Not for .cu files (they stay ATen-free).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "gsw/transforms_params.h"

namespace gsw {
namespace transforms {

// t on ref's device, of ref's dtype, of `shape`, contiguous.
inline void check_operand(const at::Tensor& t, const at::Tensor& ref, const char* name, at::IntArrayRef shape) {
  TORCH_CHECK(t.device() == ref.device(), "transform_splats: ", name, " must be on ", ref.device(), ", got ",
              t.device());
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "transform_splats: ", name, " has dtype ", t.scalar_type(),
              ", expected ", ref.scalar_type());
  TORCH_CHECK(t.sizes() == shape, "transform_splats: ", name, " must have shape ", shape, ", got ", t.sizes());
  TORCH_CHECK(t.is_contiguous(), "transform_splats: ", name, " must be contiguous");
}

struct TransformDims {
  int64_t F, N, K;
};

// means [N,3], quats [N,4], log_scales [N,3], sh_rest [N,K,3] (K = 0, 3, 8 or 15), affine [F,12],
// quat_r [F,4], log_s [F], sh_rot [F,K,K], outputs [F,N,...]: one dtype (float32/float64), one device,
// all contiguous.
inline TransformDims check_transform_inputs(const at::Tensor& means, const at::Tensor& quats,
                                            const at::Tensor& log_scales, const at::Tensor& sh_rest,
                                            const at::Tensor& affine, const at::Tensor& quat_r,
                                            const at::Tensor& log_s, const at::Tensor& sh_rot,
                                            const at::Tensor& out_means, const at::Tensor& out_quats,
                                            const at::Tensor& out_log_scales, const at::Tensor& out_sh_rest) {
  const auto dt = means.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble, "transform_splats: dtype must be float32 or float64");
  TORCH_CHECK(means.dim() == 2 && affine.dim() == 2 && sh_rest.dim() == 3, "transform_splats: bad ranks");
  const int64_t N = means.size(0), F = affine.size(0), K = sh_rest.size(1);
  TORCH_CHECK(K == 0 || K == 3 || K == 8 || K == 15,
              "transform_splats: sh_rest must have 0, 3, 8 or 15 coefficients");
  check_operand(means, means, "means", {N, 3});
  check_operand(quats, means, "quats", {N, 4});
  check_operand(log_scales, means, "log_scales", {N, 3});
  check_operand(sh_rest, means, "sh_rest", {N, K, 3});
  check_operand(affine, means, "affine", {F, 12});
  check_operand(quat_r, means, "quat_r", {F, 4});
  check_operand(log_s, means, "log_s", {F});
  check_operand(sh_rot, means, "sh_rot", {F, K, K});
  check_operand(out_means, means, "out_means", {F, N, 3});
  check_operand(out_quats, means, "out_quats", {F, N, 4});
  check_operand(out_log_scales, means, "out_log_scales", {F, N, 3});
  check_operand(out_sh_rest, means, "out_sh_rest", {F, N, K, 3});
  return {F, N, K};
}

// The operands of a checked call (d: check_transform_inputs) as the kernels' struct.
template <typename T>
TransformParams<T> transform_params(const TransformDims& d, const at::Tensor& means, const at::Tensor& quats,
                                    const at::Tensor& log_scales, const at::Tensor& sh_rest, const at::Tensor& affine,
                                    const at::Tensor& quat_r, const at::Tensor& log_s, const at::Tensor& sh_rot,
                                    bool general, const at::Tensor& out_means, const at::Tensor& out_quats,
                                    const at::Tensor& out_log_scales, const at::Tensor& out_sh_rest) {
  const bool sh = d.K > 0;
  return {means.data_ptr<T>(),
          quats.data_ptr<T>(),
          log_scales.data_ptr<T>(),
          sh ? sh_rest.data_ptr<T>() : nullptr,
          affine.data_ptr<T>(),
          quat_r.data_ptr<T>(),
          log_s.data_ptr<T>(),
          sh ? sh_rot.data_ptr<T>() : nullptr,
          out_means.data_ptr<T>(),
          out_quats.data_ptr<T>(),
          out_log_scales.data_ptr<T>(),
          sh ? out_sh_rest.data_ptr<T>() : nullptr,
          d.F,
          d.N,
          static_cast<int>(d.K),
          general};
}

}  // namespace transforms
}  // namespace gsw
