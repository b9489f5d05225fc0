// The trainer's photometric loss terms of one image pair [H,W,C] in one pass (gsworkbench/train/losses.py
// photometric_loss; torch reference: losses.l1, losses.ssim_torch): mean |x - y|, mean SSIM and mean
// (x - y)^2, and, for training, d(mean SSIM)/dx computed in the same band pass, so the backward is one
// elementwise pass instead of a second sweep of the window statistics. Window math: ssim_window.h.
// Bound to the ops by losses_cpu.cpp.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <vector>

#include "losses.h"
#include "ssim_grad.h"

namespace gsw {
namespace ssim {
namespace {

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

}  // namespace

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

template std::array<double, 3> terms_kernel<float>(const Dims&, const float*, const float*, float*);
template std::array<double, 3> terms_kernel<double>(const Dims&, const double*, const double*, double*);
template void terms_backward_kernel<float>(int64_t, const float*, const float*, const float*, float, float, float,
                                           float*);
template void terms_backward_kernel<double>(int64_t, const double*, const double*, const double*, double, double,
                                            double, double*);

}  // namespace ssim
}  // namespace gsw
