// CUDA kernels of the 3DGS tile rasterizer, stage 2: spherical harmonics to colour and its backward.
// One thread per (camera, Gaussian); the math is gsw/sh.h, shared with the CPU kernels
// (csrc/cpu/splat_sh.cpp). The backward adds the coefficient gradients (summed over cameras) with atomics.
#include "common.cuh"
#include "gsw/sh.h"
#include "splat.h"

namespace gsw {
namespace splat {
namespace cuda {
namespace {

template <typename T>
__global__ void sh_forward_kernel(const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K, int degree,
                                  T* colors) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= C * N) return;
  sh_to_color_forward<T>(degree, coeffs + (i % N) * K * 3, dirs + 3 * i, colors + 3 * i);
}

template <typename T>
__global__ void sh_backward_kernel(const T* v_colors, const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K,
                                   int degree, T* v_coeffs, T* v_dirs) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= C * N) return;
  const int64_t n = i % N;
  T tmp[48] = {};
  T vd[3] = {0, 0, 0};
  sh_to_color_backward<T>(degree, coeffs + n * K * 3, dirs + 3 * i, v_colors + 3 * i, tmp, vd);
  const int k = (degree + 1) * (degree + 1);
  for (int j = 0; j < 3 * k; ++j) atomicAdd(v_coeffs + n * K * 3 + j, tmp[j]);
  for (int a = 0; a < 3; ++a) v_dirs[3 * i + a] = vd[a];
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------------

template <typename T>
void sh_forward(const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K, int degree, T* colors,
                cudaStream_t stream) {
  if (C * N == 0) return;
  sh_forward_kernel<T><<<blocks_for(C * N), kThreads, 0, stream>>>(coeffs, dirs, C, N, K, degree, colors);
}

template <typename T>
void sh_backward(const T* v_colors, const T* coeffs, const T* dirs, int64_t C, int64_t N, int64_t K, int degree,
                 T* v_coeffs, T* v_dirs, cudaStream_t stream) {
  if (C * N == 0) return;
  sh_backward_kernel<T><<<blocks_for(C * N), kThreads, 0, stream>>>(v_colors, coeffs, dirs, C, N, K, degree,
                                                                     v_coeffs, v_dirs);
}

#define GSW_SPLAT_SH_INSTANTIATE(T)                                                                                \
  template void sh_forward<T>(const T*, const T*, int64_t, int64_t, int64_t, int, T*, cudaStream_t);              \
  template void sh_backward<T>(const T*, const T*, const T*, int64_t, int64_t, int64_t, int, T*, T*,              \
                               cudaStream_t);

GSW_SPLAT_SH_INSTANTIATE(float)
GSW_SPLAT_SH_INSTANTIATE(double)

}  // namespace cuda
}  // namespace splat
}  // namespace gsw
