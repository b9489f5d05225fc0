// CPU kernels of gsworkbench::splat_view_dirs and its backward: plain loops over the C cameras and N
// means, in place of the device-agnostic ATen version (csrc/splat_view_dirs.cpp, which other devices
// use), whose handful of tiny ATen ops cost a tiny call more than the arithmetic.
// Per-operator ATen headers only: <ATen/ATen.h> (every operator, most of the compile time) then fails.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <tuple>

#include "gsw/splat_op.h"

namespace gsw {
namespace splat {
namespace cpu {
namespace {

using at::Tensor;

// dirs[c, n, j] = means[n, j] + sum_k t_c[k] R_c[k, j] (= means[n] - centre_c).
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

// With g_c = sum_n v_dirs[c, n]: v_means[n] = sum_c v_dirs[c, n], v_R_c[k, j] = t_c[k] g_c[j],
// v_t_c[k] = sum_j R_c[k, j] g_c[j]; the bottom row of v_viewmats is zero.
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

Tensor view_dirs_cpu(const Tensor& means_, const Tensor& viewmats_) {
  check_view_dirs_inputs(means_, viewmats_);
  const Tensor means = means_.contiguous(), viewmats = viewmats_.contiguous();
  const int64_t C = viewmats.size(0), N = means.size(0);
  Tensor dirs = at::empty({C, N, 3}, means.options());
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "splat_view_dirs_cpu", [&] {
    view_dirs_kernel<scalar_t>(means.data_ptr<scalar_t>(), viewmats.data_ptr<scalar_t>(), dirs.data_ptr<scalar_t>(),
                               C, N);
  });
  return dirs;
}

std::tuple<Tensor, Tensor> view_dirs_backward_cpu(const Tensor& v_dirs_, const Tensor& means_,
                                                  const Tensor& viewmats_) {
  check_view_dirs_grads(v_dirs_, means_, viewmats_);
  const Tensor means = means_.contiguous(), viewmats = viewmats_.contiguous();
  const Tensor v_dirs = contiguous_as(v_dirs_, means.scalar_type());
  const int64_t C = viewmats.size(0), N = means.size(0);
  Tensor v_means = at::empty({N, 3}, means.options()), v_viewmats = at::empty({C, 4, 4}, means.options());
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "splat_view_dirs_backward_cpu", [&] {
    view_dirs_backward_kernel<scalar_t>(v_dirs.data_ptr<scalar_t>(), viewmats.data_ptr<scalar_t>(),
                                        v_means.data_ptr<scalar_t>(), v_viewmats.data_ptr<scalar_t>(), C, N);
  });
  return {v_means, v_viewmats};
}

}  // namespace
}  // namespace cpu
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("splat_view_dirs", &gsw::splat::cpu::view_dirs_cpu);
  m.impl("splat_view_dirs_backward", &gsw::splat::cpu::view_dirs_backward_cpu);
}
