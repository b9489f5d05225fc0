// Tile and chunk geometry of the CPU rasterizer (csrc/cpu/splat_rasterize_*.cpp): the pixel lanes of a
// tile's chunks, and the per-Gaussian alpha supports that decide which chunks a Gaussian can reach.
#pragma once

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gsw/blend.h"
#include "gsw/parallel.h"
#include "huge_pages.h"
#include "splat_simd.h"

namespace gsw {
namespace splat {
namespace cpu {

// Per-Gaussian support of alpha >= 1/255 (gsw/blend.h), computed in double: the row half-extent,
// and for the row-interval test (xtest = 1 where it is safe for the conic) the terms of the support on
// the row at offset dy: x within mx + slope dy +- sqrt(disc) / a, where disc = two_a_smax - det dy^2
// (alpha_row_interval with the per-Gaussian parts hoisted).
struct Support {
  double yext;
  float slope, two_a_smax, det, a2, xtest;  // float: see TileChunks::mark
};

// The support of a Gaussian of conic (ca, cb, cc) and opacity op.
inline Support support_of(double ca, double cb, double cc, double op) {
  const double smax = alpha_sigma_max<double>(op);
  const bool xt = smax >= 0.0 && alpha_row_interval_exact<double>(ca, cb, cc);
  Support r;
  r.yext = alpha_row_extent<double>(ca, cb, cc, smax);
  r.xtest = xt ? 1.0f : 0.0f;
  r.slope = xt ? float(cb / ca) : 0.0f;
  r.two_a_smax = xt ? float(2.0 * ca * smax) : 0.0f;
  r.det = xt ? float(ca * cc - cb * cb) : 0.0f;
  r.a2 = xt ? float(ca * ca) : 0.0f;
  return r;
}

// Gaussians per thread below which gaussian_records wakes no further thread.
constexpr int64_t kMinRecordsPerThread = 8192;

// What the rasterizer reads of a Gaussian at each tile of its list, in one record (one cache line
// for float): its support, 2D mean and blend terms (splat_simd.h). The tile lists visit Gaussians in
// depth order, scattered over arrays that do not fit in cache at 10^5 Gaussians and more; a record is
// one line to fetch, where its values apart are four, and its per-Gaussian set-up (the support's
// terms, the blend terms' logarithm) is done once per call, not at every tile, for the forward and the
// backward alike.
template <typename T>
struct alignas(64) GaussianRecord {
  Support su;
  T mx, my;
  BlendTerms<T> bt;
};

// The records of Gaussians [0, CN), valid until the calling thread's next call. They are written into
// a buffer that thread keeps from call to call (it grows, never shrinks: 64 bytes a Gaussian for float),
// on huge pages where the kernel grants them (KeptBuffer): a fresh one, at 10^5 Gaussians and more, costs
// page faults on every call.
template <typename T>
const GaussianRecord<T>* gaussian_records(const T* means2d, const T* conics, const T* opac, int64_t CN) {
  thread_local gsw::cpu::KeptBuffer kept;
  auto* rec = static_cast<GaussianRecord<T>*>(kept.at_least(static_cast<size_t>(CN) * sizeof(GaussianRecord<T>)));
#pragma omp parallel num_threads(threads_for(CN, kMinRecordsPerThread))
  {
    const Range share = thread_range(CN);
    for (int64_t i = share.begin; i < share.end; ++i) {
      const T* co = conics + 3 * i;
      GaussianRecord<T>& r = rec[i];
      r.su = support_of(co[0], co[1], co[2], opac[i]);
      r.mx = means2d[2 * i];
      r.my = means2d[2 * i + 1];
      r.bt = BlendTerms<T>::of(co[0], co[1], co[2], opac[i]);
    }
  }
  return rec;
}

// Intersections ahead at which the rasterizer prefetches a Gaussian's record (the forward, which reads
// nearly every Gaussian of a list, its colour too; the backward skips many Gaussians after the record).
constexpr int64_t kPrefetchAhead = 8;

// Compositing work per thread below which the rasterizer (forward and backward) wakes no further
// thread, in pixel-Gaussian pairs.
constexpr int64_t kMinBlendPerThread = int64_t(1) << 16;

// Threads for rasterizing `tiles` tiles of `tile_pixels` pixels each (`pixels` in all) with `isects`
// tile-Gaussian intersections: at most one per tile, and one for tiny images, where waking a thread
// costs more than the work. The work is bounded by isects * tile_pixels (every intersection blended at
// every pixel of its tile; the chunk culling skips most of it) plus the pixels themselves.
inline int raster_threads(int64_t tiles, int64_t isects, int64_t tile_pixels, int64_t pixels) {
  return std::min(threads_for(tiles, 1), threads_for(isects * tile_pixels + pixels, kMinBlendPerThread));
}

// The pixel lanes of one tile's chunks: lane j of chunk q is pixel p = q kLanes + j of the tile (row
// major), at offset (p % ts, p / ts) from the tile corner; lanes with p >= ts^2 are padding.
struct ChunkLayout {
  int64_t nchunks;
  std::vector<int32_t> ox, oy, pad;  // [nchunks * kLanes]; pad: 1 for padding lanes
  ChunkLayout(int64_t ts) : nchunks((ts * ts + kLanes - 1) / kLanes) {
    ox.resize(nchunks * kLanes);
    oy.resize(nchunks * kLanes);
    pad.resize(nchunks * kLanes);
    for (int64_t p = 0; p < nchunks * kLanes; ++p) {
      pad[p] = p >= ts * ts;
      ox[p] = static_cast<int32_t>(pad[p] ? 0 : p % ts);
      oy[p] = static_cast<int32_t>(pad[p] ? 0 : p / ts);
    }
  }
};

// Pixel coordinates of the lanes of one chunk; in = 1 within the image (not padding). int32 lanes
// throughout, so the loops that fill and read them vectorize.
struct alignas(64) ChunkGeom {
  int32_t x[kLanes], y[kLanes], in[kLanes];
  bool any_inside;
  bool full_row;  // every lane inside, lanes j = pixels (x[0] + j, y[0]): one contiguous run of a row
};

// The chunks of one tile: lane geometry, and per chunk the box of its inside pixel centres (float,
// structure of arrays) against which a Gaussian's support is tested, all chunks of a row at once.
class TileChunks {
 public:
  TileChunks(const ChunkLayout& lay, int64_t ts)
      : lay_(lay), n_(lay.nchunks), ts_(ts), geo_(n_), ylo_(padded()), yhi_(padded()), xmid_(padded()),
        xhw_(padded()), row_(padded()), in_(padded()), flag_(padded()) {
    // the tile at the origin, all inside: every tile inside the image is it shifted (build)
    fill(0, 0, ts, ts);
    geo0_ = geo_;
    ylo0_ = ylo_, yhi0_ = yhi_, xmid0_ = xmid_;
  }

  // The chunks of tile (tx, ty) of a W x H image: a tile inside the image is the tile at the origin
  // shifted (the same values: pixel centres are exact in float), an edge tile is computed afresh.
  void build(int64_t tx, int64_t ty, int64_t W, int64_t H) {
    // after an edge tile (or none yet) the lanes' inside flags and boxes are not the template's: fill
    if ((tx + 1) * ts_ > W || (ty + 1) * ts_ > H || !inside_) {
      fill(tx, ty, W, H);
      inside_ = (tx + 1) * ts_ <= W && (ty + 1) * ts_ <= H;
      return;
    }
    const int32_t x0t = static_cast<int32_t>(tx * ts_), y0t = static_cast<int32_t>(ty * ts_);
    const float fx = float(x0t), fy = float(y0t);
    y0_ = y0t;
    rows_ = ts_;
    cx0_ = fx + 0.5f;
    cx1_ = float(x0t + ts_) - 0.5f;
    cy0_ = fy + 0.5f;
    cy1_ = float(y0t + ts_) - 0.5f;
    for (int64_t q = 0; q < n_; ++q) {
      const ChunkGeom& g0 = geo0_[q];
      ChunkGeom& g = geo_[q];
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) {
        g.x[j] = g0.x[j] + x0t;
        g.y[j] = g0.y[j] + y0t;
      }
    }
#pragma omp simd
    for (int64_t q = 0; q < n_; ++q) {
      ylo_[q] = ylo0_[q] + fy;
      yhi_[q] = yhi0_[q] + fy;
      xmid_[q] = xmid0_[q] + fx;
    }
  }

  const ChunkGeom& geo(int64_t q) const { return geo_[q]; }
  // The tile is 16 x 16 pixels, all in the image, in chunks of 8 (chunks 2 r and 2 r + 1: row r).
  bool rows16() const { return ts_ == 16 && kLanes == 8 && inside_ && rows_ == 16; }
  // The pixel centres of the tile's first and last columns, and of its row r.
  float first_x() const { return cx0_; }
  float last_x() const { return cx1_; }
  float row_y(int64_t r) const { return cy0_ + float(r); }
  int64_t chunks() const { return n_; }
  bool flagged(int64_t q) const { return flag_[q] != 0.0f; }

  // The chunks [qlo, qhi] holding the rows within the row extent of a Gaussian of support su (centre
  // y my); false when there are none.
  inline __attribute__((always_inline)) bool chunk_rows(double my, const Support& su, int64_t& qlo,
                                                        int64_t& qhi) const {
    const double yext = su.yext;
    const double lo = my - yext - 0.5 - double(y0_), hi = my + yext - 0.5 - double(y0_);  // rows lo <= r <= hi
    if (!(hi >= 0.0) || !(lo <= double(rows_ - 1))) return false;
    const int64_t rlo = lo <= 0.0 ? 0 : static_cast<int64_t>(std::ceil(lo));
    const int64_t rhi = hi >= double(rows_ - 1) ? rows_ - 1 : static_cast<int64_t>(std::floor(hi));
    if (rlo > rhi) return false;
    qlo = rlo * ts_ / kLanes;
    qhi = std::min(n_ - 1, ((rhi + 1) * ts_ - 1) / kLanes);
    return true;
  }

  // Marks the chunks in [qlo, qhi] (from chunk_rows) that a Gaussian of support su (centre mx, my) can
  // reach: flagged(q). The test runs in float, on whole blocks of kLanes chunks: its rounding (relative
  // 1e-7 of terms bounded by the conditioning limit of alpha_row_interval_exact) is far inside the
  // support's relaxation.
  inline __attribute__((always_inline)) void mark_range(double mx, double my, const Support& su, int64_t qlo,
                                                        int64_t qhi) {
    const float xt = su.xtest, slope = su.slope, tas = su.two_a_smax, det = su.det, a2 = su.a2;
    const float fx = float(mx), fy = float(my);
    const float fext = su.yext < 3e38 ? float(su.yext) : 3e38f;
    for (int64_t q0 = qlo - qlo % kLanes; q0 <= qhi; q0 += kLanes) {
      const float *ylo = ylo_.data() + q0, *yhi = yhi_.data() + q0, *xmid = xmid_.data() + q0;
      const float *xhw = xhw_.data() + q0, *row = row_.data() + q0, *in = in_.data() + q0;
      float* flag = flag_.data() + q0;
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) {
        const float rd = fy < ylo[j] ? ylo[j] - fy : (fy > yhi[j] ? fy - yhi[j] : 0.0f);
        // one-row chunk: the support's x-interval on the row, centre mx + slope dy, half-width
        // sqrt(disc) / a, meets [xmid - xhw, xmid + xhw] (squared comparison: no sqrt, no division)
        const float dy = fy - ylo[j];
        const float disc = tas - det * dy * dy;
        const float dc = std::abs(fx + slope * dy - xmid[j]) - xhw[j];
        const float inx = (disc >= 0.0f ? 1.0f : 0.0f) * (dc <= 0.0f || dc * dc * a2 <= disc ? 1.0f : 0.0f);
        const float use_x = row[j] * xt;
        flag[j] = in[j] * (rd <= fext ? 1.0f : 0.0f) * (use_x * inx + (1.0f - use_x));
      }
    }
  }

  // The chunks in [qlo, qhi] that mark_range flagged, as bits (bit q: chunk q), for tiles of at most 64
  // chunks.
  uint64_t marked_bits(int64_t qlo, int64_t qhi) const {
    uint64_t bits = 0;
    for (int64_t q0 = qlo - qlo % kLanes; q0 <= qhi; q0 += kLanes) {
      const float* flag = flag_.data() + q0;
#if defined(__AVX2__)
      static_assert(kLanes % 8 == 0, "marked_bits reads the flags 8 at a time");
      const __m256 zero = _mm256_setzero_ps();
      for (int j = 0; j < kLanes; j += 8) {
        const uint32_t m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(flag + j), zero, _CMP_NEQ_OQ));
        bits |= static_cast<uint64_t>(m) << (q0 + j);
      }
#else
      for (int j = 0; j < kLanes; ++j) bits |= static_cast<uint64_t>(flag[j] != 0.0f) << (q0 + j);
#endif
    }
    return bits & ((~uint64_t(0) >> (63 - (qhi - qlo))) << qlo);
  }

  // The chunks in [qlo, qhi] (from chunk_rows) that a Gaussian of support su (centre mx, my) can reach,
  // as bits (bit q: chunk q), for tiles of at most 64 chunks: mark_range's test, then marked_bits. On
  // AVX-512 the test runs 16 chunks a vector with its outcomes in mask registers, where mark_range
  // stores a float flag per chunk for marked_bits to load back. The two may round differently (FMA
  // contraction); either is far inside the support's relaxation (mark_range).
  inline __attribute__((always_inline)) uint64_t support_bits(double mx, double my, const Support& su, int64_t qlo,
                                                            int64_t qhi) {
#if defined(__AVX512F__)
    const uint64_t range = (~uint64_t(0) >> (63 - (qhi - qlo))) << qlo;
    const __m512 fx = _mm512_set1_ps(float(mx)), fy = _mm512_set1_ps(float(my));
    const __m512 fext = _mm512_set1_ps(su.yext < 3e38 ? float(su.yext) : 3e38f);
    const __m512 slope = _mm512_set1_ps(su.slope), tas = _mm512_set1_ps(su.two_a_smax);
    const __m512 det = _mm512_set1_ps(su.det), a2 = _mm512_set1_ps(su.a2), zero = _mm512_setzero_ps();
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    // chunks whose one-row x-interval test applies (mark_range's use_x)
    const uint64_t use_x = su.xtest != 0.0f ? row_bits_ : 0;
    uint64_t bits = 0;
    for (int64_t q0 = qlo & ~int64_t(15); q0 <= qhi; q0 += 16) {
      const __m512 ylo = _mm512_loadu_ps(ylo_.data() + q0), yhi = _mm512_loadu_ps(yhi_.data() + q0);
      // the row distance: 0 inside [ylo, yhi] (and for a NaN centre, as in mark_range)
      const __m512 rd = _mm512_maskz_max_ps(
          0xFFFF, _mm512_maskz_max_ps(0xFFFF, _mm512_sub_ps(ylo, fy), _mm512_sub_ps(fy, yhi)), zero);
      __mmask16 m = _mm512_cmp_ps_mask(rd, fext, _CMP_LE_OQ);
      const __mmask16 ux = static_cast<__mmask16>(use_x >> q0);
      if (ux) {
        const __m512 dy = _mm512_sub_ps(fy, ylo);
        const __m512 disc = _mm512_fnmadd_ps(_mm512_mul_ps(det, dy), dy, tas);
        const __m512 dc = _mm512_sub_ps(
            _mm512_and_ps(_mm512_sub_ps(_mm512_fmadd_ps(slope, dy, fx), _mm512_loadu_ps(xmid_.data() + q0)), absmask),
            _mm512_loadu_ps(xhw_.data() + q0));
        const __mmask16 near = static_cast<__mmask16>(_mm512_cmp_ps_mask(dc, zero, _CMP_LE_OQ) |
                                                      _mm512_cmp_ps_mask(_mm512_mul_ps(_mm512_mul_ps(dc, dc), a2), disc,
                                                                         _CMP_LE_OQ));
        const __mmask16 inx = _mm512_mask_cmp_ps_mask(near, disc, zero, _CMP_GE_OQ);
        m = static_cast<__mmask16>(m & (~ux | inx));
      }
      bits |= static_cast<uint64_t>(m) << q0;
    }
    return bits & in_bits_ & range;
#else
    mark_range(mx, my, su, qlo, qhi);
    return marked_bits(qlo, qhi);
#endif
  }

  // Whether the support of a Gaussian (centre mx, my) holds every pixel centre of the tile, so that it
  // reaches every chunk with no row or chunk test: it holds the four corners (the support is convex).
  // Flagging a chunk needlessly costs time, never results (its lanes' alphas are under the cut), so the
  // float rounding here is harmless. Gaussians without the row-interval test (xtest 0) answer false.
  bool covers_tile(double mx, double my, const Support& su) const {
    // first whether its rows reach across the tile's: one compare, which sends small Gaussians (most of a
    // trained scene's) on at once
    if (!(2.0 * su.yext >= double(cy1_ - cy0_))) return false;
    const float fx = float(mx), fy = float(my);
#if defined(__SSE2__)
    // the four corners in the lanes of one vector; dy = mean - pixel, as in mark_range
    const __m128 dy = _mm_sub_ps(_mm_set1_ps(fy), _mm_setr_ps(cy0_, cy0_, cy1_, cy1_));
    const __m128 disc = _mm_sub_ps(_mm_set1_ps(su.two_a_smax), _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(su.det), dy), dy));
    const __m128 dc = _mm_sub_ps(_mm_setr_ps(cx0_, cx1_, cx0_, cx1_),
                                 _mm_add_ps(_mm_set1_ps(fx), _mm_mul_ps(_mm_set1_ps(su.slope), dy)));
    const __m128 in = _mm_and_ps(_mm_cmpge_ps(disc, _mm_setzero_ps()),
                                 _mm_cmple_ps(_mm_mul_ps(_mm_mul_ps(dc, dc), _mm_set1_ps(su.a2)), disc));
    return su.xtest != 0.0f && _mm_movemask_ps(in) == 0xF;
#else
    bool in = su.xtest != 0.0f;
    for (int k = 0; k < 4; ++k) {
      const float dy = fy - ((k & 2) ? cy1_ : cy0_);
      const float disc = su.two_a_smax - su.det * dy * dy;
      const float dc = ((k & 1) ? cx1_ : cx0_) - (fx + su.slope * dy);
      in &= (disc >= 0.0f) & (dc * dc * su.a2 <= disc);
    }
    return in;
#endif
  }

  // chunk_rows, then mark_range.
  bool mark(double mx, double my, const Support& su, int64_t& qlo, int64_t& qhi) {
    if (!chunk_rows(my, su, qlo, qhi)) return false;
    mark_range(mx, my, su, qlo, qhi);
    return true;
  }

 private:
  // build for any tile, edge tiles included.
  void fill(int64_t tx, int64_t ty, int64_t W, int64_t H) {
    in_bits_ = row_bits_ = 0;
    y0_ = ty * ts_;
    rows_ = std::min(ts_, H - y0_);
    cx0_ = float(tx * ts_) + 0.5f;
    cx1_ = float(std::min((tx + 1) * ts_, W)) - 0.5f;
    cy0_ = float(y0_) + 0.5f;
    cy1_ = float(y0_ + rows_) - 0.5f;
    const int32_t x0t = static_cast<int32_t>(tx * ts_), y0t = static_cast<int32_t>(y0_);
    const int32_t w = static_cast<int32_t>(W), h = static_cast<int32_t>(H);
    for (int64_t q = 0; q < n_; ++q) {
      ChunkGeom& cg = geo_[q];
      const int32_t *ox = lay_.ox.data() + q * kLanes, *oy = lay_.oy.data() + q * kLanes;
      const int32_t* pad = lay_.pad.data() + q * kLanes;
      int32_t any = 0, x0 = INT32_MAX, x1 = INT32_MIN, y0 = INT32_MAX, y1 = INT32_MIN;
#pragma omp simd reduction(| : any) reduction(min : x0, y0) reduction(max : x1, y1)
      for (int j = 0; j < kLanes; ++j) {
        const int32_t x = x0t + ox[j], y = y0t + oy[j];
        const int32_t in = (1 - pad[j]) & (x < w ? 1 : 0) & (y < h ? 1 : 0);
        cg.x[j] = x;
        cg.y[j] = y;
        cg.in[j] = in;
        any |= in;
        x0 = std::min(x0, in ? x : INT32_MAX);
        x1 = std::max(x1, in ? x : INT32_MIN);
        y0 = std::min(y0, in ? y : INT32_MAX);
        y1 = std::max(y1, in ? y : INT32_MIN);
      }
      cg.any_inside = any != 0;
      int32_t all = 1;
      for (int j = 0; j < kLanes; ++j) all &= cg.in[j] & (cg.y[j] == cg.y[0] ? 1 : 0) & (cg.x[j] == cg.x[0] + j ? 1 : 0);
      cg.full_row = all != 0;
      in_[q] = any ? 1.0f : 0.0f;
      xmid_[q] = any ? 0.5f * (float(x0) + float(x1)) + 0.5f : 0.0f;  // pixel centres x0 + 0.5 .. x1 + 0.5
      xhw_[q] = any ? 0.5f * (float(x1) - float(x0)) : 0.0f;
      ylo_[q] = any ? float(y0) + 0.5f : 0.0f;
      yhi_[q] = any ? float(y1) + 0.5f : 0.0f;
      row_[q] = y0 == y1 ? 1.0f : 0.0f;
      if (q < 64) {
        in_bits_ |= static_cast<uint64_t>(any != 0) << q;
        row_bits_ |= static_cast<uint64_t>(y0 == y1) << q;
      }
    }
  }


  // whole blocks of kLanes chunks (mark_range) and of 16 (support_bits)
  size_t padded() const { return static_cast<size_t>((n_ + 15) / 16 * 16); }
  const ChunkLayout& lay_;
  int64_t n_, ts_, y0_ = 0, rows_ = 0;
  uint64_t in_bits_ = 0, row_bits_ = 0;  // chunks q < 64 with a pixel inside the image; of one row
  bool inside_ = false;  // the last tile built lay inside the image
  std::vector<ChunkGeom> geo0_;  // the tile at the origin (constructor)
  std::vector<float> ylo0_, yhi0_, xmid0_;
  float cx0_ = 0, cx1_ = 0, cy0_ = 0, cy1_ = 0;  // the tile's first and last pixel centres inside the image
  std::vector<ChunkGeom> geo_;
  std::vector<float> ylo_, yhi_, xmid_, xhw_, row_, in_, flag_;  // padded (padded())
};

// Rows of a band below which the rasterizer takes alphas chunk by chunk rather than row by row: the row
// form computes every lane of the band's rows, the chunk form only the chunks the support reaches, few
// on the small supports of a trained scene; from eight rows up most of a row is reached.
constexpr int64_t kMinRecurrenceRows = 8;

// Whether the rasterizer takes a Gaussian's alphas over the rows of chunks [qlo, qhi] (chunk_rows) of
// the current tile row by row (Alpha16::rows) rather than chunk by chunk: on a 16 x 16 tile inside the
// image (rows16), a band of at least kMinRecurrenceRows rows, a well-conditioned conic (the support's
// xtest), and the exponent t >= -60 at the band's four corner pixel centres, hence (t is concave)
// everywhere in it: the row values and their row-to-row ratios then lie within 2^-120..2^120, far from
// float's underflow and overflow. The forward and the backward ask it of the same record and tile, so
// they take every alpha the same way, bit for bit.
inline bool rows_apply(const GaussianRecord<float>& r, const TileChunks& tc, int64_t qlo, int64_t qhi) {
#if defined(GSW_RASTER_AVX2) && defined(__AVX512F__)
  if (!tc.rows16() || r.su.xtest == 0.0f || qhi / 2 - qlo / 2 + 1 < kMinRecurrenceRows) return false;
  const float y0 = tc.row_y(qlo / 2), y1 = tc.row_y(qhi / 2);
  const __m128 dx = _mm_sub_ps(_mm_set1_ps(r.mx), _mm_setr_ps(tc.first_x(), tc.last_x(), tc.first_x(), tc.last_x()));
  const __m128 dy = _mm_sub_ps(_mm_set1_ps(r.my), _mm_setr_ps(y0, y0, y1, y1));
  // explicit FMAs, as in Alpha8: no contraction left to the compiler, so every caller rounds alike
  const __m128 lin = _mm_fmadd_ps(_mm_set1_ps(r.bt.A), dx, _mm_mul_ps(_mm_set1_ps(r.bt.B), dy));
  const __m128 t = _mm_fmadd_ps(dx, lin, _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(r.bt.C), dy), dy, _mm_set1_ps(r.bt.L)));
  return _mm_movemask_ps(_mm_cmpge_ps(t, _mm_set1_ps(-60.0f))) == 0xF;  // false for a NaN corner
#else
  (void)r, (void)tc, (void)qlo, (void)qhi;
  return false;
#endif
}
template <typename T>
inline bool rows_apply(const GaussianRecord<T>&, const TileChunks&, int64_t, int64_t) {
  return false;
}

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
