// TORCH_LIBRARY_IMPL(gsworkbench, CPU) for the loss ops: the input checks, contiguous copies and
// outputs, then the kernels of ssim.cpp and photometric_loss.cpp (declared in losses.h).
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/tensor.h>
#include <torch/library.h>

#include <array>
#include <tuple>

#include "losses.h"

namespace gsw {
namespace ssim {
namespace {

using at::Tensor;

// Checks img and ref (named in errors by `op`) and returns their dimensions.
Dims check(const at::Tensor& img, const at::Tensor& ref, const char* op) {
  TORCH_CHECK(img.dim() == 3 && img.sizes() == ref.sizes(), op, ": img and ref must be [H,W,C] of one shape, got ",
              img.sizes(), " and ", ref.sizes());
  TORCH_CHECK(img.scalar_type() == ref.scalar_type() &&
                  (img.scalar_type() == at::kFloat || img.scalar_type() == at::kDouble),
              op, ": img and ref must both be float32 or float64");
  TORCH_CHECK(img.device().is_cpu() && ref.device().is_cpu(), op, ": CPU tensors expected");
  const int64_t H = img.size(0), W = img.size(1), C = img.size(2);
  TORCH_CHECK(H >= kWin && W >= kWin && C >= 1, op, ": images must be at least 11 x 11, got ", H, " x ", W);
  return {H, W, C, H - kWin + 1, W - kWin + 1};
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
    ssim_grad<T>(d, img.data_ptr<T>(), ref.data_ptr<T>(), T(g), out.data_ptr<T>());
  });
  return out;
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
  m.impl("ssim", &gsw::ssim::ssim_cpu);
  m.impl("ssim_backward", &gsw::ssim::ssim_backward_cpu);
  m.impl("photometric_terms", &gsw::ssim::photometric_terms_cpu);
  m.impl("photometric_terms_backward", &gsw::ssim::photometric_terms_backward_cpu);
}
