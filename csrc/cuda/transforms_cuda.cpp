// TORCH_LIBRARY_IMPL(gsworkbench, CUDA) for transform_splats: the checks shared with the CPU binding
// (gsw/transforms_op.h), then the launcher
// of csrc/cuda/transforms.cu on the current stream. Built only in CUDA builds (setup.py).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "gsw/transforms_op.h"
#include "transforms_cuda.h"

namespace gsw {
namespace transforms {
namespace {

void transform_splats_cuda_op(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& log_scales,
                              const at::Tensor& sh_rest, const at::Tensor& affine, const at::Tensor& quat_r,
                              const at::Tensor& log_s, const at::Tensor& sh_rot, bool general, at::Tensor out_means,
                              at::Tensor out_quats, at::Tensor out_log_scales, at::Tensor out_sh_rest) {
  const TransformDims d = check_transform_inputs(means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot,
                                                 out_means, out_quats, out_log_scales, out_sh_rest);
  TORCH_CHECK(means.is_cuda(), "transform_splats (CUDA): inputs must be CUDA tensors");
  const c10::cuda::CUDAGuard guard(means.device());
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "transform_splats_cuda", [&] {
    const auto p = transform_params<scalar_t>(d, means, quats, log_scales, sh_rest, affine, quat_r, log_s, sh_rot,
                                              general, out_means, out_quats, out_log_scales, out_sh_rest);
    const cudaError_t err = transform_splats_cuda<scalar_t>(p, stream);
    TORCH_CHECK(err == cudaSuccess, "transform_splats_cuda: ", cudaGetErrorString(err));
  });
}

}  // namespace
}  // namespace transforms
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CUDA, m) { m.impl("transform_splats", &gsw::transforms::transform_splats_cuda_op); }
