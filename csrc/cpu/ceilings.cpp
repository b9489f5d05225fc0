// The machine's two roofline ceilings, measured by the same build as the kernels they judge
// (gsworkbench/profiling/ceilings.py times them):
//   ceiling_fma:   peak float32 FMA throughput, every thread running kFmaAccumulators independent
//                  chains of acc = acc * a + b in the widest SIMD registers this build's kernels use
//                  (AVX-512 under __AVX512F__, else AVX2+FMA), enough chains to hide the FMA latency
//                  on two FMA pipes;
//   ceiling_triad: STREAM's triad a[i] = b[i] + s * c[i] over buffers the caller allocates (far above
//                  the last-level cache), OpenMP static schedule.
// Bound to the ops by ceilings_cpu.cpp.
#include <omp.h>

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include "ceilings.h"
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

}  // namespace

void fma_team(float* rows, int64_t T, float a, float b, int64_t iterations) {
#pragma omp parallel num_threads(static_cast<int>(T))
  {
    // One row a thread; a smaller team than asked for (never the case unless OpenMP is dynamic) still
    // runs every row.
    for (int64_t t = omp_get_thread_num(); t < T; t += omp_get_num_threads())
      fma_chains(rows + t * kFmaAccumulators * kFmaLanes, a, b, iterations);
  }
}

void triad(float* __restrict a, const float* __restrict b, const float* __restrict c, float s, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace ceilings
}  // namespace gsw
