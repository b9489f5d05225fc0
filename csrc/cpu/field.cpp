// CPU kernels of the Gaussian field: fused forward and analytic backward, O(B + N) memory.
// OpenMP over blocks of kBlock points; the inner loop over the points of a block is SIMD. Bound to the
// ops by field_cpu.cpp.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Parallel.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "field.h"
#include "gsw/field.h"
#include "gsw/parallel.h"

namespace gsw {
namespace field {
namespace {

constexpr int64_t kBlock = 64;
// Work per thread before a region wakes another thread, in (block of kBlock points) x Gaussian units:
// 256 units are 16k pairs, about as much work as waking a sleeping thread costs.
constexpr int64_t kMinForwardUnits = 256;
constexpr int64_t kMinBackwardUnits = 128;  // a backward pair costs about twice a forward one

// Threads for a region over `nblocks` blocks of points and N Gaussians: threads_for the pairs, and
// no more than there are blocks.
inline int threads_for_blocks(int64_t nblocks, int64_t N, int64_t min_units) {
  return static_cast<int>(std::min<int64_t>(threads_for(nblocks * N, min_units), std::max<int64_t>(nblocks, 1)));
}

template <typename T>
std::vector<Gauss<T>> prepare_all(const T* means, const T* factors, const T* weights, int64_t N) {
  std::vector<Gauss<T>> g(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) g[n] = prepare(factors + 9 * n, means + 3 * n, weights[n]);
  return g;
}

// Copies a block of points [B,3] into SoA arrays; padded lanes sit at the first point (finite).
template <typename T, int64_t Block = kBlock>
void load_block(const T* points, int64_t b0, int64_t count, T* px, T* py, T* pz) {
  for (int64_t j = 0; j < Block; ++j) {
    const int64_t b = b0 + (j < count ? j : 0);
    px[j] = points[3 * b];
    py[j] = points[3 * b + 1];
    pz[j] = points[3 * b + 2];
  }
}

// Sums every Gaussian over one block of kBlock points (SoA), into acc.
template <typename T>
__attribute__((noinline)) void forward_block(const Gauss<T>* __restrict gs, int64_t N, const T* __restrict px,
                                             const T* __restrict py, const T* __restrict pz, T* __restrict acc) {
  for (int64_t j = 0; j < kBlock; ++j) acc[j] = T(0);
  for (int64_t n = 0; n < N; ++n) {
    const Gauss<T> g = gs[n];
#pragma omp simd
    for (int64_t j = 0; j < kBlock; ++j) acc[j] += forward_value(g, px[j], py[j], pz[j]);
  }
}

template <typename T>
void forward_kernel(const T* points, const Gauss<T>* gs, T* out, int64_t B, int64_t N) {
  const int64_t nblocks = (B + kBlock - 1) / kBlock;
#pragma omp parallel num_threads(threads_for_blocks(nblocks, N, kMinForwardUnits))
  {
    DenormalsOff ftz;
    alignas(64) T px[kBlock], py[kBlock], pz[kBlock], acc[kBlock];
#pragma omp for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t b0 = blk * kBlock;
      const int64_t count = B - b0 < kBlock ? B - b0 : kBlock;
      load_block(points, b0, count, px, py, pz);
      forward_block(gs, N, px, py, pz, acc);
      for (int64_t j = 0; j < count; ++j) out[b0 + j] = acc[j];
    }
  }
}

// Backward over blocks of Block points. Per block and Gaussian, the 10 per-Gaussian sums are reduced
// across the block's lanes once, so larger blocks amortise that reduction (see backward_kernel).
template <typename T, int64_t Block>
void backward_blocks(const T* grad, const T* points, const Gauss<T>* gs, T* grad_points, double* sums, int64_t B,
                     int64_t N, int nthreads) {
  const int64_t nblocks = (B + Block - 1) / Block;
#pragma omp parallel num_threads(nthreads)
  {
    DenormalsOff ftz;
    double* my = sums + static_cast<size_t>(omp_get_thread_num()) * N * kAccum;
    alignas(64) T px[Block], py[Block], pz[Block], gb[Block], gx[Block], gy[Block], gz[Block];
#pragma omp for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t b0 = blk * Block;
      const int64_t count = B - b0 < Block ? B - b0 : Block;
      load_block<T, Block>(points, b0, count, px, py, pz);
      for (int64_t j = 0; j < Block; ++j) {
        gb[j] = j < count ? grad[b0 + j] : T(0);  // padded lanes contribute nothing
        gx[j] = gy[j] = gz[j] = T(0);
      }
      for (int64_t n = 0; n < N; ++n) {
        const Gauss<T> g = gs[n];
        T a = 0, s0 = 0, s1 = 0, s2 = 0, t00 = 0, t10 = 0, t11 = 0, t20 = 0, t21 = 0, t22 = 0;
#pragma omp simd aligned(px, py, pz, gb, gx, gy, gz : 64) \
    reduction(+ : a, s0, s1, s2, t00, t10, t11, t20, t21, t22)
        for (int64_t j = 0; j < Block; ++j) {
          const Pair<T> p = whiten(g, px[j], py[j], pz[j]);
          const T e = kernel(p.q);
          const T ge = gb[j] * e;
          a += ge;
          const T gz0 = ge * p.z0, gz1 = ge * p.z1, gz2 = ge * p.z2;
          s0 += gz0;
          s1 += gz1;
          s2 += gz2;
          t00 += gz0 * p.d0;
          t10 += gz1 * p.d0;
          t11 += gz1 * p.d1;
          t20 += gz2 * p.d0;
          t21 += gz2 * p.d1;
          t22 += gz2 * p.d2;
          // d value / d x = -w e M^T z (times grad, applied after the loop over n)
          const T we = g.w * e;
          gx[j] -= we * (g.m00 * p.z0 + g.m10 * p.z1 + g.m20 * p.z2);
          gy[j] -= we * (g.m11 * p.z1 + g.m21 * p.z2);
          gz[j] -= we * (g.m22 * p.z2);
        }
        double* acc = my + n * kAccum;
        acc[0] += a;
        acc[1] += s0;
        acc[2] += s1;
        acc[3] += s2;
        acc[4] += t00;
        acc[5] += t10;
        acc[6] += t11;
        acc[7] += t20;
        acc[8] += t21;
        acc[9] += t22;
      }
      for (int64_t j = 0; j < count; ++j) {
        grad_points[3 * (b0 + j)] = gb[j] * gx[j];
        grad_points[3 * (b0 + j) + 1] = gb[j] * gy[j];
        grad_points[3 * (b0 + j) + 2] = gb[j] * gz[j];
      }
    }
  }
}

template <typename T>
void backward_kernel(const T* grad, const T* points, const Gauss<T>* gs, T* grad_points, T* grad_means,
                     T* grad_factors, T* grad_weights, int64_t B, int64_t N) {
  const int nthreads = threads_for_blocks((B + kBlock - 1) / kBlock, N, kMinBackwardUnits);
  // Per-thread per-Gaussian sums (double: they add up to B terms).
  std::vector<double> sums(static_cast<size_t>(nthreads) * N * kAccum, 0.0);
  // The largest block that still gives every thread a block of its own: a larger block amortises the
  // per-Gaussian reduction across its lanes over more points (see backward_blocks).
  const int64_t per_thread = B / static_cast<int64_t>(nthreads);
  if (per_thread >= 512) {
    backward_blocks<T, 512>(grad, points, gs, grad_points, sums.data(), B, N, nthreads);
  } else if (per_thread >= 256) {
    backward_blocks<T, 256>(grad, points, gs, grad_points, sums.data(), B, N, nthreads);
  } else if (per_thread >= 128) {
    backward_blocks<T, 128>(grad, points, gs, grad_points, sums.data(), B, N, nthreads);
  } else {
    backward_blocks<T, 64>(grad, points, gs, grad_points, sums.data(), B, N, nthreads);
  }
  at::parallel_for(0, N, 256, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      T acc[kAccum];
      for (int k = 0; k < kAccum; ++k) {
        double s = 0.0;
        for (int t = 0; t < nthreads; ++t) s += sums[(static_cast<size_t>(t) * N + n) * kAccum + k];
        acc[k] = static_cast<T>(s);
      }
      finish_gaussian(gs[n], acc, grad_means + 3 * n, grad_factors + 9 * n, grad_weights + n);
    }
  });
}

}  // namespace

template <typename T>
void forward_cpu(const T* points, const T* means, const T* factors, const T* weights, T* values, int64_t B,
                 int64_t N) {
  const auto gs = prepare_all(means, factors, weights, N);
  std::vector<Gauss<T>> g2(gs.size());
  std::transform(gs.begin(), gs.end(), g2.begin(), forward_form<T>);
  forward_kernel(points, g2.data(), values, B, N);
}

template <typename T>
void backward_cpu(const T* grad, const T* points, const T* means, const T* factors, const T* weights, T* grad_points,
                  T* grad_means, T* grad_factors, T* grad_weights, int64_t B, int64_t N) {
  const auto gs = prepare_all(means, factors, weights, N);
  backward_kernel(grad, points, gs.data(), grad_points, grad_means, grad_factors, grad_weights, B, N);
}

template void forward_cpu<float>(const float*, const float*, const float*, const float*, float*, int64_t, int64_t);
template void forward_cpu<double>(const double*, const double*, const double*, const double*, double*, int64_t,
                                  int64_t);
template void backward_cpu<float>(const float*, const float*, const float*, const float*, const float*, float*,
                                  float*, float*, float*, int64_t, int64_t);
template void backward_cpu<double>(const double*, const double*, const double*, const double*, const double*,
                                   double*, double*, double*, double*, int64_t, int64_t);

}  // namespace field
}  // namespace gsw
