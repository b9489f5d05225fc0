// Where a tile's list can end: a lower bound, per quarter of a tile, of the alpha each Gaussian blends
// at every pixel there, shared by the CPU tile intersection and mirrored by the torch reference
// (gsworkbench/splat/_torch_impl.py, saturation_keep).
//
// The rasterizer stops a pixel before the Gaussian that would take its transmittance T to 1e-4 or
// below (blend.h). If every pixel of a block blends each Gaussian k of a tile's list with an alpha of
// at least a_k, then after entries 0..j its T would be at most prod (1 - a_k): once that product is
// below 1e-4, no pixel of the block reads past entry j (it would have stopped at or before it). When
// all four quarters are past that point, the tile's list can end at j: renders, last ids and gradients
// are those of the whole list. Front to back, most of a crowded tile's list lies past it.
//
// The bound a_k, on one quarter: sigma is convex for a positive definite conic, so its largest value
// over the quarter's pixel centres is at one of its four corner pixels (sixteen corners for a tile's
// four quarters, four vectors of four). Where alpha = min(0.99, o exp(-sigma)) >= 1/255 there, the
// Gaussian is blended (not skipped) at every pixel of the quarter. The exp is bounded from below
// without a call (exp_lower), and the bound is scaled by kSaturationMargin, which covers the
// rasterizer's float32 rounding of sigma and alpha (its fast exp included). Conics that are not
// positive definite or far from round (whose sigma suffers cancellation) and non-finite values
// contribute nothing (a = 0).
#pragma once

#include "gsw/blend.h"
#include "gsw/common.h"

namespace gsw {
namespace splat {

// Alpha bounds are scaled by this; the product must fall below kSaturationT before a tile ends.
constexpr float kSaturationMargin = 0.99f;
constexpr float kSaturationT = 0.5f * kTransmittanceMin;
// Conics with a c > kSaturationRoundness det (an axis ratio above about 20) contribute nothing.
constexpr float kSaturationRoundness = 100.0f;

// A lower bound of exp(-s) for s >= 0: (p(s / 4))^4, p(x) = 1 - x + x^2 / 2 - x^3 / 6 (the alternating
// series cut after a negative term, so p(x) <= exp(-x), and p >= 0 up to x = 1.5). Zero past s = 6,
// where o exp(-s) < 1/255 for any opacity.
template <typename T>
GSW_HD T exp_lower(T s) {
  const T x = T(0.25) * s;
  const T p = T(1) - x * (T(1) - x * (T(0.5) - x * (T(1) / T(6))));
  const T p2 = p * p;
  return x <= T(1.5) ? p2 * p2 : T(0);
}

// The pixel-centre offsets, from a tile's corner, of its two quarters' edges along one axis: quarter 0
// spans pixels [0, h), quarter 1 [tile_size - h, tile_size), h = ceil(tile_size / 2) (one shared pixel
// for an odd size).
template <typename T>
GSW_HD void quarter_edges(int64_t tile_size, T e[4]) {
  const int64_t h = (tile_size + 1) / 2;
  e[0] = T(0.5);
  e[1] = T(h) - T(0.5);
  e[2] = T(tile_size - h) + T(0.5);
  e[3] = T(tile_size) - T(0.5);
}

// One Gaussian's record for the bound: mean (mx, my), a / 2, b, c / 2 and opacity, the opacity zeroed
// where it cannot count (see the top).
template <typename T>
GSW_HD void saturation_record(T mx, T my, T ca, T cb, T cc, T opacity, T out[6]) {
  const T det = ca * cc - cb * cb;
  const bool ok = ca > T(0) && cc > T(0) && det > T(0) && ca * cc <= T(kSaturationRoundness) * det &&
                  mx == mx && my == my && opacity * T(kAlphaMax) * T(255) >= T(1) && opacity <= T(1);
  out[0] = ok ? mx : T(0);
  out[1] = ok ? my : T(0);
  out[2] = ok ? T(0.5) * ca : T(0);
  out[3] = ok ? cb : T(0);
  out[4] = ok ? T(0.5) * cc : T(0);
  out[5] = ok ? opacity : T(0);
}

// Multiplies each quarter's transmittance bound tb[4] (quarters in row-major order: (x0, y0), (x1, y0),
// (x0, y1), (x1, y1)) by 1 - a for the Gaussian g (saturation_record) over the tile whose pixel corner is
// (px, py); edges from quarter_edges. Returns whether all four bounds are now below kSaturationT.
template <typename T>
GSW_HD bool saturate_quarters(const T g[6], T px, T py, const T edges[4], T tb[4]) {
  T s[4][4];  // sigma at the quarters' corner pixels, [y edge][x edge]
  for (int iy = 0; iy < 4; ++iy)
    for (int ix = 0; ix < 4; ++ix) {
      const T dx = g[0] - (px + edges[ix]), dy = g[1] - (py + edges[iy]);
      s[iy][ix] = g[2] * dx * dx + g[3] * dx * dy + g[4] * dy * dy;
    }
  bool all = true;
  for (int q = 0; q < 4; ++q) {
    const int x = 2 * (q & 1), y = 2 * (q >> 1);
    T m = s[y][x] > s[y][x + 1] ? s[y][x] : s[y][x + 1];
    m = m > s[y + 1][x] ? m : s[y + 1][x];
    m = m > s[y + 1][x + 1] ? m : s[y + 1][x + 1];
    T a = g[5] * exp_lower(m);
    a = T(kSaturationMargin) * (a < T(kAlphaMax) ? a : T(kAlphaMax));
    tb[q] *= a >= T(kAlphaMin) ? T(1) - a : T(1);
    all = all && tb[q] < T(kSaturationT);
  }
  return all;
}

}  // namespace splat
}  // namespace gsw
