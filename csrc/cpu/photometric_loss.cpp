// The trainer's photometric loss terms of one image pair [H,W,C] in one pass (gsworkbench/train/losses.py
// photometric_loss; torch reference: losses.l1, losses.ssim_torch): mean |x - y|, mean SSIM and mean
// (x - y)^2, and, for training, d(mean SSIM)/dx computed in the same band pass, so the backward is one
// elementwise pass instead of a second sweep of the window statistics. Window math: ssim_window.h.
// Per-operator ATen headers only: <ATen/ATen.h> (every operator, most of the compile time) then fails.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/tensor.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "ssim_grad.h"

namespace gsw {
namespace ssim {
namespace {

using at::Tensor;

// Per row r in [r0, r1): l1[r] = sum |x - y| and sq[r] = sum (x - y)^2 over the row.
template <typename T>
void row_errors(const Dims& d, const T* x, const T* y, int64_t r0, int64_t r1, double* l1, double* sq) {
  const int64_t row = d.row();
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * row;
    const T* yr = y + r * row;
    T ar = 0, qr = 0;
#pragma omp simd reduction(+ : ar, qr)
    for (int64_t j = 0; j < row; ++j) {
      const T e = xr[j] - yr[j];
      ar += e < T(0) ? -e : e;
      qr += e * e;
    }
    l1[r] = ar;
    sq[r] = qr;
  }
}

// (sum |x - y|, sum of S, sum (x - y)^2), and with g the SSIM gradient scaled to the mean.
template <typename T>
std::array<double, 3> terms_kernel(const Dims& d, const T* x, const T* y, T* g) {
  const Window<T> win;
  // per row, summed in row order below: the same sums whatever the split over threads
  std::vector<double> l1(d.H, 0.0), sq(d.H, 0.0), ssim(d.H, 0.0);
  const T scale = T(1.0 / double(d.windows()));
  at::parallel_for(0, d.H, kBand, [&](int64_t r0, int64_t r1) {
    Scratch<T> s;
    if (g != nullptr) {
      rows_grad(d, x, y, win, r0, r1, scale, s, g, ssim.data());
    } else {
      band_sum(d, x, y, win, r0, std::min(r1, d.Hv), s, ssim.data());  // no rows when r0 >= Hv
    }
    row_errors(d, x, y, r0, r1, l1.data(), sq.data());
  });
  std::array<double, 3> out{0, 0, 0};
  for (int64_t r = 0; r < d.H; ++r) out[0] += l1[r], out[1] += ssim[r], out[2] += sq[r];
  return out;
}

// o = ga sign(x - y) + gs G + gq (x - y), elementwise over n values.
template <typename T>
void terms_backward_kernel(int64_t n, const T* x, const T* y, const T* G, T ga, T gs, T gq, T* o) {
  at::parallel_for(0, n, 1 << 15, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t j = b; j < e; ++j) {
      const T r = x[j] - y[j];
      const T sgn = r > T(0) ? T(1) : (r < T(0) ? T(-1) : T(0));
      o[j] = ga * sgn + gs * G[j] + gq * r;
    }
  });
}

std::tuple<Tensor, Tensor> photometric_terms_cpu(const Tensor& img_, const Tensor& ref_, bool with_grad) {
  const Dims d = check(img_, ref_, "photometric_terms");
  const auto img = img_.contiguous(), ref = ref_.contiguous();
  auto grad = with_grad ? at::empty_like(img) : at::empty({0}, img.options());
  std::array<double, 3> sums{};
  AT_DISPATCH_FLOATING_TYPES(img.scalar_type(), "photometric_terms_cpu", [&] {
    using T = scalar_t;
    sums = terms_kernel<T>(d, img.data_ptr<T>(), ref.data_ptr<T>(), with_grad ? grad.data_ptr<T>() : nullptr);
  });
  const double n = double(img.numel());
  auto terms = at::tensor({sums[0] / n, sums[1] / double(d.windows()), sums[2] / n}, at::kDouble);
  return {terms.to(img.scalar_type()), grad};
}

// dL/dx = g0 sign(x - y) / n + g1 ssim_grad + g2 2 (x - y) / n, for grad_terms g [3] and n = H W C.
Tensor photometric_terms_backward_cpu(const Tensor& grad_terms, const Tensor& img_, const Tensor& ref_,
                                      const Tensor& ssim_grad_) {
  check(img_, ref_, "photometric_terms_backward");
  TORCH_CHECK(grad_terms.numel() == 3, "photometric_terms_backward: grad_terms must have 3 values");
  TORCH_CHECK(ssim_grad_.sizes() == img_.sizes() && ssim_grad_.scalar_type() == img_.scalar_type(),
              "photometric_terms_backward: ssim_grad must match img (call photometric_terms with with_grad=True)");
  const auto img = img_.contiguous(), ref = ref_.contiguous(), sg = ssim_grad_.contiguous();
  const auto gt = grad_terms.to(at::kDouble).contiguous();
  const double* gv = gt.data_ptr<double>();
  const double n = double(img.numel());
  auto out = at::empty_like(img);
  AT_DISPATCH_FLOATING_TYPES(img.scalar_type(), "photometric_terms_backward_cpu", [&] {
    using T = scalar_t;
    terms_backward_kernel<T>(img.numel(), img.data_ptr<T>(), ref.data_ptr<T>(), sg.data_ptr<T>(), T(gv[0] / n),
                             T(gv[1]), T(2.0 * gv[2] / n), out.data_ptr<T>());
  });
  return out;
}

}  // namespace
}  // namespace ssim
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("photometric_terms", &gsw::ssim::photometric_terms_cpu);
  m.impl("photometric_terms_backward", &gsw::ssim::photometric_terms_backward_cpu);
}
