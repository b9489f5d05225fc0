// CPU kernels of the Gaussian field (csrc/cpu/field.cpp), the twins of the CUDA launchers
// (csrc/cuda/field.h). Raw pointers only; csrc/cpu/field_cpu.cpp binds them to the torch ops.
#pragma once

#include <cstdint>

namespace gsw {
namespace field {

// values[B] = sum_n w_n exp(-1/2 |L_n^-1 (x_b - mu_n)|^2).
template <typename T>
void forward_cpu(const T* points, const T* means, const T* factors, const T* weights, T* values, int64_t B,
                 int64_t N);

// Gradients of sum_b grad[b] * values[b], written whole.
template <typename T>
void backward_cpu(const T* grad, const T* points, const T* means, const T* factors, const T* weights, T* grad_points,
                  T* grad_means, T* grad_factors, T* grad_weights, int64_t B, int64_t N);

}  // namespace field
}  // namespace gsw
