// Launcher of the CUDA splat-transform kernel (csrc/cuda/transforms.cu). Raw pointers only, so that the
// .cu file needs no ATen headers; csrc/cuda/transforms_cuda.cpp binds it to gsworkbench::transform_splats.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace gsw {
namespace transforms {

// The operands of one transform_splats call (see csrc/gsworkbench.cpp and gsw/transforms.h): N splats,
// F frames, K = 0, 3, 8 or 15 SH rest coefficients. The outputs may be the inputs (in place, F = 1).
template <typename T>
struct TransformArgs {
  const T* means;       // [N,3]
  const T* quats;       // [N,4]
  const T* log_scales;  // [N,3]
  const T* sh_rest;     // [N,K,3] (null when K = 0)
  const T* affine;      // [F,12]: A row-major, then b
  const T* quat_r;      // [F,4]: quaternion of R for A = s R (similarity frames)
  const T* log_s;       // [F]: log s
  const T* sh_rot;      // [F,K,K] (null when K = 0)
  T* out_means;         // [F,N,3]
  T* out_quats;         // [F,N,4]
  T* out_log_scales;    // [F,N,3]
  T* out_sh_rest;       // [F,N,K,3] (null when K = 0)
  int64_t F, N;
  int K;
  bool general;  // any A with det A > 0 (per-Gaussian covariance re-decomposition)
};

// One thread per (splat, frame) on `stream`; cudaErrorInvalidValue for a K outside {0, 3, 8, 15}.
template <typename T>
cudaError_t transform_splats_cuda(const TransformArgs<T>& args, cudaStream_t stream);

}  // namespace transforms
}  // namespace gsw
