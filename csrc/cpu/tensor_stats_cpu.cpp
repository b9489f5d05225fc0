// tensor_stats: (all finite, min, max) of several floating-point CPU tensors in one pass and one call,
// for the input checks on hot paths (gsworkbench/validation.py; torch reductions are the reference
// there and handle other devices).
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "gsw/autograd_util.h"
#include "scan_values.h"

namespace gsw {
namespace {

using Stats = ValueStats;

template <typename T>
Stats stats_of(const at::Tensor& t) {
  const T* x = t.data_ptr<T>();
  return at::parallel_reduce(
      int64_t(0), t.numel(), int64_t(1) << 18, Stats{},
      [&](int64_t b, int64_t e, Stats s) {
        const Stats r = value_stats(x + b, e - b);
        return Stats{s.nonfinite + r.nonfinite, std::min(s.lo, r.lo), std::max(s.hi, r.hi)};
      },
      [](Stats a, Stats b) { return Stats{a.nonfinite + b.nonfinite, std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; });
}

// [n, 3] float64: per tensor (number of non-finite values, min, max); min/max are +inf/-inf when empty
// and meaningless when a value is not finite.
at::Tensor tensor_stats_cpu(at::TensorList tensors) {
  const int64_t n = static_cast<int64_t>(tensors.size());
  auto out = at::empty({n, 3}, at::TensorOptions().dtype(at::kDouble));
  double* o = out.data_ptr<double>();
  for (int64_t k = 0; k < n; ++k) {
    const at::Tensor& t = tensors[k];
    TORCH_CHECK(t.device().is_cpu(), "tensor_stats: tensor ", k, " is not on the CPU");
    TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, "tensor_stats: tensor ", k,
                " must be float32 or float64, got ", t.scalar_type());
    const at::Tensor c = t.contiguous();
    const Stats s = c.scalar_type() == at::kFloat ? stats_of<float>(c) : stats_of<double>(c);
    o[3 * k] = s.nonfinite;
    o[3 * k + 1] = s.lo;
    o[3 * k + 2] = s.hi;
  }
  return out;
}

}  // namespace
}  // namespace gsw

namespace gsw {
namespace {
// Statistics for input checks, not a differentiable result: the autograd key goes straight to the kernel,
// so callers need no no_grad block (whose entry and exit a tiny call would pay for) and inputs that
// require grad get no autograd bookkeeping.
at::Tensor tensor_stats_autograd(at::TensorList tensors) {
  static const auto op = op_handle<at::Tensor(at::TensorList)>("gsworkbench::tensor_stats");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(tensors);
}
}  // namespace
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) { m.impl("tensor_stats", &gsw::tensor_stats_cpu); }
TORCH_LIBRARY_IMPL(gsworkbench, Autograd, m) { m.impl("tensor_stats", &gsw::tensor_stats_autograd); }
