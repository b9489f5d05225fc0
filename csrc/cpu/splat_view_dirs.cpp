// CPU kernels of gsworkbench::splat_view_dirs and its backward: plain loops over the C cameras and N
// means, in place of the device-agnostic ATen version (csrc/composite/splat_view_dirs_composite.cpp,
// which other devices use), whose handful of tiny ATen ops cost a tiny call more than the arithmetic.
// Bound to the ops by splat_cpu.cpp.
#include <algorithm>

#include "splat.h"

namespace gsw {
namespace splat {
namespace cpu {

template <typename T>
void view_dirs_kernel(const T* means, const T* vm, T* dirs, int64_t C, int64_t N) {
  for (int64_t c = 0; c < C; ++c) {
    const T* V = vm + 16 * c;  // row-major [4,4]: R_c[k, j] = V[4k + j], t_c[k] = V[4k + 3]
    T shift[3];
    for (int j = 0; j < 3; ++j) shift[j] = V[3] * V[j] + V[7] * V[4 + j] + V[11] * V[8 + j];
    T* d = dirs + 3 * N * c;
    for (int64_t n = 0; n < N; ++n)
      for (int j = 0; j < 3; ++j) d[3 * n + j] = means[3 * n + j] + shift[j];
  }
}

template <typename T>
void view_dirs_backward_kernel(const T* v, const T* vm, T* v_means, T* v_vm, int64_t C, int64_t N) {
  std::fill(v_means, v_means + 3 * N, T(0));
  for (int64_t c = 0; c < C; ++c) {
    const T* vc = v + 3 * N * c;
    T g[3] = {T(0), T(0), T(0)};
    for (int64_t n = 0; n < N; ++n)
      for (int j = 0; j < 3; ++j) {
        g[j] += vc[3 * n + j];
        v_means[3 * n + j] += vc[3 * n + j];
      }
    const T* V = vm + 16 * c;
    T* G = v_vm + 16 * c;
    for (int k = 0; k < 3; ++k) {
      for (int j = 0; j < 3; ++j) G[4 * k + j] = V[4 * k + 3] * g[j];
      G[4 * k + 3] = V[4 * k] * g[0] + V[4 * k + 1] * g[1] + V[4 * k + 2] * g[2];
    }
    for (int j = 0; j < 4; ++j) G[12 + j] = T(0);
  }
}

template void view_dirs_kernel<float>(const float*, const float*, float*, int64_t, int64_t);
template void view_dirs_kernel<double>(const double*, const double*, double*, int64_t, int64_t);
template void view_dirs_backward_kernel<float>(const float*, const float*, float*, float*, int64_t, int64_t);
template void view_dirs_backward_kernel<double>(const double*, const double*, double*, double*, int64_t, int64_t);

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
