// Whole-tile Gaussians blended in batches (RowBatch), a step of rasterize_forward_kernel
// (csrc/cpu/splat_rasterize_forward.cpp) over the tile state and the per-Gaussian blends of
// splat_rasterize_forward.h.
#pragma once

#include <cstdint>

#include "gsw/blend.h"
#include "splat_rasterize_forward.h"
#include "splat_simd.h"
#include "splat_tiles.h"

namespace gsw {
namespace splat {
namespace cpu {

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
    using L = TileLanes<float>;
    constexpr int64_t rows = L::kAcc + 3;
    float* const state = st.state.data()->v;
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    const __m512 amin = _mm512_set1_ps(kAlphaMin);
    while (active_bits != 0) {
      const int64_t r = __builtin_ctzll(active_bits) >> 1;
      const unsigned both = static_cast<unsigned>(active_bits >> (2 * r)) & 3u;
      active_bits &= ~(uint64_t(3) << (2 * r));
      float* const c = state + r * rows * 16;
      float *done = c + L::kDone * kPairLanes, *acc = c + L::kAcc * kPairLanes, *Tr_ = c + L::kTr * kPairLanes;
      void* last_ = c + L::kLast * kPairLanes;
      __m512 Tr = _mm512_load_ps(Tr_);
      __m512i last = _mm512_load_si512(last_);
      __m512 rgb[3] = {_mm512_load_ps(acc), _mm512_load_ps(acc + kPairLanes), _mm512_load_ps(acc + 2 * kPairLanes)};
      __mmask16 act = _mm512_cmp_ps_mask(_mm512_load_ps(done), zero, _CMP_EQ_OQ);
      // composite_row's steps for each Gaussian in turn, the state in registers
      for (int g = 0; g < n; ++g) {
        const __m512 a = _mm512_load_ps(alpha[g] + 16 * r);
        const __mmask16 ok = _mm512_mask_cmp_ps_mask(act, a, amin, _CMP_GE_OQ);
        const __m512 w = composite16(a, ok, act, Tr, last, index[g]);
        for (int ch = 0; ch < 3; ++ch) rgb[ch] = _mm512_fmadd_ps(w, col[g][ch], rgb[ch]);
      }
      _mm512_store_ps(Tr_, Tr);
      _mm512_store_si512(last_, last);
      _mm512_store_ps(done, _mm512_mask_blend_ps(act, one, zero));
      for (int ch = 0; ch < 3; ++ch) _mm512_store_ps(acc + ch * kPairLanes, rgb[ch]);
      const unsigned fin = both & (((act & 0xFFu) == 0 ? 1u : 0u) | ((act >> 8) == 0 ? 2u : 0u));
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
