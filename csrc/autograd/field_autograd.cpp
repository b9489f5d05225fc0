// Autograd of gsworkbench::field_forward, in C++: the backward is the analytic field_backward op.
// Registered for every device (the Autograd alias key) and traced by torch.compile like any op.
// Being C++, it adds far less to a tiny call than a Python autograd layer (torch.library.register_autograd)
// would, in the forward and again in the backward.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <tuple>

#include "gsw/autograd_util.h"

namespace gsw {
namespace field {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

at::Tensor call_forward(const at::Tensor& points, const at::Tensor& means, const at::Tensor& factors,
                        const at::Tensor& weights) {
  static const auto op = op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                              const at::Tensor&)>("gsworkbench::field_forward");
  return op.call(points, means, factors, weights);
}

Grads call_backward(const at::Tensor& grad, const at::Tensor& points, const at::Tensor& means,
                    const at::Tensor& factors, const at::Tensor& weights) {
  static const auto op = op_handle<Grads(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const at::Tensor&)>("gsworkbench::field_backward");
  return op.call(grad, points, means, factors, weights);
}

class FieldForward : public torch::autograd::Function<FieldForward> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& points, const at::Tensor& means,
                            const at::Tensor& factors, const at::Tensor& weights) {
    ctx->save_for_backward({points, means, factors, weights});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_forward(points, means, factors, weights);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    auto [gp, gm, gf, gw] = call_backward(grads[0].contiguous(), s[0], s[1], s[2], s[3]);
    return {gp, gm, gf, gw};
  }
};

at::Tensor field_forward_autograd(const at::Tensor& points, const at::Tensor& means, const at::Tensor& factors,
                                  const at::Tensor& weights) {
  return FieldForward::apply(points, means, factors, weights);
}

}  // namespace
}  // namespace field
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, Autograd, m) { m.impl("field_forward", &gsw::field::field_forward_autograd); }
