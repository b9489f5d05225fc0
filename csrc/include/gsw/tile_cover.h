// The tiles a projected Gaussian can contribute to, shared by the CPU and CUDA tile intersection and
// mirrored by the torch reference (gsworkbench/splat/_torch_impl.py, support_tile_bounds).
//
// The 3-sigma box of the projection's radius holds every tile the Gaussian's footprint touches, but
// the tiles at its sides hold no pixel where a faint or elongated Gaussian reaches alpha 1/255: the
// rasterizer would skip the Gaussian at each of their pixels. The box is cut to the bounding box of the
// alpha support (blend.h: sigma <= a relaxed log(255 opacity)), widened for float rounding, so a cut
// tile never held a contributing pixel: renders and gradients are those of the 3-sigma box's lists.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "gsw/blend.h"
#include "gsw/common.h"

namespace gsw {
namespace splat {

using std::ceil;
using std::floor;
using std::isfinite;
using std::sqrt;

// An upper bound of ln(x) for x >= 1, without a call to log: x = 2^e m with m in [1, 2), and
// ln(m) = ln(1 + t) <= t - t^2 / 2 + t^3 / 3 (the alternating series cut after a positive term), at
// most 0.14 above ln(x). The bits are read, not computed, so the torch reference (torch.frexp)
// finds the same e and m.
GSW_HD double log_upper(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof(u));
  const int64_t e = static_cast<int64_t>((u >> 52) & 0x7ff) - 1023;
  u = (u & ((uint64_t(1) << 52) - 1)) | (uint64_t(1023) << 52);
  double m;
  memcpy(&m, &u, sizeof(m));
  const double t = m - 1.0;
  return double(e) * 0.6931471805599453 + t * (1.0 + t * (-0.5 + t * (1.0 / 3.0)));
}

// When on: the tiles [lo, hi) cut to those whose pixel centres (t ts + 0.5 .. t ts + ts - 0.5) meet
// [centre - ext, centre + ext]; x / ts is x inv_ts, a multiply, where pow2 (a power-of-two ts) makes
// that exact. Branch-free.
GSW_HD void cut_tile_range(bool on, double centre, double ext, bool pow2, double ts, double inv_ts, double& lo,
                           double& hi) {
  const double u0 = centre - ext + 0.5, u1 = centre + ext - 0.5;
  const double f0 = ceil((pow2 ? u0 * inv_ts : u0 / ts) - 1.0), f1 = floor(pow2 ? u1 * inv_ts : u1 / ts) + 1.0;
  const double l = lo, h = hi;
  const double nl = f0 > l ? (f0 < h ? f0 : h) : l;
  const double nh = f1 < h ? (f1 > nl ? f1 : nl) : h;
  lo = on ? nl : l;
  hi = on ? nh : h;
}

// A Gaussian's alpha support as the cuts below take it: the ellipse sigma <= smax of its conic, smax
// the relaxed threshold (blend.h) at log_upper(255 opacity). faint: alpha never reaches 1/255 (or a
// NaN opacity). usable: not faint, a positive-definite conic and a finite mean (otherwise sa, sc, sd
// and smax are safe placeholders). cut_x: usable and not very elongated (alpha_row_interval_exact),
// so the rasterizer culls it in x too. Branch-free: & and | on the flags, not && and ||, which GCC 12
// does not vectorize in the cuts' loops.
struct SupportEllipse {
  bool faint, usable, cut_x;
  double sa, sc, sd, smax;
};

GSW_HD SupportEllipse support_ellipse(double mx, double my, double a, double c, double det, double opacity) {
  const double x = opacity * 255.0;
  const bool faint = !(x >= 1.0);
  const bool usable = !faint & (a > 0.0) & (c > 0.0) & (det > 0.0) & isfinite(det) & isfinite(mx) & isfinite(my);
  const bool cut_x = usable & (a * c <= 1e4 * det);
  return {faint, usable, cut_x, usable ? a : 1.0, usable ? c : 1.0, usable ? det : 1.0,
          log_upper(usable ? x : 1.0) * 1.02 + 0.02};
}

// Cuts the tile box [box_x0, box_x1) x [box_y0, box_y1) of a Gaussian (mean in pixels, conic,
// opacity) to the tiles whose pixel centres its alpha support can reach; an empty box when alpha never
// reaches 1/255. The support's threshold is alpha_sigma_max's relaxation (blend.h) of log_upper, so it
// holds the rasterizer's support (support_ellipse). Its bounding box has half-extents sqrt(2 smax c /
// det) in x and sqrt(2 smax a / det) in y; tile t holds pixel centres [t ts + 0.5, t ts + ts - 0.5]. A
// conic that is not positive definite keeps the box; a very elongated one (blend.h,
// alpha_row_interval_exact) is cut in y only, as the rasterizer culls it by rows only. Branch-free
// (selects, with safe operands where a case keeps the box): the cases mix at random over a list of
// Gaussians, and branches on them mispredict.
template <typename T>
GSW_HD void cut_box_to_support(T mean_x, T mean_y, T conic_a, T conic_b, T conic_c, T opacity, int64_t tile_size,
                               int32_t& box_x0, int32_t& box_y0, int32_t& box_x1, int32_t& box_y1) {
  const double mx = double(mean_x), my = double(mean_y), a = double(conic_a), b = double(conic_b);
  const double c = double(conic_c);
  const SupportEllipse e = support_ellipse(mx, my, a, c, a * c - b * b, double(opacity));
  const bool faint = e.faint, usable = e.usable, cut_x = e.cut_x;
  const double sa = e.sa, sc = e.sc, sd = e.sd, smax = e.smax, ts = double(tile_size);
  const bool pow2 = (tile_size & (tile_size - 1)) == 0;
  const double inv_ts = 1.0 / ts;
  const double yext = sqrt(2.0 * smax * sa / sd), xext = sqrt(2.0 * smax * sc / sd);
  // tile indices as doubles (exact): every compare and select in one precision, which lets a compiler
  // run the whole cut in vector lanes
  double x0 = box_x0, y0 = box_y0, x1 = box_x1, y1 = box_y1;
  cut_tile_range(usable, usable ? my : 0.0, yext, pow2, ts, inv_ts, y0, y1);
  cut_tile_range(cut_x, cut_x ? mx : 0.0, xext, pow2, ts, inv_ts, x0, x1);
  const bool empty = faint | (x0 >= x1) | (y0 >= y1);
  box_x0 = static_cast<int32_t>(empty ? 0.0 : x0);
  box_y0 = static_cast<int32_t>(empty ? 0.0 : y0);
  box_x1 = static_cast<int32_t>(empty ? 0.0 : x1);
  box_y1 = static_cast<int32_t>(empty ? 0.0 : y1);
}

// The alpha support of one Gaussian for cut_row_to_support: cut_box_to_support's ellipse (its relaxed
// threshold smax), in the terms the cut takes row by row: mean (mx, my); with dy = y - my, the ellipse's
// edges at height dy are x = mx - slope dy -+ sqrt(q - det dy^2) inv_a (slope = b / a, q = 2 a smax,
// inv_a = 1 / a, det = a c - b^2); ylean = (b / c) xext, the offset of its leftmost point's row from the
// mean's (the rightmost's is -ylean). on: whether its rows are cut (cut_box_to_support cuts its box in
// x). Floats, so that a record is half a cache line: the cut widens each row's extent by kRowCutMargin
// pixels, and smax's relaxation widens it by about 1% of the extent, both far more than the floats'
// rounding at image coordinates.
struct RowSupport {
  float mx, my, slope, q, inv_a, det, ylean, on;
};

// Pixels by which cut_row_to_support widens a row's extent (RowSupport's float rounding).
constexpr double kRowCutMargin = 1e-2;

// The RowSupport of a Gaussian (mean, conic, opacity), field by field (a caller can run it in vector
// lanes and store the fields as it likes).
GSW_HD void row_support_terms(double mx, double my, double a, double b, double c, double opacity, float out[8]) {
  const SupportEllipse e = support_ellipse(mx, my, a, c, a * c - b * b, opacity);
  const bool on = e.cut_x;  // rows are cut where the box is cut in x
  const double sa = e.sa, sb = on ? b : 0.0, sc = e.sc, sd = e.sd, smax = e.smax;
  const double inv_a = 1.0 / sa;
  out[0] = float(on ? mx : 0.0);
  out[1] = float(on ? my : 0.0);
  out[2] = float(sb * inv_a);
  out[3] = float(2.0 * sa * smax);
  out[4] = float(inv_a);
  out[5] = float(sd);
  out[6] = float(sb * sqrt(2.0 * smax / (sc * sd)));  // (b / c) sqrt(2 smax c / det)
  out[7] = on ? 1.0f : 0.0f;
}

// Cuts the tiles [x0, x1) of row ty (tiles of tile_size pixels) of a Gaussian's box to those whose pixel
// centres its alpha support (RowSupport) reaches on that row's pixel centres y = ty ts + 0.5 ..
// ty ts + ts - 0.5: the support's x extent over those rows, widened by kRowCutMargin. The ellipse's left
// edge is convex in y and its right edge concave, so their extremes over the rows lie at the leftmost
// and rightmost points' rows, clamped to the tile row. It is cut_box_to_support's ellipse, so a tile
// cut held no pixel where alpha reaches 1/255. Leaves the range where rows are not cut (on 0), and may
// leave it empty.
GSW_HD void cut_row_to_support(const RowSupport& g, int64_t tile_size, double inv_ts, bool pow2, int64_t ty,
                               int32_t& x0, int32_t& x1) {
  if (g.on == 0.0f) return;
  const double ts = double(tile_size), y0 = double(ty) * ts + 0.5 - double(g.my), y1 = y0 + ts - 1.0;
  const double lean = g.ylean, det = g.det, q = g.q;
  const double dl = lean < y0 ? y0 : (lean > y1 ? y1 : lean), dr = -lean < y0 ? y0 : (-lean > y1 ? y1 : -lean);
  const double wl = q - det * dl * dl, wr = q - det * dr * dr;
  const double xl = double(g.mx) - double(g.slope) * dl - sqrt(wl > 0.0 ? wl : 0.0) * double(g.inv_a);
  const double xr = double(g.mx) - double(g.slope) * dr + sqrt(wr > 0.0 ? wr : 0.0) * double(g.inv_a);
  double lo = x0, hi = x1;
  cut_tile_range(true, 0.5 * (xl + xr), 0.5 * (xr - xl) + kRowCutMargin, pow2, ts, inv_ts, lo, hi);
  x0 = static_cast<int32_t>(lo);
  x1 = static_cast<int32_t>(hi);
}

}  // namespace splat
}  // namespace gsw
