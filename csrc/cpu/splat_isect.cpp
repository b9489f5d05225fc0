// CPU kernel of the 3DGS rasterizer, stage 3: tile intersection. Each visible Gaussian's 3-sigma
// box of tiles (cut, given conics and opacities, to the bounding box of its alpha support:
// gsw/tile_cover.h), and the (tile, depth)-sorted list of intersections the rasterizer walks: one
// radix sort of the visible Gaussians by depth, then a stable parallel counting sort by tile; with
// cut_saturated, each tile's list ends where every pixel of the tile has surely stopped
// (gsw/tile_saturation.h, splat_isect_saturated.h) and keeps the Gaussians whose support reaches the
// tile on its rows (gsw/tile_cover.h, cut_row_to_support). Bound to the op by splat_cpu.cpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gsw/parallel.h"
#include "gsw/tile_cover.h"
#include "splat.h"
#include "splat_isect_saturated.h"

namespace gsw {
namespace splat {
namespace cpu {
namespace {

// When cut_saturated cuts: lists of at least kSaturationMinPairsPerTile pairs a tile on average (about a
// tile's pixels), from footprints of at least kSaturationMinTilesPerGaussian tiles on average. The cut
// pays a bound per entry it keeps, and gains only where lists run far past their tiles' saturation,
// which the quarter bound sees only from footprints covering whole quarters. Measured
// (docs/performance.md, "Lists cut at saturation"): it gains on translucent splats of 27-45 tiles each
// and costs on surface splats of 4-8 tiles (some lists cut, most not) and on a random start's faint
// splats of 15 (none cut).
constexpr int64_t kSaturationMinPairsPerTile = 256;
constexpr int64_t kSaturationMinTilesPerGaussian = 20;

// Camera-Gaussian pairs per thread below which the intersection passes wake no further thread.
constexpr int64_t kMinIsectPerThread = 8192;

// Sorts (depth key << 32 | Gaussian id) keys by depth key, ties in their incoming (ascending id)
// order: an LSD radix sort (no data-dependent branches, which mispredict heavily in a comparison sort
// of depths). It sorts only the bits in which the depth keys differ (key - min < 2^bits), in as few
// digits of at most kMaxDigitBits as cover them: 2 passes for the depths of a typical view. Each pass
// is stable and parallel: nth contiguous parts of the keys, per-part bucket counts, then per-part
// write cursors (bucket start + the counts of the parts before), as in the tile scatter below.
constexpr int kMaxDigitBits = 12;
// Keys per thread below which the sort runs on one thread: below it, threads would pay more for
// waking each other at every digit pass than they save on the passes.
constexpr int64_t kMinSortPerThread = int64_t(1) << 18;
inline void sort_by_depth(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp, int nth,
                          std::vector<uint32_t>& count) {
  const int64_t n = static_cast<int64_t>(keys.size());
  if (n < 2) return;
  uint32_t lo = UINT32_MAX, hi = 0;
  for (const uint64_t k : keys) {
    lo = std::min(lo, static_cast<uint32_t>(k >> 32));
    hi = std::max(hi, static_cast<uint32_t>(k >> 32));
  }
  const int bits = hi == lo ? 0 : 32 - __builtin_clz(hi - lo);
  if (bits == 0) return;  // one depth: the incoming order stands
  const int passes = (bits + kMaxDigitBits - 1) / kMaxDigitBits, digit = (bits + passes - 1) / passes;
  const int64_t nb = int64_t(1) << digit;
  const uint32_t mask = static_cast<uint32_t>(nb - 1);
  tmp.resize(keys.size());
  count.resize(static_cast<size_t>(nth * nb));
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = pass * digit;
    const uint64_t* src = keys.data();
    uint64_t* dst = tmp.data();
    auto bucket = [&](uint64_t k) { return ((static_cast<uint32_t>(k >> 32) - lo) >> shift) & mask; };
    std::fill(count.begin(), count.end(), 0u);
#pragma omp parallel num_threads(nth)
    {
      for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
        uint32_t* c = count.data() + nb * p;
        for (int64_t k = n * p / nth; k < n * (p + 1) / nth; ++k) ++c[bucket(src[k])];
      }
    }
    uint32_t run = 0;
    for (int64_t b = 0; b < nb; ++b)
      for (int p = 0; p < nth; ++p) {
        const uint32_t c = count[nb * p + b];
        count[nb * p + b] = run;
        run += c;
      }
#pragma omp parallel num_threads(nth)
    {
      for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
        uint32_t* c = count.data() + nb * p;
        for (int64_t k = n * p / nth; k < n * (p + 1) / nth; ++k) dst[c[bucket(src[k])]++] = src[k];
      }
    }
    keys.swap(tmp);
  }
}

inline uint32_t depth_key(float d) {  // order-preserving for d >= 0 (visible depths are > near > 0)
  uint32_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}

// Each Gaussian's box of tiles [x0, x1) x [y0, y1) (its 3-sigma square, clamped to the grid) into
// box[4 i ..] and the tile count into cnt[i]; invisible Gaussians (radius 0, or a non-finite mean) get
// an empty box. x / tile_size is x * (1 / tile_size) where that is exact (a power-of-two tile size);
// branch-free, so the loop vectorizes.
template <typename T>
void tile_boxes(const T* m, const int32_t* r, int64_t n, int64_t tile_size, int64_t tile_width,
                int64_t tile_height, int32_t* box, int32_t* cnt) {
  const bool pow2 = (tile_size & (tile_size - 1)) == 0;
  const T ts = T(tile_size), inv = T(1) / ts, tw = T(tile_width), th = T(tile_height);
#pragma omp parallel num_threads(threads_for(n, kMinIsectPerThread))
  {
    const Range share = thread_range(n);
#pragma omp simd
    for (int64_t i = share.begin; i < share.end; ++i) {
      const T rad = T(r[i]), mx = m[2 * i], my = m[2 * i + 1];
      // a non-finite 2D mean (from non-finite inputs a caller chose not to scan) covers no tile
      const bool vis = r[i] > 0 && std::isfinite(mx) && std::isfinite(my);
      const T lx = mx - rad, ly = my - rad, hx = mx + rad, hy = my + rad;
      const T fx0 = std::floor(pow2 ? lx * inv : lx / ts), fy0 = std::floor(pow2 ? ly * inv : ly / ts);
      const T fx1 = std::ceil(pow2 ? hx * inv : hx / ts), fy1 = std::ceil(pow2 ? hy * inv : hy / ts);
      const T x0 = fx0 < T(0) ? T(0) : (fx0 > tw ? tw : fx0), y0 = fy0 < T(0) ? T(0) : (fy0 > th ? th : fy0);
      const T x1 = fx1 < T(0) ? T(0) : (fx1 > tw ? tw : fx1), y1 = fy1 < T(0) ? T(0) : (fy1 > th ? th : fy1);
      box[4 * i] = vis ? static_cast<int32_t>(x0) : 0;
      box[4 * i + 1] = vis ? static_cast<int32_t>(y0) : 0;
      box[4 * i + 2] = vis ? static_cast<int32_t>(x1) : 0;
      box[4 * i + 3] = vis ? static_cast<int32_t>(y1) : 0;
      cnt[i] = vis ? static_cast<int32_t>((x1 - x0) * (y1 - y0)) : 0;
    }
  }
}

// Gaussians a block of the per-Gaussian passes below (cut_boxes, row_supports) takes at once.
constexpr int kCutBlock = 64;

// The inputs of kCutBlock Gaussians i0 .. i0 + nb copied apart, one array per value in double: the
// passes' double-precision arithmetic then runs kCutBlock lanes wide, which GCC does not do on the
// interleaved arrays. A short last block's spare lanes hold a faint Gaussian (opacity 0: an empty box,
// no row cut).
struct GaussianBlock {
  double mx[kCutBlock], my[kCutBlock], ca[kCutBlock], cb[kCutBlock], cc[kCutBlock], op[kCutBlock];
  template <typename T>
  void load(const T* m, const T* conics, const T* opac, int64_t i0, int nb) {
    for (int k = 0; k < kCutBlock; ++k) {
      const int64_t i = i0 + (k < nb ? k : 0);
      mx[k] = m[2 * i];
      my[k] = m[2 * i + 1];
      ca[k] = conics[3 * i];
      cb[k] = conics[3 * i + 1];
      cc[k] = conics[3 * i + 2];
      op[k] = k < nb ? double(opac[i]) : 0.0;
    }
  }
};

// The boxes (and counts) of tile_boxes cut to each Gaussian's alpha support (gsw/tile_cover.h), in
// blocks of kCutBlock Gaussians (GaussianBlock).
template <typename T>
void cut_boxes(const T* m, const T* conics, const T* opac, int64_t n, int64_t tile_size, int32_t* box, int32_t* cnt) {
#pragma omp parallel num_threads(threads_for(n, kMinIsectPerThread))
  {
    const Range share = thread_range(n);
    GaussianBlock g;
    int32_t b0[kCutBlock], b1[kCutBlock], b2[kCutBlock], b3[kCutBlock];
    for (int64_t i0 = share.begin; i0 < share.end; i0 += kCutBlock) {
      const int nb = static_cast<int>(std::min<int64_t>(kCutBlock, share.end - i0));
      g.load(m, conics, opac, i0, nb);
      for (int k = 0; k < kCutBlock; ++k) {
        const int64_t i = i0 + (k < nb ? k : 0);
        b0[k] = box[4 * i];
        b1[k] = box[4 * i + 1];
        b2[k] = box[4 * i + 2];
        b3[k] = box[4 * i + 3];
      }
      // every Gaussian, with no branch (an empty box, cnt 0, stays empty)
#pragma omp simd
      for (int k = 0; k < kCutBlock; ++k) {
        cut_box_to_support<double>(g.mx[k], g.my[k], g.ca[k], g.cb[k], g.cc[k], g.op[k], tile_size, b0[k], b1[k], b2[k],
                                   b3[k]);
      }
      for (int k = 0; k < nb; ++k) {
        const int64_t i = i0 + k;
        box[4 * i] = b0[k];
        box[4 * i + 1] = b1[k];
        box[4 * i + 2] = b2[k];
        box[4 * i + 3] = b3[k];
        cnt[i] = (b2[k] - b0[k]) * (b3[k] - b1[k]);
      }
    }
  }
}

// Each Gaussian's RowSupport into rows[i], for the lists cut at saturation, in blocks of kCutBlock
// Gaussians (GaussianBlock).
template <typename T>
void row_supports(const T* m, const T* conics, const T* opac, int64_t n, RowSupport* rows) {
#pragma omp parallel num_threads(threads_for(n, kMinIsectPerThread))
  {
    const Range share = thread_range(n);
    GaussianBlock g;
    float f[8][kCutBlock];
    for (int64_t i0 = share.begin; i0 < share.end; i0 += kCutBlock) {
      const int nb = static_cast<int>(std::min<int64_t>(kCutBlock, share.end - i0));
      g.load(m, conics, opac, i0, nb);
#pragma omp simd
      for (int k = 0; k < kCutBlock; ++k) {
        float o[8];
        row_support_terms(g.mx[k], g.my[k], g.ca[k], g.cb[k], g.cc[k], g.op[k], o);
        for (int e = 0; e < 8; ++e) f[e][k] = o[e];
      }
      for (int k = 0; k < nb; ++k)
        rows[i0 + k] = {f[0][k], f[1][k], f[2][k], f[3][k], f[4][k], f[5][k], f[6][k], f[7][k]};
    }
  }
}

// For each of the visible Gaussians in depth order (order[j], its box sbox[4 j ..]), fn(t) for every
// tile t of its box (global tile ids c * ntiles + ty * tile_width + tx).
template <typename Fn>
inline void for_box_tiles(const IsectScratch& sc, int64_t j, int64_t N, int64_t tile_width, int64_t ntiles, Fn&& fn) {
  const int32_t* b = sc.sbox.data() + 4 * j;
  const int64_t base = static_cast<int64_t>(sc.order[j] & 0xffffffffu) / N * ntiles;
  for (int32_t ty = b[1]; ty < b[3]; ++ty)
    for (int32_t tx = b[0]; tx < b[2]; ++tx) fn(base + ty * tile_width + tx);
}

}  // namespace

IsectScratch& isect_scratch() {
  thread_local IsectScratch s;
  return s;
}

template <typename T>
int64_t isect_count(const T* m, const int32_t* r, const float* d, const T* conics, const T* opac, int64_t C,
                    int64_t N, int64_t tile_size, int64_t tile_width, int64_t tile_height, bool cut_saturated,
                    int32_t* cnt, IsectScratch& sc) {
  const int64_t ntiles = tile_width * tile_height;
  std::vector<int32_t>& box = sc.box;
  box.resize(static_cast<size_t>(C * N) * 4);  // every entry is written below
  tile_boxes<T>(m, r, C * N, tile_size, tile_width, tile_height, box.data(), cnt);
  if (conics != nullptr) cut_boxes<T>(m, conics, opac, C * N, tile_size, box.data(), cnt);
  // The visible Gaussians sorted once by depth (ties by index), then a counting sort by tile that is
  // stable in that order: each tile's run comes out sorted by (depth, Gaussian id), with no per-tile
  // sort. nth contiguous parts of the depth order: per-part tile histograms, then per-part write
  // cursors (tile start + the counts of the parts before), so the parallel scatter keeps the order.
  const int64_t CT = C * ntiles, CN = C * N;
  // nth parts (one thread for small inputs: waking one costs more than the work)
  const int nth = threads_for(CN, kMinIsectPerThread);
  sc.nth = nth;
  std::vector<uint64_t>& order = sc.order;
  order.resize(static_cast<size_t>(CN));
  int64_t nvis = 0;
  for (int64_t i = 0; i < CN; ++i)
    if (cnt[i] != 0) order[nvis++] = (static_cast<uint64_t>(depth_key(d[i])) << 32) | static_cast<uint32_t>(i);
  order.resize(static_cast<size_t>(nvis));
  sort_by_depth(order, sc.tmp, threads_for(nvis, kMinSortPerThread), sc.count);
  const int64_t V = static_cast<int64_t>(order.size());
  // The boxes in depth order, gathered once: the two passes below then read them in sequence.
  std::vector<int32_t>& sbox = sc.sbox;
  sbox.resize(static_cast<size_t>(V) * 4);
#pragma omp parallel for num_threads(nth) schedule(static)
  for (int64_t j = 0; j < V; ++j) {
    if (j + kGatherAhead < V)
      __builtin_prefetch(box.data() + 4 * static_cast<int64_t>(order[j + kGatherAhead] & 0xffffffffu));
    std::memcpy(sbox.data() + 4 * j, box.data() + 4 * static_cast<int64_t>(order[j] & 0xffffffffu), 4 * sizeof(int32_t));
  }
  std::vector<int64_t>& hist = sc.hist;
  std::vector<int64_t>& start = sc.start;
  start.assign(static_cast<size_t>(CT) + 1, 0);
  // Cut only lists long enough to saturate: the cut's extra work (a bound per entry up to the cut, and
  // each part walking every Gaussian) costs more than it saves where lists are short.
  if (cut_saturated) {
    int64_t pairs = 0;
    for (int64_t i = 0; i < CN; ++i) pairs += cnt[i];
    cut_saturated = pairs >= kSaturationMinPairsPerTile * CT && pairs >= kSaturationMinTilesPerGaussian * V;
  }
  sc.cut = cut_saturated;
  if (cut_saturated) {  // cut_saturated comes with conics and opacities
    sc.rows.resize(static_cast<size_t>(CN));
    row_supports<T>(m, conics, opac, CN, sc.rows.data());
    count_saturated<T>(m, conics, opac, order, sbox, N, tile_size, tile_width, tile_height, C, nth, sc);
    for (int64_t t = 0; t < CT; ++t) start[t + 1] = start[t] + hist[t];
  } else {
    hist.assign(static_cast<size_t>(nth) * CT, 0);
#pragma omp parallel num_threads(nth)
    {
      // nth fixed parts, whatever the team size: part p's histogram is also its write cursor below
      for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
        int64_t* h = hist.data() + static_cast<size_t>(p) * CT;
        for (int64_t j = V * p / nth; j < V * (p + 1) / nth; ++j)
          for_box_tiles(sc, j, N, tile_width, ntiles, [&](int64_t t) { ++h[t]; });
      }
    }
    for (int64_t t = 0; t < CT; ++t) {
      int64_t run = start[t];
      for (int th = 0; th < nth; ++th) {  // hist becomes each thread's write cursor
        const int64_t n = hist[static_cast<size_t>(th) * CT + t];
        hist[static_cast<size_t>(th) * CT + t] = run;
        run += n;
      }
      start[t + 1] = run;
    }
  }
  return start[CT];
}

void isect_fill(const float* d, int64_t C, int64_t N, int64_t tile_width, int64_t tile_height, int64_t M,
                IsectScratch& sc, int32_t* toff, int32_t* fid, int64_t* iid) {
  const int64_t ntiles = tile_width * tile_height, CT = C * ntiles;
  const int nth = sc.nth;
  const int64_t V = static_cast<int64_t>(sc.order.size());
  const std::vector<int64_t>& start = sc.start;
  std::vector<int64_t>& hist = sc.hist;
  for (int64_t t = 0; t < CT; ++t) toff[t] = static_cast<int32_t>(start[t]);
  if (sc.cut) {
    for (int64_t t = 0; t < CT; ++t) hist[t] = start[t];  // write cursors, each tile's owned by one part
    int64_t* pos = hist.data();
#pragma omp parallel num_threads(nth)
    {
      for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
        const uint64_t* e = sc.kept[static_cast<size_t>(p)].data();
        for (int64_t k = 0; k < sc.kept_n[static_cast<size_t>(p)]; ++k) fid[pos[e[k] >> 32]++] = static_cast<int32_t>(e[k]);
      }
    }
  } else {
#pragma omp parallel num_threads(nth)
    {
      for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
        int64_t* pos = hist.data() + static_cast<size_t>(p) * CT;
        for (int64_t j = V * p / nth; j < V * (p + 1) / nth; ++j) {
          const int32_t i = static_cast<int32_t>(sc.order[j] & 0xffffffffu);
          for_box_tiles(sc, j, N, tile_width, ntiles, [&](int64_t t) { fid[pos[t]++] = i; });
        }
      }
    }
  }
  // the (tile << 32 | depth key) ids in a second, sequential pass over each tile's run: written beside
  // flatten_ids above, their 8-byte writes would go to the tiles' scattered cursors too
#pragma omp parallel for num_threads(nth) schedule(static)
  for (int64_t t = 0; t < CT; ++t)
    for (int64_t k = start[t]; k < start[t + 1]; ++k) {
      if (k + kGatherAhead < M) __builtin_prefetch(d + fid[k + kGatherAhead]);
      iid[k] = (t << 32) | static_cast<int64_t>(depth_key(d[fid[k]]));
    }
}

template int64_t isect_count<float>(const float*, const int32_t*, const float*, const float*, const float*, int64_t,
                                    int64_t, int64_t, int64_t, int64_t, bool, int32_t*, IsectScratch&);
template int64_t isect_count<double>(const double*, const int32_t*, const float*, const double*, const double*,
                                     int64_t, int64_t, int64_t, int64_t, int64_t, bool, int32_t*, IsectScratch&);

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
