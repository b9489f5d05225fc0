// Fused SSIM of two images [H,W,C] (the trainer's loss; torch reference: gsworkbench/train/losses.py ssim).
//
// SSIM over an 11 x 11 Gaussian window (sigma 1.5), valid region, K1 = 0.01, K2 = 0.03, data range 1:
//   S(q) = (2 mx my + C1)(2 sxy + C2) / ((mx^2 + my^2 + C1)(sxx + syy + C2)), mean over q and channels,
// with mx = G*x, sxx = G*(x^2) - mx^2, sxy = G*(xy) - mx my (G the window). The blur is separable, so
// each pass is a loop over one contiguous image row of W*C values (vectorizes). The backward recomputes
// the window statistics and scatters dS/d(mx, G*x^2, G*xy) back through the transposed blur. Both work
// in bands of rows whose buffers stay in cache.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
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

// The work is done in bands of kBand valid rows, each band's buffers (a few MB at most) private to its
// thread, so every pass reads data still in cache instead of image-sized intermediate planes.
constexpr int64_t kBand = 32;

// Window statistics of valid rows [q0, q1) into st[5][q1-q0][Wv*C] = G*x, G*y, G*x^2, G*y^2, G*xy;
// hb is scratch for the horizontal pass over input rows [q0, q1 + kWin - 1).
template <typename T>
void band_stats(const Dims& d, const T* x, const T* y, const std::vector<T>& w, int64_t q0, int64_t q1,
                std::vector<T>& st, std::vector<T>& hb) {
  const int64_t vr = d.vrow(), n = q1 - q0, hn = n + kWin - 1;
  hb.assign(static_cast<size_t>(5 * hn * vr), T(0));
  for (int64_t i = 0; i < hn; ++i) {
    T* o[5];
    for (int m = 0; m < 5; ++m) o[m] = hb.data() + (m * hn + i) * vr;
    for (int k = 0; k < kWin; ++k) {
      const T wk = w[k];
      const T* xr = x + (q0 + i) * d.row() + k * d.C;
      const T* yr = y + (q0 + i) * d.row() + k * d.C;
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
  st.assign(static_cast<size_t>(5 * n * vr), T(0));
  for (int m = 0; m < 5; ++m)
    for (int64_t i = 0; i < n; ++i) {
      T* o = st.data() + (m * n + i) * vr;
      for (int k = 0; k < kWin; ++k) {
        const T wk = w[k];
        const T* h = hb.data() + (m * hn + i + k) * vr;
#pragma omp simd
        for (int64_t j = 0; j < vr; ++j) o[j] += wk * h[j];
      }
    }
}

// The four factors of S = a1 a2 / (b1 b2) at one window, from its statistics (forward and backward).
template <typename T>
struct Terms {
  T a1, a2, b1, b2;
};

template <typename T>
Terms<T> ssim_terms(T mx, T my, T exx, T eyy, T exy) {
  return {2 * mx * my + T(kC1), 2 * (exy - mx * my) + T(kC2), mx * mx + my * my + T(kC1),
          (exx - mx * mx) + (eyy - my * my) + T(kC2)};
}

template <typename T>
T ssim_value(T mx, T my, T exx, T eyy, T exy) {
  const Terms<T> t = ssim_terms(mx, my, exx, eyy, exy);
  return t.a1 * t.a2 / (t.b1 * t.b2);
}

int64_t num_bands(int64_t rows) { return (rows + kBand - 1) / kBand; }

template <typename T>
double ssim_sum(const Dims& d, const T* x, const T* y) {
  const auto w = window<T>();
  const int64_t vr = d.vrow(), nb = num_bands(d.Hv);
  std::vector<double> bands(static_cast<size_t>(nb), 0.0);
  at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> st, hb;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t q0 = b * kBand, q1 = std::min(d.Hv, q0 + kBand), n = q1 - q0;
      band_stats(d, x, y, w, q0, q1, st, hb);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T* s = st.data() + i * vr;
        const int64_t plane = n * vr;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < vr; ++j)
          acc += ssim_value(s[j], s[plane + j], s[2 * plane + j], s[3 * plane + j], s[4 * plane + j]);
        total += acc;
      }
      bands[b] = total;
    }
  });
  double total = 0;
  for (double v : bands) total += v;
  return total / double(d.Hv * vr);
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

// d(mean S)/d img into out, times the incoming gradient grad. Band by band of output (image) rows
// [r0, r1): the window statistics of the valid rows q in [r0 - kWin + 1, r1) that reach them, dS/dmx,
// dS/d(G*x^2), dS/d(G*xy) there, and the transposed blur (along x, then along y) back to the pixels.
template <typename T>
void ssim_grad(const Dims& d, const T* x, const T* y, double grad, T* out) {
  const auto w = window<T>();
  const int64_t vr = d.vrow(), C = d.C, row = d.row();
  const T g = T(grad / double(d.Hv * vr));
  const int64_t pr = vr + 2 * (kWin - 1) * C;  // dm rows, padded by kWin - 1 pixels of zeros per side
  at::parallel_for(0, num_bands(d.H), 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> st, hb, dm, tb, acc(static_cast<size_t>(3 * row));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kBand, r1 = std::min(d.H, r0 + kBand);
      const int64_t q0 = std::max<int64_t>(0, r0 - (kWin - 1)), q1 = std::min(d.Hv, r1), n = q1 - q0;
      if (n > 0) {
        band_stats(d, x, y, w, q0, q1, st, hb);
        const int64_t plane = n * vr;
        dm.assign(static_cast<size_t>(3 * n * pr), T(0));
        for (int64_t i = 0; i < n; ++i) {
          const T* s = st.data() + i * vr;
          T* o0 = dm.data() + i * pr + (kWin - 1) * C;
          T* o1 = o0 + n * pr;
          T* o2 = o1 + n * pr;
#pragma omp simd
          for (int64_t j = 0; j < vr; ++j) {
            const T mx = s[j], my = s[plane + j], exx = s[2 * plane + j], eyy = s[3 * plane + j];
            const T exy = s[4 * plane + j];
            const Terms<T> t = ssim_terms(mx, my, exx, eyy, exy);
            const T inv = T(1) / (t.b1 * t.b2), S = t.a1 * t.a2 * inv;
            o0[j] = g * (2 * my * (t.a2 - t.a1) * inv - 2 * mx * S * (T(1) / t.b1 - T(1) / t.b2));
            o1[j] = g * (-S / t.b2);
            o2[j] = g * (2 * t.a1 * inv);
          }
        }
        // transposed blur along x: gather from the padded rows
        tb.assign(static_cast<size_t>(3 * n * row), T(0));
        for (int m = 0; m < 3; ++m)
          for (int64_t i = 0; i < n; ++i) {
            T* o = tb.data() + (m * n + i) * row;
            for (int k = 0; k < kWin; ++k) {
              const T wk = w[k];
              const T* s = dm.data() + (m * n + i) * pr + (kWin - 1 - k) * C;
#pragma omp simd
              for (int64_t j = 0; j < row; ++j) o[j] += wk * s[j];
            }
          }
      }
      // transposed blur along y, then the chain rule to the pixels
      for (int64_t r = r0; r < r1; ++r) {
        std::fill(acc.begin(), acc.end(), T(0));
        for (int k = 0; k < kWin; ++k) {
          const int64_t q = r - k;
          if (q < q0 || q >= q1) continue;
          const T wk = w[k];
          for (int m = 0; m < 3; ++m) {
            const T* s = tb.data() + (m * n + (q - q0)) * row;
            T* a = acc.data() + m * row;
#pragma omp simd
            for (int64_t j = 0; j < row; ++j) a[j] += wk * s[j];
          }
        }
        const T* xr = x + r * row;
        const T* yr = y + r * row;
        T* o = out + r * row;
        const T* a0 = acc.data();
        const T* a1 = a0 + row;
        const T* a2 = a1 + row;
#pragma omp simd
        for (int64_t j = 0; j < row; ++j) o[j] = a0[j] + 2 * xr[j] * a1[j] + yr[j] * a2[j];
      }
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
