// Helpers shared by the CUDA kernels (csrc/cuda/field.cu, csrc/cuda/splat_*.cu): launch geometry, the
// warp reduction and the device exp. CUDA only (nvcc); no ATen headers.
#pragma once

#include <cstdint>

#include "gsw/common.h"

namespace gsw {

// Threads per block of the one-thread-per-item kernels.
constexpr int kThreads = 256;

// Blocks of kThreads threads that cover n items.
inline unsigned int blocks_for(int64_t n) { return static_cast<unsigned int>((n + kThreads - 1) / kThreads); }

// Sum of v over the 32 lanes of a full warp, in lane 0 (the other lanes hold partial sums).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// exp(-s) for s >= 0: gsw::exp_nonpos (gsw/common.h; __expf in float), as the CPU kernels' exp_neg.
template <typename T>
__device__ __forceinline__ T exp_neg(T s) {
  return exp_nonpos(-s);
}

}  // namespace gsw
