// TORCH_LIBRARY_IMPL(gsworkbench, CPU) for transform_splats: the checks shared with the CUDA binding
// (gsw/transforms_op.h), then the kernel of csrc/cpu/transforms.cpp.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "gsw/transforms_op.h"
#include "transforms_cpu.h"

namespace gsw {
namespace transforms {
namespace {

void transform_splats_cpu_op(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& log_scales,
                             const at::Tensor& sh_rest, const at::Tensor& affine, const at::Tensor& quat_r,
                             const at::Tensor& log_s, const at::Tensor& sh_rot, bool general, at::Tensor out_means,
                             at::Tensor out_quats, at::Tensor out_log_scales, at::Tensor out_sh_rest) {
  const TransformDims d = check_transform_inputs(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot,
                                                 out_means, out_quats, out_log_scales, out_sh_rest);
  TORCH_CHECK(means.device().is_cpu(), "transform_splats (CPU): inputs must be CPU tensors");
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "transform_splats_cpu", [&] {
    transform_splats_cpu<scalar_t>(transform_params<scalar_t>(d, means, quats, log_scales, sh_rest, affine, quat_r,
                                                              log_s, sh_rot, general, out_means, out_quats,
                                                              out_log_scales, out_sh_rest));
  });
}

}  // namespace
}  // namespace transforms
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) { m.impl("transform_splats", &gsw::transforms::transform_splats_cpu_op); }
