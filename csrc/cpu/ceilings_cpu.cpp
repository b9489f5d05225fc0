// TORCH_LIBRARY_IMPL(gsworkbench, CPU) for the roofline ceilings: the input checks, then the loops of
// csrc/cpu/ceilings.cpp. Neither op is differentiable: CPU kernels only, no autograd.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/core/Tensor.h>
#include <omp.h>
#include <torch/library.h>

#include <cstdint>

#include "ceilings.h"
#include "gsw/ceilings.h"

namespace gsw {
namespace ceilings {
namespace {

// start [T, kFmaAccumulators, kFmaLanes] float32 -> the chains' final values, same shape; row t runs on
// thread t of a team of T (T at most the OpenMP thread count).
at::Tensor ceiling_fma_cpu(const at::Tensor& start, double a, double b, int64_t iterations) {
  TORCH_CHECK(start.device().is_cpu(), "ceiling_fma: start must be on the CPU");
  TORCH_CHECK(start.scalar_type() == at::kFloat, "ceiling_fma: start must be float32, got ", start.scalar_type());
  TORCH_CHECK(start.dim() == 3 && start.size(1) == kFmaAccumulators && start.size(2) == kFmaLanes,
              "ceiling_fma: start must be [threads, ", kFmaAccumulators, ", ", kFmaLanes, "] (this build's ",
              kFmaAccumulators, " accumulators of ", kFmaLanes, " float lanes), got ", start.sizes());
  TORCH_CHECK(iterations >= 0, "ceiling_fma: iterations must be >= 0, got ", iterations);
  const int64_t T = start.size(0);
  TORCH_CHECK(T >= 1 && T <= omp_get_max_threads(), "ceiling_fma: threads (start.size(0)) must be in [1, ",
              omp_get_max_threads(), "], got ", T);
  at::Tensor out = start.contiguous().clone();
  fma_team(out.data_ptr<float>(), T, static_cast<float>(a), static_cast<float>(b), iterations);
  return out;
}

// a[i] = b[i] + s * c[i] for 1-D contiguous float32 CPU tensors of one length.
void ceiling_triad_cpu(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, double s) {
  for (const at::Tensor* t : {&a, &b, &c}) {
    TORCH_CHECK(t->device().is_cpu(), "ceiling_triad: buffers must be on the CPU");
    TORCH_CHECK(t->scalar_type() == at::kFloat, "ceiling_triad: buffers must be float32, got ", t->scalar_type());
    TORCH_CHECK(t->dim() == 1 && t->is_contiguous(), "ceiling_triad: buffers must be 1-D and contiguous, got ",
                t->sizes());
  }
  const int64_t n = a.numel();
  TORCH_CHECK(b.numel() == n && c.numel() == n, "ceiling_triad: buffers must have one length, got ", n, ", ",
              b.numel(), ", ", c.numel());
  triad(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), static_cast<float>(s), n);
}

}  // namespace
}  // namespace ceilings
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("ceiling_fma", &gsw::ceilings::ceiling_fma_cpu);
  m.impl("ceiling_triad", &gsw::ceilings::ceiling_triad_cpu);
}
