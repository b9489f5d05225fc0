// Fused SSIM of two images [H,W,C] and its gradient (torch reference: gsworkbench/train/losses.py
// ssim_torch). The window math and the passes: ssim_window.h. The forward goes band by band of valid rows;
// the backward streams down each thread's share of image rows.
// Per-operator ATen headers only: <ATen/ATen.h> (every operator, most of the compile time) then fails.
#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <vector>

#include "ssim_grad.h"

namespace gsw {
namespace ssim {
namespace {

using at::Tensor;

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

Tensor ssim_cpu(const Tensor& img_, const Tensor& ref_) {
  const Dims d = check(img_, ref_, "ssim");
  const auto img = img_.contiguous(), ref = ref_.contiguous();
  auto out = at::empty({}, img.options());
  AT_DISPATCH_FLOATING_TYPES(img.scalar_type(), "ssim_cpu", [&] {
    out.fill_(ssim_mean<scalar_t>(d, img.data_ptr<scalar_t>(), ref.data_ptr<scalar_t>()));
  });
  return out;
}

Tensor ssim_backward_cpu(const Tensor& grad, const Tensor& img_, const Tensor& ref_) {
  const Dims d = check(img_, ref_, "ssim_backward");
  TORCH_CHECK(grad.numel() == 1, "ssim_backward: grad must be a scalar");
  const auto img = img_.contiguous(), ref = ref_.contiguous();
  auto out = at::empty_like(img);
  const double g = grad.item<double>() / double(d.windows());
  AT_DISPATCH_FLOATING_TYPES(img.scalar_type(), "ssim_backward_cpu", [&] {
    using T = scalar_t;
    const Window<T> win;
    const T *x = img.data_ptr<T>(), *y = ref.data_ptr<T>();
    T* o = out.data_ptr<T>();
    at::parallel_for(0, d.H, kBand, [&](int64_t r0, int64_t r1) {
      Scratch<T> s;
      rows_grad(d, x, y, win, r0, r1, T(g), s, o);
    });
  });
  return out;
}

}  // namespace
}  // namespace ssim
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("ssim", &gsw::ssim::ssim_cpu);
  m.impl("ssim_backward", &gsw::ssim::ssim_backward_cpu);
}
