// The windowed SSIM of two images [H,W,C], in bands of rows: shared by the SSIM ops (ssim.cpp) and the
// fused photometric loss (photometric_loss.cpp). Torch reference: gsworkbench/train/losses.py ssim_torch.
//
// SSIM over an 11 x 11 Gaussian window (sigma 1.5), valid region, K1 = 0.01, K2 = 0.03, data range 1:
//   S(q) = (2 mx my + C1)(2 sxy + C2) / ((mx^2 + my^2 + C1)(sxx + syy + C2)), mean over q and channels,
// with mx = G*x, sxx = G*(x^2) - mx^2, sxy = G*(xy) - mx my (G the window). The blur is separable: a
// horizontal pass over one contiguous image row of W*C values, then a vertical pass, each loop over a
// row's elements keeping the 11 taps in registers (one store per output). The gradient scatters
// dS/d(mx, G*x^2, G*xy) back through the transposed blur. Work goes in bands of kBand rows whose buffers
// stay in cache; a band's gradient recomputes the window statistics of the kWin - 1 rows above it.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace gsw {
namespace ssim {

constexpr int kWin = 11;
constexpr int kHalf = kWin / 2;
constexpr double kC1 = 0.01 * 0.01, kC2 = 0.03 * 0.03;
constexpr int64_t kBand = 32;  // rows per band

// The normalised Gaussian window, in T.
template <typename T>
struct Window {
  T w[kWin];
  Window() {
    double v[kWin], s = 0;
    for (int k = 0; k < kWin; ++k) s += (v[k] = std::exp(-double((k - kHalf) * (k - kHalf)) / (2 * 1.5 * 1.5)));
    for (int k = 0; k < kWin; ++k) w[k] = T(v[k] / s);
  }
};

struct Dims {
  int64_t H, W, C, Hv, Wv;  // image, and the valid region (Hv x Wv windows)
  int64_t row() const { return W * C; }
  int64_t vrow() const { return Wv * C; }
  int64_t windows() const { return Hv * Wv * C; }
};

// Checks img and ref (named in errors by `op`) and returns their dimensions.
inline Dims check(const at::Tensor& img, const at::Tensor& ref, const char* op) {
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

inline int64_t num_bands(int64_t rows) { return (rows + kBand - 1) / kBand; }

// The four factors of S = a1 a2 / (b1 b2) at one window, from its statistics.
template <typename T>
struct Terms {
  T a1, a2, b1, b2;
};

template <typename T>
inline Terms<T> ssim_terms(T mx, T my, T exx, T eyy, T exy) {
  return {2 * mx * my + T(kC1), 2 * (exy - mx * my) + T(kC2), mx * mx + my * my + T(kC1),
          (exx - mx * mx) + (eyy - my * my) + T(kC2)};
}

// Horizontal pass over input rows [i0, i0 + hn): hb[5][hn][Wv*C] = the 11-tap sums of x, y, x^2, y^2, xy.
template <typename T>
void blur_x(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t i0, int64_t hn, T* hb) {
  const Window<T> win = win_;  // a local copy: the stores below cannot alias it
  const int64_t vr = d.vrow(), C = d.C, plane = hn * vr;
  for (int64_t i = 0; i < hn; ++i) {
    const T* xr = x + (i0 + i) * d.row();
    const T* yr = y + (i0 + i) * d.row();
    T* o = hb + i * vr;
#pragma omp simd
    for (int64_t j = 0; j < vr; ++j) {
      T s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0;
#pragma GCC unroll 11
      for (int k = 0; k < kWin; ++k) {
        const T a = xr[j + k * C], b = yr[j + k * C], wa = win.w[k] * a, wb = win.w[k] * b;
        s0 += wa;
        s1 += wb;
        s2 += wa * a;
        s3 += wb * b;
        s4 += wa * b;
      }
      o[j] = s0;
      o[plane + j] = s1;
      o[2 * plane + j] = s2;
      o[3 * plane + j] = s3;
      o[4 * plane + j] = s4;
    }
  }
}

// The vertical pass (five window statistics from the horizontal sums, 11 taps) is written out in both
// band_sum and band_grad: moved into a helper taking the statistics by pointer, GCC 12 no longer
// vectorized the loops around it (the gradient pass took 2.5x as long).

// Per band: the horizontal sums of its input rows and the padded dS/d(statistic) rows.
template <typename T>
struct Scratch {
  std::vector<T> hb, dm, tb;
};

// Sum of S over valid rows [q0, q1) (no gradient).
template <typename T>
double band_sum(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t q0, int64_t q1,
                Scratch<T>& s) {
  const Window<T> win = win_;
  const int64_t vr = d.vrow(), n = q1 - q0, hn = n + kWin - 1, plane = hn * vr;
  s.hb.resize(static_cast<size_t>(5 * plane));
  blur_x(d, x, y, win, q0, hn, s.hb.data());
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T* h = s.hb.data() + i * vr;
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < vr; ++j) {
      T m[5] = {0, 0, 0, 0, 0};
#pragma GCC unroll 11
      for (int k = 0; k < kWin; ++k)
        for (int c = 0; c < 5; ++c) m[c] += win.w[k] * h[c * plane + k * vr + j];
      const Terms<T> t = ssim_terms(m[0], m[1], m[2], m[3], m[4]);
      acc += t.a1 * t.a2 / (t.b1 * t.b2);
    }
    total += acc;
  }
  return total;
}

// One band of output rows [r0, r1): writes out[r][:] = scale * dS_sum/d x[r][:] (S_sum the sum of S
// over all valid windows) and returns the sum of S over the valid rows in [r0, r1). The windows that
// reach these rows start at valid rows [r0 - kWin + 1, r1); with carry (the previous band of this
// thread was [r0 - kBand, r0), in the same scratch) the first kWin - 1 of them are taken from it
// instead of being computed again.
template <typename T>
double band_grad(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t r0, int64_t r1, T scale,
                 Scratch<T>& s, T* out, bool carry = false) {
  const Window<T> win = win_;
  const int64_t vr = d.vrow(), C = d.C, row = d.row();
  const int64_t q0 = carry ? r0 : std::max<int64_t>(0, r0 - (kWin - 1)), q1 = std::min(d.Hv, r1), n = q1 - q0;
  const int64_t pad = (kWin - 1) * C, pr = vr + 2 * pad;  // dm rows: kWin - 1 pixels of zeros per side
  // tb: per plane kBand + kWin - 1 rows, row t holding valid row r0 - (kWin - 1) + t (zeros outside)
  const int64_t tn = kBand + kWin - 1, keep = carry ? kWin - 1 : 0;
  s.tb.resize(static_cast<size_t>(3 * tn * row));
  for (int c = 0; c < 3; ++c) {
    T* plane = s.tb.data() + c * tn * row;
    if (carry) std::copy(plane + kBand * row, plane + tn * row, plane);  // rows r0 - kWin + 1 .. r0 - 1
    std::fill(plane + keep * row, plane + tn * row, T(0));
  }
  double total = 0;
  if (n > 0) {
    const int64_t hn = n + kWin - 1, plane = hn * vr;
    s.hb.resize(static_cast<size_t>(5 * plane));
    blur_x(d, x, y, win, q0, hn, s.hb.data());
    s.dm.assign(static_cast<size_t>(3 * pr), T(0));
    T* dm = s.dm.data();
    for (int64_t i = 0; i < n; ++i) {
      const T* h = s.hb.data() + i * vr;
      const bool own = q0 + i >= r0;
      T acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < vr; ++j) {
        T m[5] = {0, 0, 0, 0, 0};
#pragma GCC unroll 11
        for (int k = 0; k < kWin; ++k)
          for (int c = 0; c < 5; ++c) m[c] += win.w[k] * h[c * plane + k * vr + j];
        const T mx = m[0], my = m[1];
        const Terms<T> t = ssim_terms(mx, my, m[2], m[3], m[4]);
        const T ib1 = T(1) / t.b1, ib2 = T(1) / t.b2, inv = ib1 * ib2, S = t.a1 * t.a2 * inv;
        acc += S;
        dm[pad + j] = scale * (2 * my * (t.a2 - t.a1) * inv - 2 * mx * S * (ib1 - ib2));
        dm[pr + pad + j] = scale * (-S * ib2);
        dm[2 * pr + pad + j] = scale * (2 * t.a1 * inv);
      }
      if (own) total += acc;
      // transposed blur along x of this row into its tb row
      const int64_t tr = q0 + i - (r0 - (kWin - 1));
      for (int c = 0; c < 3; ++c) {
        const T* src = dm + c * pr;
        T* o = s.tb.data() + (c * tn + tr) * row;
#pragma omp simd
        for (int64_t j = 0; j < row; ++j) {
          T v = 0;
#pragma GCC unroll 11
          for (int k = 0; k < kWin; ++k) v += win.w[k] * src[j + (kWin - 1 - k) * C];
          o[j] = v;
        }
      }
    }
  }
  // transposed blur along y (tb is zero outside the valid rows), then the chain rule to the pixels
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * row;
    const T* yr = y + r * row;
    const T* t0 = s.tb.data() + (r - r0) * row;  // tb row of valid row r - (kWin - 1), i.e. k = kWin - 1
    const T* t1 = t0 + tn * row;
    const T* t2 = t1 + tn * row;
    T* o = out + r * row;
#pragma omp simd
    for (int64_t j = 0; j < row; ++j) {
      T a0 = 0, a1 = 0, a2 = 0;
#pragma GCC unroll 11
      for (int k = 0; k < kWin; ++k) {  // valid row r - k is tb row (r - r0) + (kWin - 1 - k)
        const int64_t o2 = (kWin - 1 - k) * row + j;
        a0 += win.w[k] * t0[o2];
        a1 += win.w[k] * t1[o2];
        a2 += win.w[k] * t2[o2];
      }
      o[j] = a0 + 2 * xr[j] * a1 + yr[j] * a2;
    }
  }
  return total;
}

}  // namespace ssim
}  // namespace gsw
