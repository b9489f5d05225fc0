// The machine's two roofline ceilings, measured by the same build as the kernels they judge
// (gsworkbench/profiling/ceilings.py times them):
//   ceiling_fma:   peak float32 FMA throughput, every thread running kFmaAccumulators independent
//                  chains of acc = acc * a + b in the widest SIMD registers this build's kernels use
//                  (AVX-512 under __AVX512F__, else AVX2+FMA), enough chains to hide the FMA latency
//                  on two FMA pipes;
//   ceiling_triad: STREAM's triad a[i] = b[i] + s * c[i] over buffers the caller allocates (far above
//                  the last-level cache), OpenMP static schedule.
// Neither is differentiable: CPU kernels only, no autograd.
// Per-operator ATen headers only: <ATen/ATen.h> (every operator, most of the compile time) then fails.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <omp.h>
#include <torch/library.h>

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include "gsw/ceilings.h"

namespace gsw {
namespace ceilings {
namespace {

// One thread's chains: acc[k][l] = acc[k][l] * a + b, `iterations` times, in registers.
#if defined(__AVX512F__)
void fma_chains(float* acc, float a, float b, int64_t iterations) {
  __m512 r[kFmaAccumulators];
  for (int k = 0; k < kFmaAccumulators; ++k) r[k] = _mm512_loadu_ps(acc + k * kFmaLanes);
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kFmaAccumulators; ++k) r[k] = _mm512_fmadd_ps(r[k], va, vb);
  }
  for (int k = 0; k < kFmaAccumulators; ++k) _mm512_storeu_ps(acc + k * kFmaLanes, r[k]);
}
#elif defined(__AVX2__) && defined(__FMA__)
void fma_chains(float* acc, float a, float b, int64_t iterations) {
  __m256 r[kFmaAccumulators];
  for (int k = 0; k < kFmaAccumulators; ++k) r[k] = _mm256_loadu_ps(acc + k * kFmaLanes);
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kFmaAccumulators; ++k) r[k] = _mm256_fmadd_ps(r[k], va, vb);
  }
  for (int k = 0; k < kFmaAccumulators; ++k) _mm256_storeu_ps(acc + k * kFmaLanes, r[k]);
}
#else
// Generic targets: plain lanes (the compiler vectorizes what the target allows; a * x + b contracts to
// an FMA where the target has one).
void fma_chains(float* acc, float a, float b, int64_t iterations) {
  float r[kFmaAccumulators * kFmaLanes];
  for (int j = 0; j < kFmaAccumulators * kFmaLanes; ++j) r[j] = acc[j];
  for (int64_t i = 0; i < iterations; ++i) {
#pragma omp simd
    for (int j = 0; j < kFmaAccumulators * kFmaLanes; ++j) r[j] = r[j] * a + b;
  }
  for (int j = 0; j < kFmaAccumulators * kFmaLanes; ++j) acc[j] = r[j];
}
#endif

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
  float* o = out.data_ptr<float>();
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
#pragma omp parallel num_threads(static_cast<int>(T))
  {
    // One row a thread; a smaller team than asked for (never the case unless OpenMP is dynamic) still
    // runs every row.
    for (int64_t t = omp_get_thread_num(); t < T; t += omp_get_num_threads())
      fma_chains(o + t * kFmaAccumulators * kFmaLanes, fa, fb, iterations);
  }
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
  float* __restrict pa = a.data_ptr<float>();
  const float* __restrict pb = b.data_ptr<float>();
  const float* __restrict pc = c.data_ptr<float>();
  const float fs = static_cast<float>(s);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + fs * pc[i];
}

}  // namespace
}  // namespace ceilings
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("ceiling_fma", &gsw::ceilings::ceiling_fma_cpu);
  m.impl("ceiling_triad", &gsw::ceilings::ceiling_triad_cpu);
}
