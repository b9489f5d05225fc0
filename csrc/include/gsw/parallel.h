// How many OpenMP threads a CPU parallel region uses. Shared by every CPU kernel.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace gsw {

// Threads for `work` units when each thread should get at least `min_per_thread` units. Tiny calls get
// one thread, so they do not pay for waking sleeping threads (under OMP_WAIT_POLICY=PASSIVE each
// wake-up costs more than the work of a handful of points or Gaussians).
// Use as `#pragma omp parallel num_threads(gsw::threads_for(n, kMin))`.
inline int threads_for(int64_t work, int64_t min_per_thread) {
  const int64_t most = std::max(1, omp_get_max_threads());
  const int64_t n = min_per_thread > 0 ? work / min_per_thread : most;
  return static_cast<int>(std::clamp<int64_t>(n, 1, most));
}

// Inside a parallel region: this thread's contiguous share [begin, end) of n items split evenly over
// the team (the partition at::parallel_for uses), for loops that keep an inner structure per share.
struct Range {
  int64_t begin, end;
};
inline Range thread_range(int64_t n) {
  const int64_t nt = omp_get_num_threads(), per = (n + nt - 1) / nt;
  const int64_t b = std::min(n, per * omp_get_thread_num());
  return {b, std::min(n, b + per)};
}

}  // namespace gsw
