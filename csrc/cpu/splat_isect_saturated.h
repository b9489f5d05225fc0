// The intersection's lists cut at saturation (gsw/tile_saturation.h), counted: count_saturated, which
// csrc/cpu/splat_isect.cpp calls when cut_saturated cuts. Each part of the pass owns interleaved rows of
// tiles and walks every visible Gaussian in depth order over its own rows, bounding each open tile's
// transmittance and closing the tile once the bound saturates; each row of a box is first cut to the
// tiles the Gaussian's support reaches on it (cut_row_to_support).
#pragma once

#include <omp.h>

#include <cstdint>
#include <vector>

#include "gsw/tile_saturation.h"
#include "splat.h"
#include "tile_saturation_simd.h"

namespace gsw {
namespace splat {
namespace cpu {

// Entries ahead at which the passes in depth order prefetch what they read of a Gaussian: its inputs,
// box or depth lie at its index, scattered over arrays larger than the L2 cache at 10^5 Gaussians, and
// each entry's own work is too short for the core to have many of those misses in flight.
constexpr int64_t kGatherAhead = 32;

// The lists cut at saturation are built per tile front to back: nth parts, part p owning the rows of
// tiles r = c * tile_height + ty with r % nth == p, and walking every visible Gaussian in depth order
// over its own rows (interleaved rows: a crowded region is shared). Calls fn(j, r, ty, x0, x1, i) for
// each (Gaussian j in depth order, row r of its box that part p owns, the box's columns [x0, x1)); i is
// the Gaussian's index c * N + n.
template <typename Fn>
inline void for_owned_rows(const std::vector<int32_t>& sbox, const std::vector<uint64_t>& order, int64_t C,
                           int64_t N, int64_t tile_height, int nth, int p, Fn&& fn) {
  const int64_t V = static_cast<int64_t>(order.size());
  for (int64_t j = 0; j < V; ++j) {
    const int32_t* b = sbox.data() + 4 * j;
    const int32_t i = static_cast<int32_t>(order[j] & 0xffffffffu);
    const int64_t c = C == 1 ? 0 : i / N, r0 = c * tile_height + b[1];
    // the first row from r0 that part p owns (no division for the usual one or two parts)
    const int64_t skip = nth == 1 ? 0 : nth == 2 ? ((p ^ r0) & 1) : ((p - r0 % nth) + nth) % nth;
    for (int64_t r = r0 + skip; r < c * tile_height + b[3]; r += nth)
      fn(j, r, static_cast<int32_t>(r - c * tile_height), b[0], b[2], i);
  }
}

template <typename T>
std::vector<T>& saturation_records(IsectScratch& sc);
template <>
inline std::vector<float>& saturation_records<float>(IsectScratch& sc) {
  return sc.rec;
}
template <>
inline std::vector<double>& saturation_records<double>(IsectScratch& sc) {
  return sc.rec64;
}

// The bits of tiles [x0, x1) in word wx of a row's flags (tile 64 wx + k at bit k).
inline uint64_t word_span(int32_t x0, int32_t x1, int32_t wx) {
  const int32_t lo = std::max(x0 - (wx << 6), 0), hi = std::min(x1 - (wx << 6), 64);
  return (hi == 64 ? ~uint64_t(0) : (uint64_t(1) << hi) - 1) & ~((uint64_t(1) << lo) - 1);
}

// Whether a tile of [x0, x1) is still open (its bit clear in the row's words dw).
inline bool any_open(int32_t x0, int32_t x1, const uint64_t* dw) {
  for (int32_t wx = x0 >> 6; wx <= (x1 - 1) >> 6; ++wx)
    if ((word_span(x0, x1, wx) & ~dw[wx]) != 0) return true;
  return false;
}

// One row of Gaussian i's box (its record g): the tiles [x0, x1) of the row whose first tile is row (a
// global tile id) and whose pixels start at y = ty ts. Each tile not yet saturated (its bit clear in the
// row's words dw) gets the entry (tile << 32 | i) at w, one more in its count and Gaussian i's bound, and
// its bit once saturated. Returns the write cursor past the entries; w has room for x1 - x0 + 4.
template <typename T>
inline uint64_t* bound_row(const T* g, int32_t i, int64_t row, int32_t ty, int32_t x0, int32_t x1, T ts,
                           const T* edges, uint64_t* dw, int64_t* cnt, T* tbs, uint64_t* w) {
  const bool bounded = g[5] > T(0);
  for (int32_t wx = x0 >> 6; wx <= (x1 - 1) >> 6; ++wx) {
    const uint64_t span = word_span(x0, x1, wx);
    for (uint64_t todo = span & ~dw[wx]; todo != 0; todo &= todo - 1) {
      const int32_t tx = (wx << 6) + __builtin_ctzll(todo);
      const int64_t t = row + tx;
      ++cnt[t];
      *w++ = static_cast<uint64_t>(t) << 32 | static_cast<uint32_t>(i);
      if (bounded && saturate_tile<T>(g, T(tx) * ts, T(ty) * ts, edges, tbs + 4 * t))
        dw[wx] |= uint64_t(1) << (tx & 63);
    }
  }
  return w;
}

#if defined(GSW_SATURATION_TILES4)
// Four tiles at a time, from the first open one on, with no branch on which of the four are open: their
// entries packed from one vector, their counts one masked add, their bounds saturate_tiles4 (the same
// bounds as saturate_tile's). A row whose tiles are all saturated costs one test.
template <>
inline uint64_t* bound_row<float>(const float* g, int32_t i, int64_t row, int32_t ty, int32_t x0, int32_t x1,
                                  float ts, const float* edges, uint64_t* dw, int64_t* cnt,
                                  float* tbs, uint64_t* w) {
  const float py = float(ty) * ts;
  const bool bounded = g[5] > 0.0f;
  const __m256i step = _mm256_set_epi64x(3, 2, 1, 0), id = _mm256_set1_epi64x(static_cast<uint32_t>(i));
  for (int32_t wx = x0 >> 6; wx <= (x1 - 1) >> 6; ++wx) {
    const uint64_t span = word_span(x0, x1, wx);
    for (uint64_t open = span & ~dw[wx]; open != 0;) {
      const int o = __builtin_ctzll(open);
      const uint32_t todo = static_cast<uint32_t>(open >> o) & 0xFu;  // tiles o .. o + 3 of the word
      open &= ~(uint64_t(0xF) << o);
      const int32_t c = (wx << 6) + o;
      const int64_t t0 = row + c;
      const __mmask8 m = static_cast<__mmask8>(todo);
      const __m256i ids = _mm256_or_si256(_mm256_slli_epi64(_mm256_add_epi64(_mm256_set1_epi64x(t0), step), 32), id);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(w), _mm256_maskz_compress_epi64(m, ids));
      w += __builtin_popcount(todo);
      const __m256i n = _mm256_maskz_loadu_epi64(m, cnt + t0);
      _mm256_mask_storeu_epi64(cnt + t0, m, _mm256_add_epi64(n, _mm256_set1_epi64x(1)));
      if (bounded) dw[wx] |= uint64_t(saturate_tiles4(g, c, ts, py, edges, todo, tbs + 4 * t0)) << o;
    }
  }
  return w;
}
#endif

// The lists cut at saturation (gsw/tile_saturation.h), counted: their lengths into sc.hist [tiles] and
// their entries, (tile << 32 | Gaussian index) in depth order, into sc.kept[p] for each part p (whose
// tiles are its own). Entries past a tile's end are neither kept nor bounded.
template <typename T>
void count_saturated(const T* m, const T* conics, const T* opac, const std::vector<uint64_t>& order,
                     const std::vector<int32_t>& sbox, int64_t N, int64_t tile_size, int64_t tile_width,
                     int64_t tile_height, int64_t C, int nth, IsectScratch& sc) {
  const int64_t V = static_cast<int64_t>(order.size()), CT = C * tile_width * tile_height;
  std::vector<T>& rec = saturation_records<T>(sc);
  rec.resize(static_cast<size_t>(V) * 6);
  sc.srows.resize(static_cast<size_t>(V));
#pragma omp parallel for num_threads(nth) schedule(static)
  for (int64_t j = 0; j < V; ++j) {
    if (j + kGatherAhead < V) {
      const int64_t ia = static_cast<int64_t>(order[j + kGatherAhead] & 0xffffffffu);
      __builtin_prefetch(m + 2 * ia);
      __builtin_prefetch(conics + 3 * ia);
      __builtin_prefetch(opac + ia);
      __builtin_prefetch(sc.rows.data() + ia);
    }
    const int64_t i = static_cast<int64_t>(order[j] & 0xffffffffu);
    const T* co = conics + 3 * i;
    saturation_record<T>(m[2 * i], m[2 * i + 1], co[0], co[1], co[2], opac[i], rec.data() + 6 * j);
    sc.srows[static_cast<size_t>(j)] = sc.rows[static_cast<size_t>(i)];
  }
  sc.hist.assign(static_cast<size_t>(CT), 0);
  // per row of tiles, a bit per saturated tile: a box's row skips its saturated tiles a word at a time
  // a row's words padded to a cache line: the parts own alternate rows, and rows sharing a line would
  // pass it between the cores at every bit set
  const int64_t words = (tile_width + 63) / 64, row_words = (words + 7) / 8 * 8;
  sc.done.assign(static_cast<size_t>(C * tile_height * row_words), 0);
  sc.kept.resize(static_cast<size_t>(nth));
  sc.kept_n.assign(static_cast<size_t>(nth), 0);
  std::vector<T> tb(static_cast<size_t>(CT) * 4, T(1));  // each quarter's transmittance bound
  T edges[4];
  quarter_edges<T>(tile_size, edges);
  int64_t* cnt = sc.hist.data();
  uint64_t* done = sc.done.data();
  const T* recs = rec.data();
  const RowSupport* rows = sc.srows.data();
  const bool pow2 = (tile_size & (tile_size - 1)) == 0;
  const double inv_ts = 1.0 / double(tile_size);
  T* tbs = tb.data();
  const T ts = T(tile_size);
#pragma omp parallel num_threads(nth)
  {
    for (int p = omp_get_thread_num(); p < nth; p += omp_get_num_threads()) {
      std::vector<uint64_t>& kp = sc.kept[static_cast<size_t>(p)];
      if (kp.size() < 4096) kp.resize(4096);
      // the part's write cursor in locals (registers): kp grows, rarely, when full
      uint64_t *w = kp.data(), *wend = w + kp.size();
      for_owned_rows(sbox, order, C, N, tile_height, nth, p,
                     [&](int64_t j, int64_t r, int32_t ty, int32_t x0, int32_t x1, int32_t i) {
                       // where a tile of the row is still open, the row cut to the support's extent on
                       // it: fewer tiles bounded and listed (most rows of a deep scene's boxes are
                       // saturated by then, and skip the cut's arithmetic)
                       uint64_t* const dw = done + r * row_words;
                       if (!any_open(x0, x1, dw)) return;
                       cut_row_to_support(rows[j], tile_size, inv_ts, pow2, ty, x0, x1);
                       if (x0 >= x1) return;
                       // room for the row's entries and the four a group of tiles stores (bound_row)
                       if (wend - w < x1 - x0 + 4) {
                         const size_t used = static_cast<size_t>(w - kp.data());
                         kp.resize(2 * kp.size() + static_cast<size_t>(x1 - x0 + 4));
                         w = kp.data() + used;
                         wend = kp.data() + kp.size();
                       }
                       // r = c * tile_height + ty: global tile ids
                       w = bound_row<T>(recs + 6 * j, i, r * tile_width, ty, x0, x1, ts, edges, dw, cnt, tbs, w);
                     });
      sc.kept_n[static_cast<size_t>(p)] = static_cast<int64_t>(w - kp.data());
    }
  }
}

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
