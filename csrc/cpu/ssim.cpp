// Fused SSIM of two images [H,W,C] and its gradient (torch reference: gsworkbench/train/losses.py
// ssim_torch). The window math and the passes: ssim_window.h. The forward goes band by band of valid rows;
// the backward streams down each thread's share of image rows. Bound to the ops by losses_cpu.cpp.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "losses.h"
#include "ssim_grad.h"

namespace gsw {
namespace ssim {

template <typename T>
double ssim_mean(const Dims& d, const T* x, const T* y) {
  const Window<T> win;
  const int64_t nb = num_bands(d.Hv);
  std::vector<double> bands(static_cast<size_t>(nb), 0.0);
  at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    Scratch<T> s;
    for (int64_t b = b0; b < b1; ++b) bands[b] = band_sum(d, x, y, win, b * kBand, std::min(d.Hv, (b + 1) * kBand), s);
  });
  double total = 0;
  for (double v : bands) total += v;
  return total / double(d.windows());
}

template <typename T>
void ssim_grad(const Dims& d, const T* x, const T* y, T g, T* o) {
  const Window<T> win;
  at::parallel_for(0, d.H, kBand, [&](int64_t r0, int64_t r1) {
    Scratch<T> s;
    rows_grad(d, x, y, win, r0, r1, g, s, o);
  });
}

template double ssim_mean<float>(const Dims&, const float*, const float*);
template double ssim_mean<double>(const Dims&, const double*, const double*);
template void ssim_grad<float>(const Dims&, const float*, const float*, float, float*);
template void ssim_grad<double>(const Dims&, const double*, const double*, double, double*);

}  // namespace ssim
}  // namespace gsw
