// The windowed SSIM of two images [H,W,C], row by row: shared by the SSIM ops (ssim.cpp) and the
// fused photometric loss (photometric_loss.cpp). Torch reference: gsworkbench/train/losses.py ssim_torch.
//
// SSIM over an 11 x 11 Gaussian window (sigma 1.5), valid region, K1 = 0.01, K2 = 0.03, data range 1:
//   S(q) = (2 mx my + C1)(2 sxy + C2) / ((mx^2 + my^2 + C1)(sxx + syy + C2)), mean over q and channels,
// with mx = G*x, sxx = G*(x^2) - mx^2, sxy = G*(xy) - mx my (G the window). The blur is separable: per
// valid row, a vertical pass over the 11 image rows below it (all W*C values of a row), then a
// horizontal pass over those sums, each loop over a row's elements keeping the 11 taps in registers
// (one store per output). The gradient (ssim_grad.h) scatters dS/d(mx, G*x^2, G*xy) back through the
// transposed blur, streaming down a thread's rows with a kWin-row ring (rows_grad).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "vec64.h"

namespace gsw {
namespace ssim {

using cpu::kVecLen;
using cpu::lane_total;
using cpu::load_as;
using cpu::store_as;
using cpu::Vec;
using cpu::vload;
using cpu::vstore;

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

inline int64_t num_bands(int64_t rows) { return (rows + kBand - 1) / kBand; }

// The four factors of S = a1 a2 / (b1 b2) at one window, from its statistics.
template <typename T>
struct Terms {
  T a1, a2, b1, b2;
};

// V: T, or Vec<T> below (one vector of windows); the constants are T.
template <typename T, typename V>
inline Terms<V> ssim_terms(V mx, V my, V exx, V eyy, V exy) {
  return {2 * mx * my + T(kC1), 2 * (exy - mx * my) + T(kC2), mx * mx + my * my + T(kC1),
          (exx - mx * mx) + (eyy - my * my) + T(kC2)};
}

// The five window statistics (mx, my, E x^2, E y^2, E xy) at valid position j of a row (V = Vec<T>: the
// kVecLen positions from j): the horizontal 11 taps of the vertical sums h (statistic c at h + c row).
// With C a constant after inlining (RGB), every load of a statistic is its base pointer plus a constant.
template <typename T, typename V>
inline void window_stats(const T* h, int64_t row, int64_t C, const Window<T>& win, int64_t j, V* m) {
  for (int c = 0; c < 5; ++c) m[c] = V{};
#pragma GCC unroll 11
  for (int k = 0; k < kWin; ++k)
    for (int c = 0; c < 5; ++c) m[c] += win.w[k] * load_as<V>(h + c * row + k * C + j);
}

// S at one window (or vector of windows), and with g (three values) dS/d(mx, E x^2, E xy) scaled by
// scale. One division: 1/b1 and 1/b2 are taken from 1/(b1 b2).
template <typename T, typename V>
inline V window_ssim(const V* m, T scale, V* g) {
  const V mx = m[0], my = m[1];
  const Terms<V> t = ssim_terms<T, V>(mx, my, m[2], m[3], m[4]);
  const V inv = T(1) / (t.b1 * t.b2), S = t.a1 * t.a2 * inv;
  if (g != nullptr) {
    const V ib1 = t.b2 * inv, ib2 = t.b1 * inv;
    g[0] = scale * (2 * my * (t.a2 - t.a1) * inv - 2 * mx * S * (ib1 - ib2));
    g[1] = scale * (-S * ib2);
    g[2] = scale * (2 * t.a1 * inv);
  }
  return S;
}

// The sum of S over valid row positions [0, vr) from the vertical sums h; with dm (three rows pr
// apart), also writes dS/d(statistic) scaled by scale at dm[c pr + j]. Whole vectors, then the rest
// one by one.
template <typename T>
inline T row_ssim(const T* h, int64_t row, int64_t C, int64_t vr, const Window<T>& win_, T scale, T* dm,
                  int64_t pr) {
  const Window<T> win = win_;
  constexpr int64_t L = kVecLen<T>;
  Vec<T> accv{};
  int64_t j = 0;
  for (; j + L <= vr; j += L) {
    Vec<T> m[5], g[3];
    window_stats<T, Vec<T>>(h, row, C, win, j, m);
    accv += window_ssim<T, Vec<T>>(m, scale, dm != nullptr ? g : nullptr);
    if (dm != nullptr)
      for (int c = 0; c < 3; ++c) vstore(dm + c * pr + j, g[c]);
  }
  T acc = lane_total<T>(accv);
  for (; j < vr; ++j) {
    T m[5], g[3];
    window_stats<T, T>(h, row, C, win, j, m);
    acc += window_ssim<T, T>(m, scale, dm != nullptr ? g : nullptr);
    if (dm != nullptr)
      for (int c = 0; c < 3; ++c) dm[c * pr + j] = g[c];
  }
  return acc;
}

// The vertical 11-tap sums of x, y, x^2, y^2, xy over input rows v .. v + 10, for all W*C values of a
// row: h[c * W*C + j] for the statistics c = 0..4. Read from the images themselves: the 11 rows stay in
// cache as the window slides down, and the horizontal taps that follow read h, which fits in L1/L2.
// Blocks of two vectors (vec64.h) per statistic: a block's sums stay in registers while the taps walk
// down the rows by one pointer bump each (plain loops over j keep 22 row pointers live, more than GCC
// holds in registers, so it would reload one per load).
template <typename T>
inline void vertical_sums(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t v, T* h) {
  const Window<T> win = win_;  // a local copy: the stores below cannot alias it
  const int64_t row = d.row();
  constexpr int64_t L = kVecLen<T>;
  const T* xv = x + v * row;
  const T* yv = y + v * row;
  int64_t j0 = 0;
  for (; j0 + 2 * L <= row; j0 += 2 * L) {
    Vec<T> s[5][2] = {};
#pragma GCC unroll 11
    for (int k = 0; k < kWin; ++k) {
      const T w = win.w[k];
      for (int u = 0; u < 2; ++u) {
        const Vec<T> a = vload(xv + k * row + j0 + u * L), b = vload(yv + k * row + j0 + u * L);
        const Vec<T> wa = w * a, wb = w * b;
        s[0][u] += wa;
        s[1][u] += wb;
        s[2][u] += wa * a;
        s[3][u] += wb * b;
        s[4][u] += wa * b;
      }
    }
    for (int c = 0; c < 5; ++c)
      for (int u = 0; u < 2; ++u) vstore(h + c * row + j0 + u * L, s[c][u]);
  }
  for (int64_t j = j0; j < row; ++j) {  // the last partial block
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0;
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
// band_sum and rows_grad: GCC 12 does not vectorize the loops around a helper that takes the
// statistics by pointer.

// Per thread: one row of vertical sums (5 W*C values), the padded dS/d(statistic) rows, and
// rows_grad's ring of their transposed x blurs.
template <typename T>
struct Scratch {
  std::vector<T> hb, dm, tb;
};

// band_sum and rows_grad below take the channel count as CC (3: RGB, where the horizontal taps' offsets
// k * C become constants, so each statistic's loads share one base pointer) or 0 (any C, from d).

// Sum of S over valid rows [q0, q1) (no gradient); with row_s, also each row's sum at row_s[q].
template <typename T, int CC>
double band_sum_c(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t q0, int64_t q1,
                  Scratch<T>& s, double* row_s) {
  const Window<T> win = win_;
  const int64_t vr = d.vrow(), C = CC > 0 ? CC : d.C, row = d.row();
  s.hb.resize(static_cast<size_t>(5 * row));
  const T* h = s.hb.data();
  double total = 0;
  for (int64_t q = q0; q < q1; ++q) {
    vertical_sums(d, x, y, win, q, s.hb.data());
    const T acc = row_ssim<T>(h, row, C, vr, win, T(1), nullptr, 0);
    total += acc;
    if (row_s != nullptr) row_s[q] = acc;
  }
  return total;
}

template <typename T>
double band_sum(const Dims& d, const T* x, const T* y, const Window<T>& win, int64_t q0, int64_t q1, Scratch<T>& s,
                double* row_s = nullptr) {
  return d.C == 3 ? band_sum_c<T, 3>(d, x, y, win, q0, q1, s, row_s) : band_sum_c<T, 0>(d, x, y, win, q0, q1, s, row_s);
}

}  // namespace ssim
}  // namespace gsw
