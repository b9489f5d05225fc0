// The windowed SSIM of two images [H,W,C], row by row: shared by the SSIM ops (ssim.cpp) and the
// fused photometric loss (photometric_loss.cpp). Torch reference: gsworkbench/train/losses.py ssim_torch.
//
// SSIM over an 11 x 11 Gaussian window (sigma 1.5), valid region, K1 = 0.01, K2 = 0.03, data range 1:
//   S(q) = (2 mx my + C1)(2 sxy + C2) / ((mx^2 + my^2 + C1)(sxx + syy + C2)), mean over q and channels,
// with mx = G*x, sxx = G*(x^2) - mx^2, sxy = G*(xy) - mx my (G the window). The blur is separable: per
// valid row, a vertical pass over the 11 image rows below it (all W*C values of a row), then a
// horizontal pass over those sums, each loop over a row's elements keeping the 11 taps in registers
// (one store per output). The gradient scatters dS/d(mx, G*x^2, G*xy) back through the transposed blur,
// streaming down a thread's rows with a kWin-row ring (rows_grad).
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
constexpr int64_t kBand = 32;  // rows per band (band_sum's unit of work; the thread shares' grain)

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

// The vertical 11-tap sums of x, y, x^2, y^2, xy over input rows v .. v + 10, for all W*C values of a
// row: h[c * W*C + j] for the statistics c = 0..4. Read from the images themselves: the 11 rows stay in
// cache as the window slides down, and the horizontal taps that follow read h, which fits in L1/L2.
template <typename T>
inline void vertical_sums(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t v, T* h) {
  const Window<T> win = win_;  // a local copy: the stores below cannot alias it
  const int64_t row = d.row();
  const T* xv = x + v * row;
  const T* yv = y + v * row;
#pragma omp simd
  for (int64_t j = 0; j < row; ++j) {
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0;
#pragma GCC unroll 11
    for (int k = 0; k < kWin; ++k) {
      const T a = xv[k * row + j], b = yv[k * row + j], wa = win.w[k] * a, wb = win.w[k] * b;
      s0 += wa;
      s1 += wb;
      s2 += wa * a;
      s3 += wb * b;
      s4 += wa * b;
    }
    h[j] = s0;
    h[row + j] = s1;
    h[2 * row + j] = s2;
    h[3 * row + j] = s3;
    h[4 * row + j] = s4;
  }
}

// The horizontal pass (five window statistics from the vertical sums, 11 taps) is written out in both
// band_sum and rows_grad: moved into a helper taking the statistics by pointer, GCC 12 no longer
// vectorized the loops around it (the gradient pass took 2.5x as long).

// Per thread: one row of vertical sums (5 W*C values), the padded dS/d(statistic) rows, and
// rows_grad's ring of their transposed x blurs.
template <typename T>
struct Scratch {
  std::vector<T> hb, dm, tb;
};

// Sum of S over valid rows [q0, q1) (no gradient); with row_s, also each row's sum at row_s[q].
template <typename T>
double band_sum(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t q0, int64_t q1,
                Scratch<T>& s, double* row_s = nullptr) {
  const Window<T> win = win_;
  const int64_t vr = d.vrow(), C = d.C, row = d.row();
  s.hb.resize(static_cast<size_t>(5 * row));
  const T* h = s.hb.data();
  double total = 0;
  for (int64_t q = q0; q < q1; ++q) {
    vertical_sums(d, x, y, win, q, s.hb.data());
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < vr; ++j) {  // the horizontal 11 taps of the vertical sums
      T m[5] = {0, 0, 0, 0, 0};
#pragma GCC unroll 11
      for (int k = 0; k < kWin; ++k)
        for (int c = 0; c < 5; ++c) m[c] += win.w[k] * h[c * row + k * C + j];
      const Terms<T> t = ssim_terms(m[0], m[1], m[2], m[3], m[4]);
      acc += t.a1 * t.a2 / (t.b1 * t.b2);
    }
    total += acc;
    if (row_s != nullptr) row_s[q] = acc;
  }
  return total;
}

// Image rows [r0, r1) (one thread's contiguous share): writes out[r][:] = scale * dS_sum/d x[r][:]
// (S_sum the sum of S over all valid windows) and, with row_s, row_s[v] = the sum of S over valid row v
// for the valid rows v in [r0, r1) (per row, so that totals summed in row order do not depend on the
// split).
// It streams down the rows, keeping only the last kWin rows of the intermediate in cache:
//   - per valid row v, the window statistics (vertical_sums, then the horizontal taps), then
//     dS/d(statistic) (3 rows), blurred back along x into the row's tb slot;
//   - image row r then takes the transposed vertical blur of the tb rows of valid rows r-10..r.
// The tb ring has kWin slots written twice (slot s and s + kWin), so any kWin consecutive rows lie at
// consecutive slots and the 11-tap loop indexes them with fixed strides.
// Valid rows outside [0, Hv) have zero tb rows. The windows that reach row r0 start at valid row
// r0 - 10: those 10 rows are computed again (as the share before computes them).
template <typename T>
void rows_grad(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t r0, int64_t r1, T scale,
               Scratch<T>& s, T* out, double* row_s = nullptr) {
  const Window<T> win = win_;
  const int64_t vr = d.vrow(), C = d.C, row = d.row();
  const int64_t pad = (kWin - 1) * C, pr = vr + 2 * pad;  // dm rows: kWin - 1 pixels of zeros per side
  const int64_t tslot = 3 * row;
  s.hb.resize(static_cast<size_t>(5 * row));
  s.tb.resize(static_cast<size_t>(2 * kWin * tslot));
  s.dm.assign(static_cast<size_t>(3 * pr), T(0));
  T* dm = s.dm.data();
  auto slot = [](int64_t v) { return ((v % kWin) + kWin) % kWin; };
  for (int64_t v = r0 - (kWin - 1); v < r1; ++v) {
    T* t0 = s.tb.data() + slot(v) * tslot;
    T* t1 = t0 + kWin * tslot;
    if (v < 0 || v >= d.Hv) {
      std::fill(t0, t0 + tslot, T(0));
      std::fill(t1, t1 + tslot, T(0));
    } else {
      T* h = s.hb.data();
      vertical_sums(d, x, y, win, v, h);
      T acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < vr; ++j) {  // then the horizontal 11 taps of those sums
        T m[5] = {0, 0, 0, 0, 0};
#pragma GCC unroll 11
        for (int k = 0; k < kWin; ++k)
          for (int c = 0; c < 5; ++c) m[c] += win.w[k] * h[c * row + k * C + j];
        const T mx = m[0], my = m[1];
        const Terms<T> t = ssim_terms(mx, my, m[2], m[3], m[4]);
        const T ib1 = T(1) / t.b1, ib2 = T(1) / t.b2, inv = ib1 * ib2, S = t.a1 * t.a2 * inv;
        acc += S;
        dm[pad + j] = scale * (2 * my * (t.a2 - t.a1) * inv - 2 * mx * S * (ib1 - ib2));
        dm[pr + pad + j] = scale * (-S * ib2);
        dm[2 * pr + pad + j] = scale * (2 * t.a1 * inv);
      }
      if (row_s != nullptr && v >= r0) row_s[v] = acc;
      // transposed blur along x of this row into its tb slot (both copies)
      for (int c = 0; c < 3; ++c) {
        const T* src = dm + c * pr;
        T *o = t0 + c * row, *o2 = t1 + c * row;
#pragma omp simd
        for (int64_t j = 0; j < row; ++j) {
          T a = 0;
#pragma GCC unroll 11
          for (int k = 0; k < kWin; ++k) a += win.w[k] * src[j + (kWin - 1 - k) * C];
          o[j] = o2[j] = a;
        }
      }
    }
    if (v < r0) continue;
    // image row r = v: transposed blur along y over valid rows r - 10 .. r (consecutive slots, the
    // first being that of r - 10), then the chain rule to the pixels
    const int64_t r = v;
    const T* xr = x + r * row;
    const T* yr = y + r * row;
    const T* tr = s.tb.data() + slot(r - (kWin - 1)) * tslot;  // k = kWin - 1 at slot offset 0
    T* o = out + r * row;
#pragma omp simd
    for (int64_t j = 0; j < row; ++j) {
      T a0 = 0, a1 = 0, a2 = 0;
#pragma GCC unroll 11
      for (int k = 0; k < kWin; ++k) {  // valid row r - k is at slot offset kWin - 1 - k
        const int64_t o2 = (kWin - 1 - k) * tslot + j;
        a0 += win.w[k] * tr[o2];
        a1 += win.w[k] * tr[row + o2];
        a2 += win.w[k] * tr[2 * row + o2];
      }
      o[j] = a0 + 2 * xr[j] * a1 + yr[j] * a2;
    }
  }
}

}  // namespace ssim
}  // namespace gsw
