// Launcher of the CUDA splat-transform kernel (csrc/cuda/transforms.cu). Raw pointers only, so that the
// .cu file needs no ATen headers; csrc/cuda/transforms_cuda.cpp binds it to gsworkbench::transform_splats.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace gsw {
namespace transforms {

// F frames x N splats, one thread per (splat, frame); K = 0, 3, 8 or 15 SH rest coefficients.
// affine [F,12] (A row-major, then b), sh_rot [F,K,K]; outputs [F,N,...]. See gsw/transforms.h.
template <typename T>
cudaError_t transform_splats_cuda(const T* means, const T* quats, const T* log_scales, const T* sh_rest,
                                  const T* affine, const T* sh_rot, bool general, T* out_means, T* out_quats,
                                  T* out_log_scales, T* out_sh_rest, int64_t F, int64_t N, int K,
                                  cudaStream_t stream);

}  // namespace transforms
}  // namespace gsw
