// TORCH_LIBRARY_IMPL(gsworkbench, CUDA) for the field ops: allocates outputs and scratch, and calls
// the launchers of csrc/cuda/field.cu on the current stream. Built only in CUDA builds (setup.py).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "field.h"

namespace gsw {
namespace field {
namespace {

void check_cuda_inputs(const at::Tensor& points, const at::Tensor& means, const at::Tensor& factors,
                       const at::Tensor& weights) {
  TORCH_CHECK(points.dim() == 2 && points.size(1) == 3, "field: points must be [B,3]");
  TORCH_CHECK(means.dim() == 2 && means.size(1) == 3, "field: means must be [N,3]");
  const int64_t N = means.size(0);
  TORCH_CHECK(factors.dim() == 3 && factors.size(0) == N && factors.size(1) == 3 && factors.size(2) == 3,
              "field: factors must be [N,3,3]");
  TORCH_CHECK(weights.dim() == 1 && weights.size(0) == N, "field: weights must be [N]");
  for (const auto* t : {&points, &means, &factors, &weights}) {
    TORCH_CHECK(t->is_cuda() && t->device() == points.device(), "field: all inputs must be on one CUDA device");
    TORCH_CHECK(t->scalar_type() == points.scalar_type(), "field: all inputs must share one dtype");
  }
  TORCH_CHECK(points.scalar_type() == at::kFloat || points.scalar_type() == at::kDouble,
              "field: dtype must be float32 or float64");
}

at::Tensor field_forward_cuda(const at::Tensor& points, const at::Tensor& means, const at::Tensor& factors,
                              const at::Tensor& weights) {
  check_cuda_inputs(points, means, factors, weights);
  const c10::cuda::CUDAGuard guard(points.device());
  const auto p = points.contiguous(), mu = means.contiguous(), L = factors.contiguous(), w = weights.contiguous();
  const int64_t B = p.size(0), N = mu.size(0);
  auto out = at::empty({B}, p.options());
  auto scratch = at::empty({N * 10}, p.options());
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "field_forward_cuda", [&] {
    const cudaError_t err = forward_cuda<scalar_t>(p.data_ptr<scalar_t>(), mu.data_ptr<scalar_t>(),
                                                   L.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                                                   out.data_ptr<scalar_t>(), scratch.data_ptr<scalar_t>(), B, N, stream);
    TORCH_CHECK(err == cudaSuccess, "field_forward_cuda: ", cudaGetErrorString(err));
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> field_backward_cuda(const at::Tensor& grad_values,
                                                                               const at::Tensor& points,
                                                                               const at::Tensor& means,
                                                                               const at::Tensor& factors,
                                                                               const at::Tensor& weights) {
  check_cuda_inputs(points, means, factors, weights);
  TORCH_CHECK(grad_values.dim() == 1 && grad_values.size(0) == points.size(0), "field: grad_values must be [B]");
  const c10::cuda::CUDAGuard guard(points.device());
  const auto g = grad_values.to(points.scalar_type()).contiguous();
  const auto p = points.contiguous(), mu = means.contiguous(), L = factors.contiguous(), w = weights.contiguous();
  const int64_t B = p.size(0), N = mu.size(0);
  auto gp = at::empty({B, 3}, p.options());
  auto gm = at::empty({N, 3}, p.options());
  auto gL = at::empty({N, 3, 3}, p.options());
  auto gw = at::empty({N}, p.options());
  auto scratch = at::empty({N * 20}, p.options());
  auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "field_backward_cuda", [&] {
    const cudaError_t err = backward_cuda<scalar_t>(
        g.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(), mu.data_ptr<scalar_t>(), L.data_ptr<scalar_t>(),
        w.data_ptr<scalar_t>(), gp.data_ptr<scalar_t>(), gm.data_ptr<scalar_t>(), gL.data_ptr<scalar_t>(),
        gw.data_ptr<scalar_t>(), scratch.data_ptr<scalar_t>(), B, N, stream);
    TORCH_CHECK(err == cudaSuccess, "field_backward_cuda: ", cudaGetErrorString(err));
  });
  return {gp, gm, gL, gw};
}

}  // namespace
}  // namespace field
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CUDA, m) {
  m.impl("field_forward", &gsw::field::field_forward_cuda);
  m.impl("field_backward", &gsw::field::field_backward_cuda);
}
