// The gradient of the windowed SSIM (ssim_window.h) with respect to the first image, streaming down
// a thread's rows: shared by the SSIM backward (ssim.cpp) and the fused photometric loss
// (photometric_loss.cpp). Torch reference: gsworkbench/train/losses.py ssim_torch.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ssim_window.h"
#include "vec64.h"

namespace gsw {
namespace ssim {

// o[j] = sum_k w[k] src[j + (kWin - 1 - k) C] for j in [0, n): the transposed blur along x of one
// (zero-padded) row.
template <typename T>
inline void row_blur_t(const T* src, int64_t n, int64_t C, const Window<T>& win_, T* o, T* o2) {
  const Window<T> win = win_;
  constexpr int64_t L = kVecLen<T>;
  int64_t j = 0;
  auto at = [&](auto v0, int64_t j) {
    using V = decltype(v0);
    V a = v0;
#pragma GCC unroll 11
    for (int k = 0; k < kWin; ++k) a += win.w[k] * load_as<V>(src + j + (kWin - 1 - k) * C);
    store_as(o + j, a);
    store_as(o2 + j, a);
  };
  for (; j + 2 * L <= n; j += 2 * L) {  // two independent 11-FMA chains in flight
    at(Vec<T>{}, j);
    at(Vec<T>{}, j + L);
  }
  for (; j + L <= n; j += L) at(Vec<T>{}, j);
  for (; j < n; ++j) at(T(0), j);
}

// Image row r's gradient from the tb ring (rows_grad): the transposed vertical blur of the three
// dS/d(statistic) rows of valid rows r - 10 .. r (tr: the slot of r - 10, slots tslot apart), then the
// chain rule to the pixels: o = a0 + 2 x a1 + y a2. Blocked as vertical_sums.
template <typename T>
inline void pixel_grads(const T* tr, int64_t tslot, int64_t row, const Window<T>& win_, const T* xr, const T* yr,
                        T* o) {
  const Window<T> win = win_;
  constexpr int64_t L = kVecLen<T>;
  int64_t j0 = 0;
  for (; j0 + 2 * L <= row; j0 += 2 * L) {
    Vec<T> a[3][2] = {};
    const T* t = tr + (kWin - 1) * tslot + j0;  // valid row r - k is at slot offset kWin - 1 - k
    // one pointer stepping back a slot per tap (unrolled: each tap's weight has a fixed index and no
    // loop branch separates the taps)
#pragma GCC unroll 11
    for (int k = 0; k < kWin; ++k, t -= tslot) {
      const T w = win.w[k];
      for (int c = 0; c < 3; ++c)
        for (int u = 0; u < 2; ++u) a[c][u] += w * vload(t + c * row + u * L);
    }
    for (int u = 0; u < 2; ++u) {
      const int64_t j = j0 + u * L;
      vstore(o + j, a[0][u] + T(2) * vload(xr + j) * a[1][u] + vload(yr + j) * a[2][u]);
    }
  }
  for (int64_t j = j0; j < row; ++j) {
    T a0 = 0, a1 = 0, a2 = 0;
    for (int k = 0; k < kWin; ++k) {
      const int64_t o2 = (kWin - 1 - k) * tslot + j;
      a0 += win.w[k] * tr[o2];
      a1 += win.w[k] * tr[row + o2];
      a2 += win.w[k] * tr[2 * row + o2];
    }
    o[j] = a0 + 2 * xr[j] * a1 + yr[j] * a2;
  }
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
template <typename T, int CC>
void rows_grad_c(const Dims& d, const T* x, const T* y, const Window<T>& win_, int64_t r0, int64_t r1, T scale,
                 Scratch<T>& s, T* out, double* row_s) {
  const Window<T> win = win_;
  const int64_t vr = d.vrow(), C = CC > 0 ? CC : d.C, row = d.row();
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
      const T acc = row_ssim<T>(h, row, C, vr, win, scale, dm + pad, pr);
      if (row_s != nullptr && v >= r0) row_s[v] = acc;
      // transposed blur along x of this row into its tb slot (both copies)
      for (int c = 0; c < 3; ++c) row_blur_t<T>(dm + c * pr, row, C, win, t0 + c * row, t1 + c * row);
    }
    if (v < r0) continue;
    // image row r = v: transposed blur along y over valid rows r - 10 .. r (consecutive slots, the
    // first being that of r - 10), then the chain rule to the pixels
    const int64_t r = v;
    const T* xr = x + r * row;
    const T* yr = y + r * row;
    const T* tr = s.tb.data() + slot(r - (kWin - 1)) * tslot;  // k = kWin - 1 at slot offset 0
    pixel_grads(tr, tslot, row, win, xr, yr, out + r * row);
  }
}

template <typename T>
void rows_grad(const Dims& d, const T* x, const T* y, const Window<T>& win, int64_t r0, int64_t r1, T scale,
               Scratch<T>& s, T* out, double* row_s = nullptr) {
  if (d.C == 3)
    rows_grad_c<T, 3>(d, x, y, win, r0, r1, scale, s, out, row_s);
  else
    rows_grad_c<T, 0>(d, x, y, win, r0, r1, scale, s, out, row_s);
}

}  // namespace ssim
}  // namespace gsw
