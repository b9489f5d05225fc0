// TORCH_LIBRARY_IMPL(gsworkbench, CPU) for the field ops: the plumbing shared with the CUDA binding
// (gsw/field_op.h), then the kernels of csrc/cpu/field.cpp.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "field.h"
#include "gsw/field_op.h"

namespace gsw {
namespace field {
namespace {

at::Tensor field_forward_cpu(const at::Tensor& points, const at::Tensor& means, const at::Tensor& factors,
                             const at::Tensor& weights) {
  const FieldArgs a = field_args(points, means, factors, weights);
  TORCH_CHECK(a.points.device().is_cpu(), "field_forward_cpu: inputs must be on the CPU");
  auto out = at::empty({a.B}, a.points.options());
  AT_DISPATCH_FLOATING_TYPES(a.points.scalar_type(), "field_forward_cpu", [&] {
    forward_cpu<scalar_t>(a.points.data_ptr<scalar_t>(), a.means.data_ptr<scalar_t>(), a.factors.data_ptr<scalar_t>(),
                          a.weights.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), a.B, a.N);
  });
  return out;
}

FieldGrads field_backward_cpu(const at::Tensor& grad_values, const at::Tensor& points, const at::Tensor& means,
                              const at::Tensor& factors, const at::Tensor& weights) {
  const FieldArgs a = field_args(points, means, factors, weights);
  TORCH_CHECK(a.points.device().is_cpu(), "field_backward_cpu: inputs must be on the CPU");
  const at::Tensor g = grad_values_arg(grad_values, a);
  FieldGrads out = empty_grads(a);
  auto& [gp, gm, gL, gw] = out;
  AT_DISPATCH_FLOATING_TYPES(a.points.scalar_type(), "field_backward_cpu", [&] {
    backward_cpu<scalar_t>(g.data_ptr<scalar_t>(), a.points.data_ptr<scalar_t>(), a.means.data_ptr<scalar_t>(),
                           a.factors.data_ptr<scalar_t>(), a.weights.data_ptr<scalar_t>(), gp.data_ptr<scalar_t>(),
                           gm.data_ptr<scalar_t>(), gL.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(), a.B, a.N);
  });
  return out;
}

}  // namespace
}  // namespace field
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("field_forward", &gsw::field::field_forward_cpu);
  m.impl("field_backward", &gsw::field::field_backward_cpu);
}
