// Launcher of the CUDA splat-transform kernel (csrc/cuda/transforms.cu). Raw pointers only, so that the
// .cu file needs no ATen headers; csrc/cuda/transforms_cuda.cpp binds it to gsworkbench::transform_splats.
#pragma once

#include <cuda_runtime.h>

#include "gsw/transforms_params.h"

namespace gsw {
namespace transforms {

// One thread per (splat, frame) on `stream`; cudaErrorInvalidValue for a K outside {0, 3, 8, 15}.
template <typename T>
cudaError_t transform_splats_cuda(const TransformParams<T>& p, cudaStream_t stream);

}  // namespace transforms
}  // namespace gsw
