// TORCH_LIBRARY_IMPL(gsworkbench, CUDA) for the field ops: allocates outputs and scratch, and calls
// the launchers of csrc/cuda/field.cu on the current stream. Built only in CUDA builds (setup.py).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "field.h"
#include "gsw/field_op.h"

namespace gsw {
namespace field {
namespace {

at::Tensor field_forward_cuda(const at::Tensor& points, const at::Tensor& means, const at::Tensor& factors,
                              const at::Tensor& weights) {
  const FieldArgs a = field_args(points, means, factors, weights);
  TORCH_CHECK(a.points.is_cuda(), "field_forward_cuda: inputs must be CUDA tensors");
  const c10::cuda::CUDAGuard guard(a.points.device());
  auto out = at::empty({a.B}, a.points.options());
  auto scratch = at::empty({a.N * 10}, a.points.options());
  AT_DISPATCH_FLOATING_TYPES(a.points.scalar_type(), "field_forward_cuda", [&] {
    const cudaError_t err = forward_cuda<scalar_t>(
        a.points.data_ptr<scalar_t>(), a.means.data_ptr<scalar_t>(), a.factors.data_ptr<scalar_t>(),
        a.weights.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), scratch.data_ptr<scalar_t>(), a.B, a.N,
        c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "field_forward_cuda: ", cudaGetErrorString(err));
  });
  return out;
}

FieldGrads field_backward_cuda(const at::Tensor& grad_values, const at::Tensor& points, const at::Tensor& means,
                               const at::Tensor& factors, const at::Tensor& weights) {
  const FieldArgs a = field_args(points, means, factors, weights);
  TORCH_CHECK(a.points.is_cuda(), "field_backward_cuda: inputs must be CUDA tensors");
  const c10::cuda::CUDAGuard guard(a.points.device());
  const at::Tensor g = grad_values_arg(grad_values, a);
  FieldGrads out = empty_grads(a);
  auto& [gp, gm, gL, gw] = out;
  auto scratch = at::empty({a.N * 20}, a.points.options());
  AT_DISPATCH_FLOATING_TYPES(a.points.scalar_type(), "field_backward_cuda", [&] {
    const cudaError_t err = backward_cuda<scalar_t>(
        g.data_ptr<scalar_t>(), a.points.data_ptr<scalar_t>(), a.means.data_ptr<scalar_t>(),
        a.factors.data_ptr<scalar_t>(), a.weights.data_ptr<scalar_t>(), gp.data_ptr<scalar_t>(),
        gm.data_ptr<scalar_t>(), gL.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(), scratch.data_ptr<scalar_t>(), a.B,
        a.N, c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "field_backward_cuda: ", cudaGetErrorString(err));
  });
  return out;
}

}  // namespace
}  // namespace field
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CUDA, m) {
  m.impl("field_forward", &gsw::field::field_forward_cuda);
  m.impl("field_backward", &gsw::field::field_backward_cuda);
}
