// Parameter struct of gsworkbench::transform_splats, the same for the CPU kernel
// (csrc/cpu/transforms.cpp) and the CUDA launcher (csrc/cuda/transforms_cuda.h), filled by the bindings
// after the shared checks (gsw/transforms_op.h). Plain C++ (no CUDA or ATen headers), so nvcc and the
// host compiler both read it. T is float or double.
#pragma once

#include <cstdint>

namespace gsw {
namespace transforms {

// The operands of one transform_splats call (see csrc/gsworkbench.cpp and gsw/transforms.h): N splats,
// F frames, K = 0, 3, 8 or 15 SH rest coefficients. The outputs may be the inputs (in place, F = 1).
template <typename T>
struct TransformParams {
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

}  // namespace transforms
}  // namespace gsw
