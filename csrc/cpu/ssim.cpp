// Fused SSIM of two images [H,W,C] (the trainer's loss; torch reference: gsworkbench/train/losses.py ssim).
//
// SSIM over an 11 x 11 Gaussian window (sigma 1.5), valid region, K1 = 0.01, K2 = 0.03, data range 1:
//   S(q) = (2 mx my + C1)(2 sxy + C2) / ((mx^2 + my^2 + C1)(sxx + syy + C2)), mean over q and channels,
// with mx = G*x, sxx = G*(x^2) - mx^2, sxy = G*(xy) - mx my (G the window). The blur is separable, so
// each pass is a loop over one contiguous image row of W*C values (vectorizes). The backward recomputes
// the window statistics and scatters dS/d(mx, G*x^2, G*xy) back through the transposed blur.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

namespace gsw {
namespace ssim {
namespace {

using at::Tensor;
constexpr int kWin = 11;
constexpr int kHalf = kWin / 2;
constexpr double kC1 = 0.01 * 0.01, kC2 = 0.03 * 0.03;

template <typename T>
std::vector<T> window() {
  std::vector<double> w(kWin);
  double s = 0;
  for (int k = 0; k < kWin; ++k) s += (w[k] = std::exp(-double((k - kHalf) * (k - kHalf)) / (2 * 1.5 * 1.5)));
  std::vector<T> out(kWin);
  for (int k = 0; k < kWin; ++k) out[k] = T(w[k] / s);
  return out;
}

struct Dims {
  int64_t H, W, C, Hv, Wv;  // image, and the valid region (Hv x Wv windows)
  int64_t row() const { return W * C; }
  int64_t vrow() const { return Wv * C; }
};

Dims check(const Tensor& img, const Tensor& ref) {
  TORCH_CHECK(img.dim() == 3 && img.sizes() == ref.sizes(), "ssim: img and ref must be [H,W,C] of one shape, got ",
              img.sizes(), " and ", ref.sizes());
  TORCH_CHECK(img.scalar_type() == ref.scalar_type() && (img.scalar_type() == at::kFloat ||
              img.scalar_type() == at::kDouble), "ssim: img and ref must both be float32 or float64");
  TORCH_CHECK(img.device().is_cpu() && ref.device().is_cpu(), "ssim: CPU tensors expected");
  const int64_t H = img.size(0), W = img.size(1), C = img.size(2);
  TORCH_CHECK(H >= kWin && W >= kWin && C >= 1, "ssim: images must be at least 11 x 11, got ", H, " x ", W);
  return {H, W, C, H - kWin + 1, W - kWin + 1};
}

// Window statistics of the valid region: st[5][Hv][Wv*C] = G*x, G*y, G*x^2, G*y^2, G*xy.
template <typename T>
void window_stats(const Dims& d, const T* x, const T* y, const std::vector<T>& w, std::vector<T>& st) {
  const int64_t vr = d.vrow(), plane = d.Hv * vr;
  std::vector<T> hb(static_cast<size_t>(5 * d.H * vr));  // horizontal pass, [5][H][Wv*C]
  const int64_t hplane = d.H * vr;
  at::parallel_for(0, d.H, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* o[5];
      for (int m = 0; m < 5; ++m) o[m] = hb.data() + m * hplane + r * vr;
      for (int m = 0; m < 5; ++m) std::fill(o[m], o[m] + vr, T(0));
      for (int k = 0; k < kWin; ++k) {
        const T wk = w[k];
        const T* xr = x + r * d.row() + k * d.C;
        const T* yr = y + r * d.row() + k * d.C;
#pragma omp simd
        for (int64_t j = 0; j < vr; ++j) {
          const T a = xr[j], b = yr[j];
          o[0][j] += wk * a;
          o[1][j] += wk * b;
          o[2][j] += wk * a * a;
          o[3][j] += wk * b * b;
          o[4][j] += wk * a * b;
        }
      }
    }
  });
  st.assign(static_cast<size_t>(5 * plane), T(0));
  at::parallel_for(0, d.Hv, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int m = 0; m < 5; ++m) {
        T* o = st.data() + m * plane + r * vr;
        for (int k = 0; k < kWin; ++k) {
          const T wk = w[k];
          const T* h = hb.data() + m * hplane + (r + k) * vr;
#pragma omp simd
          for (int64_t j = 0; j < vr; ++j) o[j] += wk * h[j];
        }
      }
  });
}

template <typename T>
T ssim_value(T mx, T my, T exx, T eyy, T exy) {
  const T a1 = 2 * mx * my + T(kC1), a2 = 2 * (exy - mx * my) + T(kC2);
  const T b1 = mx * mx + my * my + T(kC1), b2 = (exx - mx * mx) + (eyy - my * my) + T(kC2);
  return a1 * a2 / (b1 * b2);
}

template <typename T>
double ssim_sum(const Dims& d, const T* x, const T* y) {
  const auto w = window<T>();
  std::vector<T> st;
  window_stats(d, x, y, w, st);
  const int64_t vr = d.vrow(), plane = d.Hv * vr;
  std::vector<double> rows(static_cast<size_t>(d.Hv));
  at::parallel_for(0, d.Hv, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* s = st.data() + r * vr;
      T acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < vr; ++j)
        acc += ssim_value(s[j], s[plane + j], s[2 * plane + j], s[3 * plane + j], s[4 * plane + j]);
      rows[r] = acc;
    }
  });
  double total = 0;
  for (double v : rows) total += v;
  return total / double(plane);
}

Tensor ssim_cpu(const Tensor& img_, const Tensor& ref_) {
  const Dims d = check(img_, ref_);
  const auto img = img_.contiguous(), ref = ref_.contiguous();
  auto out = at::empty({}, img.options());
  AT_DISPATCH_FLOATING_TYPES(img.scalar_type(), "ssim_cpu", [&] {
    out.fill_(ssim_sum<scalar_t>(d, img.data_ptr<scalar_t>(), ref.data_ptr<scalar_t>()));
  });
  return out;
}

// d(mean S)/d img into out, times the incoming gradient grad.
template <typename T>
void ssim_grad(const Dims& d, const T* x, const T* y, double grad, T* out) {
  const auto w = window<T>();
    std::vector<T> st;
  window_stats(d, x, y, w, st);
  const int64_t vr = d.vrow(), plane = d.Hv * vr, C = d.C;
  const T g = T(grad / double(plane));
  // dS/dmx, dS/d(G*x^2), dS/d(G*xy) on the valid region, each row padded by kWin - 1 zeros per side
  const int64_t pr = vr + 2 * (kWin - 1) * C;
  std::vector<T> dm(static_cast<size_t>(3 * d.Hv * pr), T(0));
  const int64_t dplane = d.Hv * pr;
  at::parallel_for(0, d.Hv, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* s = st.data() + r * vr;
      T* o0 = dm.data() + r * pr + (kWin - 1) * C;
      T* o1 = o0 + dplane;
      T* o2 = o1 + dplane;
#pragma omp simd
      for (int64_t j = 0; j < vr; ++j) {
        const T mx = s[j], my = s[plane + j], exx = s[2 * plane + j], eyy = s[3 * plane + j];
        const T exy = s[4 * plane + j];
        const T a1 = 2 * mx * my + T(kC1), a2 = 2 * (exy - mx * my) + T(kC2);
        const T b1 = mx * mx + my * my + T(kC1), b2 = (exx - mx * mx) + (eyy - my * my) + T(kC2);
        const T inv = T(1) / (b1 * b2), S = a1 * a2 * inv;
        o0[j] = g * (2 * my * (a2 - a1) * inv - 2 * mx * S * (T(1) / b1 - T(1) / b2));
        o1[j] = g * (-S / b2);
        o2[j] = g * (2 * a1 * inv);
      }
    }
  });
  // transposed blur: along x (gather from the padded rows), then along y
  std::vector<T> tb(static_cast<size_t>(3 * d.Hv * d.row()), T(0));
  const int64_t tplane = d.Hv * d.row();
  at::parallel_for(0, d.Hv, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int m = 0; m < 3; ++m) {
        T* o = tb.data() + m * tplane + r * d.row();
        for (int k = 0; k < kWin; ++k) {
          const T wk = w[k];
          const T* s = dm.data() + m * dplane + r * pr + (kWin - 1 - k) * C;
#pragma omp simd
          for (int64_t j = 0; j < d.row(); ++j) o[j] += wk * s[j];
        }
      }
  });
  at::parallel_for(0, d.H, 8, [&](int64_t r0, int64_t r1) {
    std::vector<T> acc(static_cast<size_t>(3 * d.row()));
    for (int64_t r = r0; r < r1; ++r) {
      std::fill(acc.begin(), acc.end(), T(0));
      for (int k = 0; k < kWin; ++k) {
        const int64_t q = r - k;
        if (q < 0 || q >= d.Hv) continue;
        const T wk = w[k];
        for (int m = 0; m < 3; ++m) {
          const T* s = tb.data() + m * tplane + q * d.row();
          T* a = acc.data() + m * d.row();
#pragma omp simd
          for (int64_t j = 0; j < d.row(); ++j) a[j] += wk * s[j];
        }
      }
      const T* xr = x + r * d.row();
      const T* yr = y + r * d.row();
      T* o = out + r * d.row();
      const T* a0 = acc.data();
      const T* a1 = a0 + d.row();
      const T* a2 = a1 + d.row();
#pragma omp simd
      for (int64_t j = 0; j < d.row(); ++j) o[j] = a0[j] + 2 * xr[j] * a1[j] + yr[j] * a2[j];
    }
  });
}

Tensor ssim_backward_cpu(const Tensor& grad, const Tensor& img_, const Tensor& ref_) {
  const Dims d = check(img_, ref_);
  TORCH_CHECK(grad.numel() == 1, "ssim_backward: grad must be a scalar");
  const auto img = img_.contiguous(), ref = ref_.contiguous();
  auto out = at::empty_like(img);
  const double g = grad.item<double>();
  AT_DISPATCH_FLOATING_TYPES(img.scalar_type(), "ssim_backward_cpu", [&] {
    ssim_grad<scalar_t>(d, img.data_ptr<scalar_t>(), ref.data_ptr<scalar_t>(), g, out.data_ptr<scalar_t>());
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
