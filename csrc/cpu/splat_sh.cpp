// CPU kernels of the 3DGS rasterizer, stage 2: spherical harmonics to colour per camera and Gaussian,
// and its analytic backward, for one [N,K,3] block of coefficients or 3DGS's split (sh0, shN) pair. The
// per-Gaussian math is gsw/sh.h, shared with the CUDA kernels
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

// The coefficients of Gaussian n: row 0 at c0 + n s0, rows 1.. at cr + n sr (gsw/sh.h sh_row). One
// [N,K,3] tensor: c0 = cr - 3 = its data, s0 = sr = 3K; the split form (sh0 [N,1,3], shN [N,K-1,3]):
// s0 = 3, sr = 3 (K - 1).
template <typename T>
struct ShRows {
  const T *c0, *cr;
  int64_t s0, sr;
};

template <typename T>
void sh_forward_kernel(int64_t degree, ShRows<T> co, const T* d, T* o, int64_t C, int64_t N) {
  with_sh_degree(degree, [&](auto deg) {
#pragma omp parallel num_threads(threads_for(C * N, kMinShPerThread))
    {
      const Range share = thread_range(N);
      const int64_t n0 = share.begin, n1 = share.end;
      for (int64_t c = 0; c < C; ++c) {
        const T* dc = d + 3 * c * N;
        T* oc = o + 3 * c * N;
#pragma omp simd
        for (int64_t n = n0; n < n1; ++n)
          sh_to_color_forward<T>(deg, co.c0 + n * co.s0, co.cr + n * co.sr, dc + 3 * n, oc + 3 * n);
      }
    }
  });
}

// g0, gr: the coefficient gradients, laid out as co.c0 and co.cr (same strides).
template <typename T>
void sh_backward_kernel(int64_t degree, ShRows<T> co, const T* d, const T* vc, T* g0, T* gr, T* gd, int64_t C,
                        int64_t N) {
  with_sh_degree(degree, [&](auto deg) {
#pragma omp parallel num_threads(threads_for(C * N, kMinShPerThread))
    {
      const Range share = thread_range(N);
      const int64_t n0 = share.begin, n1 = share.end;
      // cameras in turn (a Gaussian's coefficient rows belong to one lane): the first writes the rows
      // the degree uses, the others add to them
#pragma omp simd
      for (int64_t n = n0; n < n1; ++n)
        sh_to_color_backward<T, true>(deg, co.c0 + n * co.s0, co.cr + n * co.sr, d + 3 * n, vc + 3 * n,
                                      g0 + n * co.s0, gr + n * co.sr, gd + 3 * n);
      for (int64_t c = 1; c < C; ++c) {
        const int64_t off = 3 * c * N;
#pragma omp simd
        for (int64_t n = n0; n < n1; ++n)
          sh_to_color_backward<T>(deg, co.c0 + n * co.s0, co.cr + n * co.sr, d + off + 3 * n, vc + off + 3 * n,
                                  g0 + n * co.s0, gr + n * co.sr, gd + off + 3 * n);
      }
    }
  });
}

// The rows of coeffs (and coeffs_rest, when given: the split form) as ShRows.
template <typename T>
ShRows<T> sh_rows(const Tensor& coeffs, const c10::optional<Tensor>& rest) {
  const T* c0 = coeffs.data_ptr<T>();
  if (!rest.has_value()) return {c0, c0 + 3, 3 * coeffs.size(1), 3 * coeffs.size(1)};
  return {c0, rest->data_ptr<T>(), 3, 3 * rest->size(1)};
}

Tensor sh_to_color_cpu(const Tensor& coeffs_, const Tensor& dirs_, int64_t degree,
                       const c10::optional<Tensor>& rest_) {
  check_sh_inputs(coeffs_, dirs_, degree, rest_);
  const auto coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
  const c10::optional<Tensor> rest = rest_.has_value() ? c10::optional<Tensor>(rest_->contiguous()) : c10::nullopt;
  const int64_t C = dirs.size(0), N = dirs.size(1);
  auto out = at::empty({C, N, 3}, coeffs.options());
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_cpu", [&] {
    using T = scalar_t;
    sh_forward_kernel<T>(degree, sh_rows<T>(coeffs, rest), dirs.data_ptr<T>(), out.data_ptr<T>(), C, N);
  });
  return out;
}

std::tuple<Tensor, Tensor, Tensor> sh_to_color_backward_cpu(const Tensor& v_colors_, const Tensor& coeffs_,
                                                            const Tensor& dirs_, int64_t degree,
                                                            const c10::optional<Tensor>& rest_) {
  check_sh_inputs(coeffs_, dirs_, degree, rest_);
  check_sh_grads(v_colors_, coeffs_, dirs_);
  const auto coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
  const c10::optional<Tensor> rest = rest_.has_value() ? c10::optional<Tensor>(rest_->contiguous()) : c10::nullopt;
  const auto v_colors = contiguous_as(v_colors_, coeffs.scalar_type());
  const int64_t C = dirs.size(0), N = dirs.size(1);
  const int64_t K = coeffs.size(1) + (rest.has_value() ? rest->size(1) : 0);
  // rows the degree uses are written by the kernel; only unused rows (K > (degree + 1)^2) need zeros
  const bool all_rows = K == (degree + 1) * (degree + 1);
  auto alloc = [&](const Tensor& t) { return all_rows ? at::empty_like(t) : at::zeros_like(t); };
  auto v_coeffs = alloc(coeffs);
  auto v_rest = rest.has_value() ? alloc(*rest) : at::empty({0}, coeffs.options());
  auto v_dirs = at::zeros_like(dirs);
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_backward_cpu", [&] {
    using T = scalar_t;
    T* g0 = v_coeffs.data_ptr<T>();
    T* gr = rest.has_value() ? v_rest.data_ptr<T>() : g0 + 3;
    sh_backward_kernel<T>(degree, sh_rows<T>(coeffs, rest), dirs.data_ptr<T>(), v_colors.data_ptr<T>(), g0, gr,
                          v_dirs.data_ptr<T>(), C, N);
  });
  return {v_coeffs, v_dirs, v_rest};
}

}  // namespace
}  // namespace cpu
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("splat_sh_to_color", &gsw::splat::cpu::sh_to_color_cpu);
  m.impl("splat_sh_to_color_backward", &gsw::splat::cpu::sh_to_color_backward_cpu);
}
