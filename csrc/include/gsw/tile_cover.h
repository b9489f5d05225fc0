// The tiles a projected Gaussian can contribute to, shared by the CPU and CUDA tile intersection and
// mirrored by the torch reference (gsworkbench/splat/_torch_impl.py, tile_row_spans).
//
// The 3-sigma box of the projection's radius holds every tile the Gaussian's footprint touches, but a
// tile in the box's corners, or any tile of a faint Gaussian, may hold no pixel centre where
// alpha >= 1/255: the rasterizer would skip the Gaussian at each of that tile's pixels. The cover keeps,
// per tile row, only the tiles whose pixel centres the support (blend.h: sigma <= alpha_sigma_max of
// the opacity) can reach. Per row of tiles, the support cut to the row band's pixel-centre rows is convex,
// so its x extent decides which tiles of the row it meets. That extent is computed in double for the
// relaxed threshold of blend.h, over the continuous band (a superset of its pixel centres), so a culled
// tile never held a contributing pixel: renders and gradients are those of the box's list.
#pragma once

#include <cmath>
#include <cstdint>

#include "gsw/blend.h"
#include "gsw/common.h"

namespace gsw {
namespace splat {

using std::ceil;
using std::floor;
using std::isfinite;
using std::sqrt;

// How a Gaussian's tiles are chosen. kCoverBox: the box only (no usable conic: non-finite or not
// positive definite). kCoverRows: rows of tiles the support's rows reach, every box column in them
// (very elongated conics, where the row interval loses precision: blend.h, alpha_row_interval_exact).
// kCoverSpans: per row, the columns its support reaches. kCoverNone: no tile (alpha < 1/255 everywhere).
enum TileCoverMode : int32_t { kCoverNone = 0, kCoverBox = 1, kCoverRows = 2, kCoverSpans = 3 };

// One Gaussian's support, ready for per-row spans: mean (pixels), conic entry b, 1 / a, the conic's
// determinant, 2 a smax (smax: the relaxed sigma threshold), the support's half-height (pixels) and
// the dy of its x extremes (b xext / c, xext its half-width).
struct TileCover {
  double mx, my, b, inv_a, det, two_a_smax, yext, turn;
  int32_t mode;
};

template <typename T>
GSW_HD TileCover tile_cover(T mean_x, T mean_y, T conic_a, T conic_b, T conic_c, T opacity) {
  TileCover g{};
  g.mx = double(mean_x);
  g.my = double(mean_y);
  const double a = double(conic_a), b = double(conic_b), c = double(conic_c);
  const double smax = alpha_sigma_max<double>(double(opacity)), det = a * c - b * b;
  if (!(smax >= 0.0)) {  // faint everywhere (or a NaN opacity): the rasterizer skips every pixel
    g.mode = kCoverNone;
  } else if (!(a > 0.0) || !(c > 0.0) || !(det > 0.0) || !isfinite(det) || !isfinite(g.mx) || !isfinite(g.my)) {
    g.mode = kCoverBox;
  } else {
    g.b = b;
    g.inv_a = 1.0 / a;
    g.det = det;
    g.two_a_smax = 2.0 * a * smax;
    g.yext = sqrt(2.0 * smax * a / det);
    g.turn = b * sqrt(2.0 * smax * c / det) / c;
    g.mode = alpha_row_interval_exact<double>(a, b, c) ? kCoverSpans : kCoverRows;
  }
  return g;
}

// The columns [x0, x1) of tile row ty whose pixel centres the support reaches (unclamped: the caller
// cuts them to the box). Pixel centres of row ty lie at y in [ty ts + 0.5, ty ts + ts - 0.5]; with
// dy = mean_y - y, the support's row at dy spans x = mean_x + (b dy +- sqrt(2 a smax - det dy^2)) / a.
// Its right end is concave in dy, largest at dy = turn; its left end is convex, smallest at
// dy = -turn; over the band each is taken at that dy clamped into the band.
GSW_HD void tile_row_span(const TileCover& g, int64_t ty, int64_t tile_size, int64_t& x0, int64_t& x1) {
  constexpr int64_t kWide = int64_t(1) << 40;  // wider than any grid: the box decides
  x0 = 0;
  x1 = 0;
  if (g.mode == kCoverNone) return;
  if (g.mode == kCoverBox) {
    x0 = -kWide;
    x1 = kWide;
    return;
  }
  const double ts = double(tile_size), top = double(ty) * ts + 0.5;
  double lo = g.my - (top + ts - 1.0), hi = g.my - top;  // dy over the band's pixel-centre rows
  lo = lo > -g.yext ? lo : -g.yext;
  hi = hi < g.yext ? hi : g.yext;
  if (!(lo <= hi)) return;  // the band misses the support's rows
  if (g.mode == kCoverRows) {
    x0 = -kWide;
    x1 = kWide;
    return;
  }
  const double dr = g.turn < lo ? lo : (g.turn > hi ? hi : g.turn);
  const double dl = -g.turn < lo ? lo : (-g.turn > hi ? hi : -g.turn);
  const double disc_r = g.two_a_smax - g.det * dr * dr, disc_l = g.two_a_smax - g.det * dl * dl;
  const double xr = g.mx + (g.b * dr + sqrt(disc_r > 0.0 ? disc_r : 0.0)) * g.inv_a;
  const double xl = g.mx + (g.b * dl - sqrt(disc_l > 0.0 ? disc_l : 0.0)) * g.inv_a;
  // tile tx holds centres x in [tx ts + 0.5, tx ts + ts - 0.5]: it meets [xl, xr] when
  // (xl + 0.5) / ts - 1 <= tx <= (xr - 0.5) / ts
  // x / ts is x * (1 / ts) where that is exact (a power-of-two tile size): a multiply, not a divide
  const bool pow2 = (tile_size & (tile_size - 1)) == 0;
  const double inv_ts = 1.0 / ts;
  const double f0 = ceil((pow2 ? (xl + 0.5) * inv_ts : (xl + 0.5) / ts) - 1.0);
  const double f1 = floor(pow2 ? (xr - 0.5) * inv_ts : (xr - 0.5) / ts) + 1.0;
  const double w = double(kWide);
  x0 = static_cast<int64_t>(f0 < -w ? -w : (f0 > w ? w : f0));
  x1 = static_cast<int64_t>(f1 < -w ? -w : (f1 > w ? w : f1));
}

}  // namespace splat
}  // namespace gsw
