// TORCH_LIBRARY_IMPL(gsworkbench, CUDA) for transform_splats: checks the tensors and calls the launcher
// of csrc/cuda/transforms.cu on the current stream. Built only in CUDA builds (setup.py).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "transforms_cuda.h"

namespace gsw {
namespace transforms {
namespace {

void check(const at::Tensor& t, const at::Tensor& ref, const char* name, at::IntArrayRef shape) {
  TORCH_CHECK(t.is_cuda() && t.device() == ref.device(), "transform_splats: ", name, " must be on ", ref.device());
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "transform_splats: ", name, " has dtype ", t.scalar_type(),
              ", expected ", ref.scalar_type());
  TORCH_CHECK(t.sizes() == shape, "transform_splats: ", name, " must have shape ", shape, ", got ", t.sizes());
  TORCH_CHECK(t.is_contiguous(), "transform_splats: ", name, " must be contiguous");
}

void transform_splats_cuda_op(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& log_scales,
                              const at::Tensor& sh_rest, const at::Tensor& affine, const at::Tensor& sh_rot,
                              bool general, at::Tensor out_means, at::Tensor out_quats, at::Tensor out_log_scales,
                              at::Tensor out_sh_rest) {
  const auto dt = means.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble, "transform_splats: dtype must be float32 or float64");
  TORCH_CHECK(means.dim() == 2 && affine.dim() == 2 && sh_rest.dim() == 3, "transform_splats: bad ranks");
  const int64_t N = means.size(0), F = affine.size(0), K = sh_rest.size(1);
  TORCH_CHECK(K == 0 || K == 3 || K == 8 || K == 15, "transform_splats: sh_rest must have 0, 3, 8 or 15 coefficients");
  check(means, means, "means", {N, 3});
  check(quats, means, "quats", {N, 4});
  check(log_scales, means, "log_scales", {N, 3});
  check(sh_rest, means, "sh_rest", {N, K, 3});
  check(affine, means, "affine", {F, 12});
  check(sh_rot, means, "sh_rot", {F, K, K});
  check(out_means, means, "out_means", {F, N, 3});
  check(out_quats, means, "out_quats", {F, N, 4});
  check(out_log_scales, means, "out_log_scales", {F, N, 3});
  check(out_sh_rest, means, "out_sh_rest", {F, N, K, 3});
  const c10::cuda::CUDAGuard guard(means.device());
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(dt, "transform_splats_cuda", [&] {
    const cudaError_t err = transform_splats_cuda<scalar_t>(
        means.data_ptr<scalar_t>(), quats.data_ptr<scalar_t>(), log_scales.data_ptr<scalar_t>(),
        K ? sh_rest.data_ptr<scalar_t>() : nullptr, affine.data_ptr<scalar_t>(),
        K ? sh_rot.data_ptr<scalar_t>() : nullptr, general, out_means.data_ptr<scalar_t>(),
        out_quats.data_ptr<scalar_t>(), out_log_scales.data_ptr<scalar_t>(),
        K ? out_sh_rest.data_ptr<scalar_t>() : nullptr, F, N, static_cast<int>(K), stream);
    TORCH_CHECK(err == cudaSuccess, "transform_splats_cuda: ", cudaGetErrorString(err));
  });
}

}  // namespace
}  // namespace transforms
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CUDA, m) { m.impl("transform_splats", &gsw::transforms::transform_splats_cuda_op); }
