// The rasterize forward of one Gaussian over the chunks of one tile (csrc/cpu/splat_rasterize_forward.cpp
// walks each tile's list front to back and blends each Gaussian into the chunks it reaches): the per-chunk
// compositing loop (composite_chunk), the tile's per-chunk state (TileLanes), the blend of one
// Gaussian into a set of chunks (GaussianLanes) and of whole-tile Gaussians in batches (RowBatch).
// Generic lane loops (any target) and, for float, a twin under GSW_RASTER_AVX512 with the lane masks in
// mask registers and one under GSW_RASTER_AVX2 (splat_simd.h). Per-pixel math: gsw/blend.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gsw/blend.h"
#include "splat_simd.h"
#include "splat_tiles.h"

namespace gsw {
namespace splat {
namespace cpu {

// The stride of the tile state's rows (TileLanes): the lanes of two chunks, side by side.
constexpr int64_t kPairLanes = 2 * kLanes;

// The inputs of the per-chunk compositing loop.
template <typename T>
struct BlendInputs {
  const T *means2d, *conics, *colors, *opac;
  const int32_t* fid;
  int64_t D;
};

// Front-to-back compositing of a chunk: the Gaussians of list[0..len) (indices into fid, depth order)
// into colour sums acc (D rows of kLanes, kPairLanes apart), transmittance Tr and last contributor
// (index into fid, -1: none).
// Lanes with done = 1 (outside the image) never change. Stops when every lane is done.
template <typename T>
bool composite_chunk(const BlendInputs<T>& in, const int32_t* list, int64_t len, const T* px, const T* py, T* done,
                     T* acc, T* Tr, int32_t* last) {
  const int64_t D = in.D;
  alignas(64) T alpha[kLanes], vis[kLanes], w[kLanes];
  alignas(64) int32_t conm[kLanes], actm[kLanes];
  for (int64_t l = 0; l < len; ++l) {
    const int32_t kk = list[l];
    const int64_t i = in.fid[kk];
    const T* co = in.conics + 3 * i;
    chunk_alpha_vis(px, py, in.means2d[2 * i], in.means2d[2 * i + 1], co[0], co[1], co[2], in.opac[i], alpha, vis);
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) {
      // Conditions as 0/1 floats combined by products: GCC does not vectorize chains of boolean &&
      // here (mixed mask widths) under -fno-trapping-math.
      const T a = alpha[j];
      const T okf = (a >= T(kAlphaMin) ? T(1) : T(0)) * (T(1) - done[j]);
      const T nT = Tr[j] * (T(1) - a);
      const T termf = okf * (nT <= T(kTransmittanceMin) ? T(1) : T(0));
      const T conf = okf - termf;
      done[j] += termf;
      w[j] = (a * Tr[j]) * conf;
      Tr[j] = conf > T(0) ? nT : Tr[j];
      last[j] = conf > T(0) ? kk : last[j];
      conm[j] = conf > T(0) ? 1 : 0;
      actm[j] = done[j] == T(0) ? 1 : 0;
    }
    if (any_lane(conm)) {
      for (int64_t ch = 0; ch < D; ++ch) {
        const T col = in.colors[D * i + ch];
        T* a = acc + ch * kPairLanes;
#pragma omp simd
        for (int j = 0; j < kLanes; ++j) a[j] += w[j] * col;
      }
    }
    if (!any_lane(actm)) break;
  }
  T all_done = T(1);
  for (int j = 0; j < kLanes; ++j) all_done = std::min(all_done, done[j]);
  return all_done > T(0);
}

#if defined(__AVX512F__)
// One Gaussian's compositing step on 16 lanes, lane masks in mask registers (gsw/blend.h's rules): the
// lanes of ok (still compositing, alpha a at least kAlphaMin) take a unless their transmittance Tr would
// fall to kTransmittanceMin, where they stop instead (and leave act). Updates Tr, act and the last
// contributors (to kk where a was taken); returns the colour weights a Tr (0 where a was not taken).
inline __m512 composite16(__m512 a, __mmask16 ok, __mmask16& act, __m512& Tr, __m512i& last, __m512i kk) {
  const __m512 nT = _mm512_mul_ps(Tr, _mm512_sub_ps(_mm512_set1_ps(1.0f), a));
  const __mmask16 term = _mm512_mask_cmp_ps_mask(ok, nT, _mm512_set1_ps(kTransmittanceMin), _CMP_LE_OQ);
  const __mmask16 con = static_cast<__mmask16>(ok & ~term);
  act = static_cast<__mmask16>(act & ~term);
  const __m512 w = _mm512_maskz_mul_ps(con, a, Tr);
  Tr = _mm512_mask_mov_ps(Tr, con, nT);
  last = _mm512_mask_mov_epi32(last, con, kk);
  return w;
}
#endif

#if defined(GSW_RASTER_AVX512)
// float: the same compositing with the chunk's state in registers and lane masks in mask registers
// (the generic loop's 0/1-float products compile to slow mask/integer round trips).
template <>
inline bool composite_chunk<float>(const BlendInputs<float>& in, const int32_t* list, int64_t len, const float* px,
                                   const float* py, float* done, float* acc, float* Tr_, int32_t* last_) {
  const int64_t D = in.D;
  alignas(64) float alpha[kLanes], vis[kLanes];
  __m512 Tr = _mm512_load_ps(Tr_);
  __m512i last = _mm512_load_si512(reinterpret_cast<const void*>(last_));
  __mmask16 active = _mm512_cmp_ps_mask(_mm512_load_ps(done), _mm512_setzero_ps(), _CMP_EQ_OQ);
  const __m512 one = _mm512_set1_ps(1.0f), amin = _mm512_set1_ps(kAlphaMin);
  for (int64_t l = 0; l < len && active; ++l) {
    const int32_t kk = list[l];
    const int64_t i = in.fid[kk];
    const float* co = in.conics + 3 * i;
    chunk_alpha_vis(px, py, in.means2d[2 * i], in.means2d[2 * i + 1], co[0], co[1], co[2], in.opac[i], alpha, vis);
    const __m512 a = _mm512_load_ps(alpha);
    const __mmask16 ok = _mm512_mask_cmp_ps_mask(active, a, amin, _CMP_GE_OQ);
    if (!ok) continue;
    const __m512 w = composite16(a, ok, active, Tr, last, _mm512_set1_epi32(kk));
    const float* col = in.colors + D * i;
    if (D == 3) {  // RGB, unrolled
      float *ag = acc + kPairLanes, *ab = acc + 2 * kPairLanes;
      _mm512_store_ps(acc, _mm512_fmadd_ps(w, _mm512_set1_ps(col[0]), _mm512_load_ps(acc)));
      _mm512_store_ps(ag, _mm512_fmadd_ps(w, _mm512_set1_ps(col[1]), _mm512_load_ps(ag)));
      _mm512_store_ps(ab, _mm512_fmadd_ps(w, _mm512_set1_ps(col[2]), _mm512_load_ps(ab)));
      continue;
    }
    for (int64_t ch = 0; ch < D; ++ch) {
      float* ap = acc + ch * kPairLanes;
      _mm512_storeu_ps(ap, _mm512_fmadd_ps(w, _mm512_set1_ps(col[ch]), _mm512_loadu_ps(ap)));
    }
  }
  _mm512_store_ps(Tr_, Tr);
  _mm512_store_si512(reinterpret_cast<void*>(last_), last);
  _mm512_store_ps(done, _mm512_mask_blend_ps(active, one, _mm512_setzero_ps()));
  return active == 0;
}
#endif

// The per-chunk state of one tile, chunks in pairs (2 p, 2 p + 1): rows of kPairLanes lanes, the even
// chunk's lanes first (pixel centres px, py, transmittance Tr, done, last contributor, then D rows of
// colour sums acc), so that a chunk's state is one address plus fixed offsets in the compositing loop,
// and a 16-pixel tile row of 8-lane chunks is one 512-bit vector a row (GaussianLanes<float>::blend_rows);
// and kLanes lanes of scratch per chunk for one Gaussian's alphas.
template <typename T>
struct TileLanes {
  using Lanes = LaneBlock<T>;
  struct alignas(64) Pair {
    T v[kPairLanes];
  };
  static_assert(sizeof(LaneBlock<int32_t>) <= sizeof(Lanes), "a row of last contributors fits a row of T");
  enum Row : int64_t { kPx, kPy, kTr, kDone, kLast, kAcc };
  int64_t rows;  // per pair of chunks: kAcc + D
  std::vector<Pair> state;
  std::vector<Lanes> alpha;  // one spare block, for alphas() to start on 64 bytes
  TileLanes(int64_t nchunks, int64_t D) : rows(kAcc + D), state((nchunks + 1) / 2 * rows), alpha(nchunks + 1) {}
  // Chunk q's state: row f (Row) at chunk(q) + f kPairLanes.
  T* chunk(int64_t q) { return state[(q >> 1) * rows].v + (q & 1) * kLanes; }
  // The alpha scratch, 64-byte aligned (two chunks' lanes are one 512-bit store: Alpha16).
  T* alphas() {
    const uintptr_t p = reinterpret_cast<uintptr_t>(alpha.data());
    return reinterpret_cast<T*>((p + 63) & ~uintptr_t(63));
  }
  T* px(int64_t q) { return chunk(q) + kPx * kPairLanes; }
  T* py(int64_t q) { return chunk(q) + kPy * kPairLanes; }
  T* Tr(int64_t q) { return chunk(q) + kTr * kPairLanes; }
  T* done(int64_t q) { return chunk(q) + kDone * kPairLanes; }
  int32_t* last(int64_t q) { return reinterpret_cast<int32_t*>(chunk(q) + kLast * kPairLanes); }
  T* acc(int64_t q) { return chunk(q) + kAcc * kPairLanes; }  // D rows of kLanes, kPairLanes apart
};

#if defined(GSW_RASTER_AVX2) && defined(__AVX512F__)
// A 16-pixel tile row's compositing state in registers (float TileLanes, 8-lane chunks in pairs): c is
// the row's even chunk's state; act holds the lanes still compositing (done == 0).
struct RowState {
  __m512 Tr;
  __m512i last;
  __mmask16 act;
  static RowState load(const float* c) {
    using L = TileLanes<float>;
    return {_mm512_load_ps(c + L::kTr * kPairLanes), _mm512_load_si512(c + L::kLast * kPairLanes),
            _mm512_cmp_ps_mask(_mm512_load_ps(c + L::kDone * kPairLanes), _mm512_setzero_ps(), _CMP_EQ_OQ)};
  }
  void store(float* c) const {
    using L = TileLanes<float>;
    _mm512_store_ps(c + L::kTr * kPairLanes, Tr);
    _mm512_store_si512(c + L::kLast * kPairLanes, last);
    _mm512_store_ps(c + L::kDone * kPairLanes, _mm512_mask_blend_ps(act, _mm512_set1_ps(1.0f), _mm512_setzero_ps()));
  }
  // Bit h set where half h (chunk 2 r + h) has every lane done.
  unsigned finished_halves() const { return ((act & 0xFFu) == 0 ? 1u : 0u) | ((act >> 8) == 0 ? 2u : 0u); }
};
#endif

// One Gaussian (intersection kk of the tile's list) blended into the chunks qs[0..nq) (distinct, each
// still compositing), or those whose bits are set (blend_bits, tiles of up to 64 chunks), one after
// another: the Gaussian-major step of rasterize_forward_kernel, which calls finished(q) for each chunk
// whose every lane is done after it. The generic form composites a list of one per chunk.
template <typename T>
struct GaussianLanes {
  const BlendInputs<T>& in;
  int32_t kk;
  GaussianLanes(const BlendInputs<T>& in_, const GaussianRecord<T>&, int32_t kk_) : in(in_), kk(kk_) {}
  template <typename Finished>
  void blend(const int64_t* qs, int64_t nq, TileLanes<T>& st, Finished&& finished) const {
    for (int64_t n = 0; n < nq; ++n) blend_one(qs[n], st, finished);
  }
  // The same over the chunks whose bits are set (bit q: chunk q).
  template <typename Finished>
  void blend_bits(uint64_t bits, TileLanes<T>& st, Finished&& finished) const {
    for (; bits != 0; bits &= bits - 1) blend_one(__builtin_ctzll(bits), st, finished);
  }
  // blend_bits where rows_apply holds for rows r0..r1 (never, in this form).
  template <typename Finished>
  void blend_rows(uint64_t bits, int64_t, int64_t, TileLanes<T>& st, Finished&& finished) const {
    blend_bits(bits, st, finished);
  }

 private:
  template <typename Finished>
  void blend_one(int64_t q, TileLanes<T>& st, Finished&& finished) const {
    if (composite_chunk(in, &kk, 1, st.px(q), st.py(q), st.done(q), st.acc(q), st.Tr(q), st.last(q))) finished(q);
  }
};

#if defined(GSW_RASTER_AVX2)
// float on AVX2: the compositing step in registers, kLanes / 8 vectors of 8 lanes, lane masks as all-ones
// floats and blends for the conditional updates (the generic loop's conditional stores compile to
// masked stores, which are slow on AMD cores). The Gaussian's values are broadcast once for all the
// chunks it reaches (inside the chunk loop the compiler cannot hoist their loads: the colour sums'
// stores may alias them).
// Two passes over the chunks: the alphas of all of them first, then the compositing. Each alpha ends a
// long chain of dependent steps (Alpha8); in one fused pass every later step of a chunk waits on it in
// the scheduler, which then holds little more than one chunk's work, while the alpha pass alone keeps
// several chunks' chains in flight, and the compositing pass's chains are short.
template <>
struct GaussianLanes<float> {
  Alpha8 g;
  __m256 kkv, rgb[3];
  const float* col;
  int64_t D;
  const BlendTerms<float>* bt;  // the record's, for blend_rows
  GaussianLanes(const BlendInputs<float>& in, const GaussianRecord<float>& r, int32_t kk)
      : g(r.mx, r.my, r.bt), D(in.D), bt(&r.bt) {
    kkv = _mm256_castsi256_ps(_mm256_set1_epi32(kk));
    col = in.colors + D * in.fid[kk];
    for (int ch = 0; ch < 3; ++ch) rgb[ch] = _mm256_set1_ps(ch < D ? col[ch] : 0.0f);
  }
  template <typename Finished>
  void blend(const int64_t* qs, int64_t nq, TileLanes<float>& st, Finished&& finished) const {
    if (D == 3)
      blend_chunks<3>(ListedChunks{qs, nq}, st, finished);
    else
      blend_chunks<0>(ListedChunks{qs, nq}, st, finished);
  }
  template <typename Finished>
  void blend_bits(uint64_t bits, TileLanes<float>& st, Finished&& finished) const {
    if (D == 3)
      blend_chunks<3>(ChunkBits{bits}, st, finished);
    else
      blend_chunks<0>(ChunkBits{bits}, st, finished);
  }
#if defined(__AVX512F__)
  // The Gaussian's values on 16 lanes, for composite_row (as locals: the state's stores could alias the
  // members, so the compiler would load and broadcast them again for every row).
  struct Wide {
    __m512 rgb[3];
    __m512i kk;
    explicit Wide(const GaussianLanes& gl) {
      for (int ch = 0; ch < 3; ++ch) rgb[ch] = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(gl.rgb[ch])));
      kk = _mm512_broadcast_i64x4(_mm256_castps_si256(gl.kkv));
    }
  };
  // The alphas of rows r0..r1 of a 16 x 16 tile where rows_apply holds, row r's 16 at out + 16 r
  // (Alpha16::rows; out 64-byte aligned).
  void row_alphas(TileLanes<float>& st, int64_t r0, int64_t r1, float* out) const {
    static_assert(kPairLanes == 16, "a tile row of two 8-lane chunks is one 512-bit vector");
    const auto py = [&](int64_t r) { return _mm512_load_ps(st.py(2 * r)); };
    Alpha16(g).rows<false>(_mm512_load_ps(st.px(0)), py, r0, r1, *bt, out, nullptr);
  }
#endif
  // blend_bits over chunks of rows r0..r1 of a 16 x 16 tile where rows_apply holds: the alphas of those
  // rows by Alpha16::rows (row r's at 16 r: those of chunk q at q kLanes), then the compositing of each
  // row whose chunks' bits are set, the row's two chunks in one 512-bit vector (composite_row).
  template <typename Finished>
  void blend_rows(uint64_t bits, int64_t r0, int64_t r1, TileLanes<float>& st, Finished&& finished) const {
#if defined(__AVX512F__)
    float* const alphas = st.alphas();
    row_alphas(st, r0, r1, alphas);
    const int64_t rows = D == 3 ? TileLanes<float>::kAcc + 3 : st.rows;
    float* const state = st.state.data()->v;
    const Wide w16(*this);
    while (bits != 0) {
      const int64_t r = __builtin_ctzll(bits) >> 1;
      const unsigned both = static_cast<unsigned>(bits >> (2 * r)) & 3u;  // the row's chunks still compositing
      bits &= ~(uint64_t(3) << (2 * r));
      float *const a = alphas + 16 * r, *const c = state + r * rows * 16;
      const unsigned done = both & (D == 3 ? composite_row<3>(a, c, both, w16) : composite_row<0>(a, c, both, w16));
      if (done & 1u) finished(2 * r);
      if (done & 2u) finished(2 * r + 1);
    }
#else
    (void)r0, (void)r1;
    blend_bits(bits, st, finished);
#endif
  }

 private:
  // The chunks of one blend, walked twice (alphas, then compositing): a list, or set bits.
  // each(fn): fn(n, q) for the n-th chunk q; pairs(two, one): two(n, q0, q1) for the chunks n and n + 1
  // (n even), then one(n, q) for a last odd one.
  struct ListedChunks {
    const int64_t* qs;
    int64_t nq;
    template <typename Fn>
    void each(Fn&& fn) const {
      for (int64_t n = 0; n < nq; ++n) fn(n, qs[n]);
    }
    template <typename Two, typename One>
    void pairs(Two&& two, One&& one) const {
      int64_t n = 0;
      for (; n + 1 < nq; n += 2) two(n, qs[n], qs[n + 1]);
      if (n < nq) one(n, qs[n]);
    }
  };
  struct ChunkBits {
    uint64_t bits;
    template <typename Fn>
    void each(Fn&& fn) const {
      int64_t n = 0;
      for (uint64_t b = bits; b != 0; b &= b - 1) fn(n++, static_cast<int64_t>(__builtin_ctzll(b)));
    }
    template <typename Two, typename One>
    void pairs(Two&& two, One&& one) const {
      int64_t n = 0;
      for (uint64_t b = bits; b != 0; n += 2) {
        const int64_t q0 = __builtin_ctzll(b);
        b &= b - 1;
        if (b == 0) return one(n, q0);
        two(n, q0, static_cast<int64_t>(__builtin_ctzll(b)));
        b &= b - 1;
      }
    }
  };

  // blend for D = DC channels (DC = 0: D, any).
  template <int DC, typename Chunks, typename Finished>
  void blend_chunks(const Chunks& chunks, TileLanes<float>& st, Finished&& finished) const {
    using L = TileLanes<float>;
    const int64_t rows = DC > 0 ? L::kAcc + DC : st.rows;
    float* const state = st.state.data()->v;
    float* const alphas = st.alphas();
    const auto base = [&](int64_t q) { return state + (q >> 1) * rows * kPairLanes + (q & 1) * kLanes; };
    const auto alpha_of_one = [&](int64_t n, int64_t q) {
      const float* c = base(q);
      __m256 raw;
      _mm256_store_ps(alphas + n * kLanes,
                      g.alpha(_mm256_load_ps(c + L::kPx * kPairLanes), _mm256_load_ps(c + L::kPy * kPairLanes), raw));
    };
#if defined(__AVX512F__)
    const Alpha16 g2(g);  // two chunks a vector (Alpha16)
    chunks.pairs(
        [&](int64_t n, int64_t q0, int64_t q1) {
          const float *c0 = base(q0), *c1 = base(q1);
          _mm512_store_ps(alphas + n * kLanes,
                          g2.alpha(Alpha16::pair(c0 + L::kPx * kPairLanes, c1 + L::kPx * kPairLanes),
                                   Alpha16::pair(c0 + L::kPy * kPairLanes, c1 + L::kPy * kPairLanes)));
        },
        alpha_of_one);
#else
    chunks.each(alpha_of_one);
#endif
    const auto one = [&](int64_t n, int64_t q) {
      if (composite<DC>(alphas + n * kLanes, base(q))) finished(q);
    };
#if defined(__AVX512F__)
    // the two chunks of a tile row in one 512-bit vector, where both are listed (their alphas are then
    // side by side, and so is their state)
    const Wide w16(*this);
    chunks.pairs(
        [&](int64_t n, int64_t q0, int64_t q1) {
          if ((q0 & 1) == 0 && q1 == q0 + 1) {
            const unsigned done = composite_row<DC>(alphas + n * kLanes, base(q0), 3u, w16);
            if (done & 1u) finished(q0);
            if (done & 2u) finished(q1);
            return;
          }
          one(n, q0);
          one(n + 1, q1);
        },
        one);
#else
    chunks.each(one);
#endif
  }

  // The blend of this Gaussian into chunk state c (TileLanes rows) given its alphas; true when every
  // lane is done after it.
  template <int DC>
  bool composite(const float* alpha, float* c) const {
    using L = TileLanes<float>;
    float *done = c + L::kDone * kPairLanes, *acc = c + L::kAcc * kPairLanes, *Tr_ = c + L::kTr * kPairLanes;
    int32_t* last_ = reinterpret_cast<int32_t*>(c + L::kLast * kPairLanes);
    const int64_t D = DC > 0 ? DC : this->D;
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f), amin = _mm256_set1_ps(kAlphaMin);
    const __m256 tmin = _mm256_set1_ps(kTransmittanceMin);
    __m256 act_any = zero;
    for (int h = 0; h < kLanes / 8; ++h) {
      const __m256 Tr = _mm256_load_ps(Tr_ + 8 * h);
      __m256 act = _mm256_cmp_ps(_mm256_load_ps(done + 8 * h), zero, _CMP_EQ_OQ);
      const __m256 a = _mm256_load_ps(alpha + 8 * h);
      const __m256 ok = _mm256_and_ps(act, _mm256_cmp_ps(a, amin, _CMP_GE_OQ));
      const __m256 nT = _mm256_mul_ps(Tr, _mm256_sub_ps(one, a));
      const __m256 term = _mm256_and_ps(ok, _mm256_cmp_ps(nT, tmin, _CMP_LE_OQ));
      const __m256 con = _mm256_andnot_ps(term, ok);
      act = _mm256_andnot_ps(term, act);
      act_any = _mm256_or_ps(act_any, act);
      const __m256 w = _mm256_and_ps(con, _mm256_mul_ps(a, Tr));
      _mm256_store_ps(Tr_ + 8 * h, _mm256_blendv_ps(Tr, nT, con));
      float* lp = reinterpret_cast<float*>(last_ + 8 * h);
      _mm256_store_ps(lp, _mm256_blendv_ps(_mm256_load_ps(lp), kkv, con));
      _mm256_store_ps(done + 8 * h, _mm256_andnot_ps(act, one));
      // the colour sums take w * colour unconditionally (w = 0 where nothing composited): a branch on
      // "any lane composited" mispredicts often where supports graze a chunk, and costs more than the FMAs
      if (DC == 3) {
        for (int ch = 0; ch < 3; ++ch) {
          float* ap = acc + ch * kPairLanes + 8 * h;
          _mm256_store_ps(ap, _mm256_fmadd_ps(w, rgb[ch], _mm256_load_ps(ap)));
        }
      } else {
        for (int64_t ch = 0; ch < D; ++ch) {
          float* ap = acc + ch * kPairLanes + 8 * h;
          _mm256_store_ps(ap, _mm256_fmadd_ps(w, _mm256_set1_ps(col[ch]), _mm256_load_ps(ap)));
        }
      }
    }
    return _mm256_movemask_ps(act_any) == 0;
  }

#if defined(__AVX512F__)
  // composite on a tile row of two 8-lane chunks at once: c, the even chunk's state, alpha its 16 lanes'
  // alphas. The same operations as composite, lane for lane, on 512-bit vectors with the lane masks in
  // mask registers, on the halves h whose bit is set in both (the other's lanes are left as they are).
  // Returns bit h set where half h has every lane done after it.
  template <int DC>
  unsigned composite_row(const float* alpha, float* c, unsigned both, const Wide& wv) const {
    float* const acc = c + TileLanes<float>::kAcc * kPairLanes;
    const int64_t D = DC > 0 ? DC : this->D;
    RowState rs = RowState::load(c);
    const __m512 a = _mm512_load_ps(alpha);
    const __mmask16 halves = static_cast<__mmask16>(((both & 1u) ? 0x00FFu : 0u) | ((both & 2u) ? 0xFF00u : 0u));
    const __mmask16 ok = _mm512_mask_cmp_ps_mask(rs.act & halves, a, _mm512_set1_ps(kAlphaMin), _CMP_GE_OQ);
    const __m512 w = composite16(a, ok, rs.act, rs.Tr, rs.last, wv.kk);
    rs.store(c);
    for (int64_t ch = 0; ch < D; ++ch) {
      float* ap = acc + ch * kPairLanes;
      const __m512 cv = DC == 3 ? wv.rgb[ch] : _mm512_set1_ps(col[ch]);
      _mm512_store_ps(ap, _mm512_fmadd_ps(w, cv, _mm512_load_ps(ap)));
    }
    return rs.finished_halves();
  }
#endif
};
#endif

// Consecutive Gaussians of a tile's list that each cover the whole tile and take the row form
// (rows_apply on all rows), blended together: each tile row's state is loaded once, each Gaussian
// composited into it in list order, and stored once, where blend_rows loads and stores it for every
// Gaussian. The generic form batches none (accepts() is false).
template <typename T>
struct RowBatch {
  bool accepts(int64_t) const { return false; }
  bool empty() const { return true; }
  void add(const BlendInputs<T>&, const GaussianRecord<T>&, int32_t, TileLanes<T>&) {}
  bool full() const { return false; }
  template <typename Finished>
  void flush(TileLanes<T>&, uint64_t, Finished&&) {}
};

#if defined(GSW_RASTER_AVX2) && defined(__AVX512F__)
template <>
struct RowBatch<float> {
  static constexpr int kMax = 4;
  int n = 0;
  __m512 col[kMax][3];  // the Gaussians' colours and intersection indices on 16 lanes (Wide)
  __m512i index[kMax];
  alignas(64) float alpha[kMax][16 * 16];
  // RGB only (the colours are broadcast once, in Wide), 16 x 16 tiles of 8-lane chunks
  bool accepts(int64_t D) const { return D == 3 && kPairLanes == 16; }
  bool empty() const { return n == 0; }
  bool full() const { return n == kMax; }
  // Gaussian kk of record r: its alphas now (their chains overlap the batch's other work), its
  // compositing at the next flush.
  void add(const BlendInputs<float>& in, const GaussianRecord<float>& r, int32_t kk, TileLanes<float>& st) {
    const GaussianLanes<float> gl(in, r, kk);
    gl.row_alphas(st, 0, 15, alpha[n]);
    const GaussianLanes<float>::Wide w(gl);
    for (int ch = 0; ch < 3; ++ch) col[n][ch] = w.rgb[ch];
    index[n] = w.kk;
    ++n;
  }
  // The batch composited, in list order, into every row with a chunk still compositing (active_bits:
  // bit q for chunk q); finished(q) for each chunk every lane of which is done after it.
  template <typename Finished>
  void flush(TileLanes<float>& st, uint64_t active_bits, Finished&& finished) {
    constexpr int64_t rows = TileLanes<float>::kAcc + 3;
    float* const state = st.state.data()->v;
    const __m512 amin = _mm512_set1_ps(kAlphaMin);
    while (active_bits != 0) {
      const int64_t r = __builtin_ctzll(active_bits) >> 1;
      const unsigned both = static_cast<unsigned>(active_bits >> (2 * r)) & 3u;
      active_bits &= ~(uint64_t(3) << (2 * r));
      float* const c = state + r * rows * 16;
      float* const acc = c + TileLanes<float>::kAcc * kPairLanes;
      RowState rs = RowState::load(c);
      __m512 rgb[3] = {_mm512_load_ps(acc), _mm512_load_ps(acc + kPairLanes), _mm512_load_ps(acc + 2 * kPairLanes)};
      // composite_row's steps for each Gaussian in turn, the state in registers
      for (int g = 0; g < n; ++g) {
        const __m512 a = _mm512_load_ps(alpha[g] + 16 * r);
        const __mmask16 ok = _mm512_mask_cmp_ps_mask(rs.act, a, amin, _CMP_GE_OQ);
        const __m512 w = composite16(a, ok, rs.act, rs.Tr, rs.last, index[g]);
        for (int ch = 0; ch < 3; ++ch) rgb[ch] = _mm512_fmadd_ps(w, col[g][ch], rgb[ch]);
      }
      rs.store(c);
      for (int ch = 0; ch < 3; ++ch) _mm512_store_ps(acc + ch * kPairLanes, rgb[ch]);
      const unsigned fin = both & rs.finished_halves();
      if (fin & 1u) finished(2 * r);
      if (fin & 2u) finished(2 * r + 1);
    }
    n = 0;
  }
};
#endif

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
