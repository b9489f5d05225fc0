// Scans of input values on the CPU: the statistics of a run of values (tensor_stats,
// csrc/cpu/tensor_stats_cpu.cpp), and the scan the ops' kernels make of their inputs as they read them
// (their check flags), so that an input check costs no second pass over memory: a block of a few
// hundred Gaussians is scanned, then computed while it sits in the L1 cache.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "gsw/parallel.h"

namespace gsw {

// Of a run of values: how many are NaN or infinite, the smallest and the largest (+inf, -inf when
// empty; meaningless when a value is not finite).
struct ValueStats {
  double nonfinite = 0, lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
};

template <typename T>
ValueStats value_stats(const T* x, int64_t n) {
  T bad = 0, lo = std::numeric_limits<T>::infinity(), hi = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(+ : bad) reduction(min : lo) reduction(max : hi)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    bad += (v - v == T(0)) ? T(0) : T(1);  // v - v is NaN exactly for NaN and +-Inf
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  return {double(bad), double(lo), double(hi)};
}

// A thread's share of N Gaussians for C cameras (inside a parallel region): compute(c, n0, n1) for each
// camera; with scanning, the first camera's share goes in blocks of `block` Gaussians, each passed to
// scan(n0, n1) just before compute(0, n0, n1) (with no camera, the blocks are only scanned).
template <typename Scan, typename Compute>
void scan_then_compute(const Range& share, int64_t C, bool scanning, int64_t block, Scan&& scan, Compute&& compute) {
  for (int64_t c = 0; c < std::max<int64_t>(C, scanning); ++c) {
    if (c > 0 || !scanning) {
      compute(c, share.begin, share.end);
      continue;
    }
    for (int64_t n0 = share.begin; n0 < share.end; n0 += block) {
      const int64_t n1 = std::min(share.end, n0 + block);
      scan(n0, n1);
      if (C > 0) compute(0, n0, n1);
    }
  }
}

}  // namespace gsw
