// Launchers of the CUDA field kernels (csrc/cuda/field.cu). Raw pointers only, so that the .cu file
// needs no ATen headers; csrc/cuda/field_cuda.cpp binds them to the torch ops.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace gsw {
namespace field {

// values[B] = sum_n w_n exp(-1/2 |L_n^-1 (x_b - mu_n)|^2).
// scratch: N * 10 elements of T (packed per-Gaussian parameters).
template <typename T>
cudaError_t forward_cuda(const T* points, const T* means, const T* factors, const T* weights, T* values,
                         T* scratch, int64_t B, int64_t N, cudaStream_t stream);

// Gradients of sum_b grad[b] * values[b]. scratch: N * 10 packed parameters + N * 10 accumulators
// (zeroed by the launcher).
template <typename T>
cudaError_t backward_cuda(const T* grad, const T* points, const T* means, const T* factors, const T* weights,
                          T* grad_points, T* grad_means, T* grad_factors, T* grad_weights, T* scratch, int64_t B,
                          int64_t N, cudaStream_t stream);

}  // namespace field
}  // namespace gsw
