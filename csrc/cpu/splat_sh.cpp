// CPU kernels of the 3DGS rasterizer, stage 2: spherical harmonics to colour per camera and Gaussian,
// and its analytic backward. The per-Gaussian math is gsw/sh.h, shared with the CUDA kernels
// (csrc/cuda/splat_sh.cu); the input checks are gsw/splat_op.h, shared with the CUDA bindings.
#include <ATen/ATen.h>
#include <omp.h>
#include <torch/library.h>

#include <type_traits>

#include "gsw/parallel.h"
#include "gsw/sh.h"
#include "gsw/splat_op.h"

namespace gsw {
namespace splat {
namespace cpu {
namespace {

using at::Tensor;

// Camera-Gaussian pairs per thread below which the SH passes wake no further thread.
constexpr int64_t kMinShPerThread = 2048;

// Calls fn(std::integral_constant<int, degree>{}): the SH loops then have fixed trip counts and the
// loops over Gaussians below vectorize.
template <typename Fn>
void with_sh_degree(int64_t degree, Fn&& fn) {
  switch (degree) {
    case 0: return fn(std::integral_constant<int, 0>{});
    case 1: return fn(std::integral_constant<int, 1>{});
    case 2: return fn(std::integral_constant<int, 2>{});
    default: return fn(std::integral_constant<int, 3>{});
  }
}

template <typename T>
void sh_forward_kernel(int64_t degree, const T* co, const T* d, T* o, int64_t C, int64_t N, int64_t K) {
  with_sh_degree(degree, [&](auto deg) {
#pragma omp parallel num_threads(threads_for(C * N, kMinShPerThread))
    {
      const Range share = thread_range(N);
      const int64_t n0 = share.begin, n1 = share.end;
      for (int64_t c = 0; c < C; ++c) {
        const T* dc = d + 3 * c * N;
        T* oc = o + 3 * c * N;
#pragma omp simd
        for (int64_t n = n0; n < n1; ++n) sh_to_color_forward<T>(deg, co + n * K * 3, dc + 3 * n, oc + 3 * n);
      }
    }
  });
}

template <typename T>
void sh_backward_kernel(int64_t degree, const T* co, const T* d, const T* vc, T* gco, T* gd, int64_t C, int64_t N,
                        int64_t K) {
  with_sh_degree(degree, [&](auto deg) {
#pragma omp parallel num_threads(threads_for(C * N, kMinShPerThread))
    {
      const Range share = thread_range(N);
      const int64_t n0 = share.begin, n1 = share.end;
      // cameras in turn (a Gaussian's coefficient rows belong to one lane): the first writes the rows
      // the degree uses, the others add to them
#pragma omp simd
      for (int64_t n = n0; n < n1; ++n)
        sh_to_color_backward<T, true>(deg, co + n * K * 3, d + 3 * n, vc + 3 * n, gco + n * K * 3, gd + 3 * n);
      for (int64_t c = 1; c < C; ++c) {
        const int64_t off = 3 * c * N;
#pragma omp simd
        for (int64_t n = n0; n < n1; ++n)
          sh_to_color_backward<T>(deg, co + n * K * 3, d + off + 3 * n, vc + off + 3 * n, gco + n * K * 3,
                                  gd + off + 3 * n);
      }
    }
  });
}

Tensor sh_to_color_cpu(const Tensor& coeffs_, const Tensor& dirs_, int64_t degree) {
  check_sh_inputs(coeffs_, dirs_, degree);
  const auto coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  auto out = at::empty({C, N, 3}, coeffs.options());
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_cpu", [&] {
    sh_forward_kernel<scalar_t>(degree, coeffs.data_ptr<scalar_t>(), dirs.data_ptr<scalar_t>(),
                                out.data_ptr<scalar_t>(), C, N, K);
  });
  return out;
}

std::tuple<Tensor, Tensor> sh_to_color_backward_cpu(const Tensor& v_colors_, const Tensor& coeffs_,
                                                    const Tensor& dirs_, int64_t degree) {
  check_sh_inputs(coeffs_, dirs_, degree);
  check_sh_grads(v_colors_, coeffs_, dirs_);
  const auto coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
  const auto v_colors = contiguous_as(v_colors_, coeffs.scalar_type());
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  // rows the degree uses are written by the kernel; only unused rows (K > (degree + 1)^2) need zeros
  const bool all_rows = K == (degree + 1) * (degree + 1);
  auto v_coeffs = all_rows ? at::empty_like(coeffs) : at::zeros_like(coeffs);
  auto v_dirs = at::zeros_like(dirs);
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_backward_cpu", [&] {
    using T = scalar_t;
    sh_backward_kernel<T>(degree, coeffs.data_ptr<T>(), dirs.data_ptr<T>(), v_colors.data_ptr<T>(),
                          v_coeffs.data_ptr<T>(), v_dirs.data_ptr<T>(), C, N, K);
  });
  return {v_coeffs, v_dirs};
}

}  // namespace
}  // namespace cpu
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("splat_sh_to_color", &gsw::splat::cpu::sh_to_color_cpu);
  m.impl("splat_sh_to_color_backward", &gsw::splat::cpu::sh_to_color_backward_cpu);
}
