// The quarter bound of the lists cut at saturation (gsw/tile_saturation.h, saturate_quarters) in SIMD
// lanes, for the CPU tile intersection (splat_isect.cpp): one tile's four quarters in an SSE vector
// (saturate_tile), and where the CPU has AVX-512 four tiles of one row in a 512-bit vector
// (saturate_tiles4: each 128-bit lane one tile, the same operations in the same order, so the same
// bounds to the bit). The scalar template serves float64 and CPUs without SSE.
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "gsw/tile_saturation.h"

namespace gsw {
namespace splat {
namespace cpu {

// Multiplies tile tb[4]'s quarter bounds by 1 - a for Gaussian g (saturation_record) over the tile whose
// pixel corner is (px, py); whether all four are now below kSaturationT.
template <typename T>
inline bool saturate_tile(const T* g, T px, T py, const T* edges, T* tb) {
  return saturate_quarters<T>(g, px, py, edges, tb);
}
#if defined(__SSE2__)
template <>
inline bool saturate_tile<float>(const float* g, float px, float py, const float* edges, float* tb) {
  const __m128 one = _mm_set1_ps(1.0f);
  const __m128 dx = _mm_sub_ps(_mm_set1_ps(g[0]), _mm_add_ps(_mm_set1_ps(px), _mm_loadu_ps(edges)));
  const __m128 ax = _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(g[2]), dx), dx), bx = _mm_mul_ps(_mm_set1_ps(g[3]), dx);
  __m128 s[4];  // sigma at the four x edges, one vector per y edge
  for (int k = 0; k < 4; ++k) {
    const float dy = g[1] - (py + edges[k]);
    s[k] = _mm_add_ps(_mm_add_ps(ax, _mm_mul_ps(bx, _mm_set1_ps(dy))), _mm_set1_ps(g[4] * dy * dy));
  }
  __m128 r0 = _mm_max_ps(s[0], s[1]), r1 = _mm_max_ps(s[2], s[3]);  // each y half's larger edge
  r0 = _mm_max_ps(r0, _mm_shuffle_ps(r0, r0, _MM_SHUFFLE(2, 3, 0, 1)));  // and x half's: lanes 0 and 2
  r1 = _mm_max_ps(r1, _mm_shuffle_ps(r1, r1, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m128 m = _mm_shuffle_ps(r0, r1, _MM_SHUFFLE(2, 0, 2, 0));  // quarters in row-major order
  const __m128 x = _mm_mul_ps(_mm_set1_ps(0.25f), m);
  __m128 p = _mm_sub_ps(_mm_set1_ps(0.5f), _mm_mul_ps(x, _mm_set1_ps(1.0f / 6.0f)));
  p = _mm_sub_ps(one, _mm_mul_ps(x, p));
  p = _mm_sub_ps(one, _mm_mul_ps(x, p));
  p = _mm_mul_ps(p, p);
  const __m128 lower = _mm_and_ps(_mm_mul_ps(p, p), _mm_cmple_ps(x, _mm_set1_ps(1.5f)));
  __m128 a = _mm_min_ps(_mm_mul_ps(_mm_set1_ps(g[5]), lower), _mm_set1_ps(kAlphaMax));
  a = _mm_mul_ps(_mm_set1_ps(kSaturationMargin), a);
  const __m128 counted = _mm_cmpge_ps(a, _mm_set1_ps(kAlphaMin));
  const __m128 f = _mm_or_ps(_mm_and_ps(counted, _mm_sub_ps(one, a)), _mm_andnot_ps(counted, one));
  const __m128 t = _mm_mul_ps(_mm_loadu_ps(tb), f);
  _mm_storeu_ps(tb, t);
  return _mm_movemask_ps(_mm_cmplt_ps(t, _mm_set1_ps(kSaturationT))) == 15;
}
#endif

#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__BMI2__)
#define GSW_SATURATION_TILES4 1
// saturate_tile<float> on the four tiles c .. c + 3 of one row (pixel corners (c + k) ts, py) at once:
// tb points at tile c's four bounds, the next tiles' follow. Only the tiles in todo (bit k: tile c + k)
// are read and written. Returns the tiles (bit k) whose four bounds are now all below kSaturationT.
// (maskz forms with a full mask: GCC 12's plain max/min/convert/broadcast warn once inlined)
inline uint32_t saturate_tiles4(const float* g, int32_t c, float ts, float py, const float* edges, uint32_t todo,
                                float* tb) {
  // lane 4 k + e: tile c + k, edge e; a tile's pixel corner as saturate_tile's caller forms it, T(tx) ts
  const __m512i k = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i tx = _mm512_add_epi32(_mm512_set1_epi32(c), k);
  const __m512 px = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, tx), _mm512_set1_ps(ts));
  const __m512 e = _mm512_maskz_broadcast_f32x4(0xFFFF, _mm_loadu_ps(edges)), one = _mm512_set1_ps(1.0f);
  const __m512 dx = _mm512_sub_ps(_mm512_set1_ps(g[0]), _mm512_add_ps(px, e));
  const __m512 ax = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(g[2]), dx), dx);
  const __m512 bx = _mm512_mul_ps(_mm512_set1_ps(g[3]), dx);
  __m512 s[4];
  for (int j = 0; j < 4; ++j) {
    const float dy = g[1] - (py + edges[j]);
    s[j] = _mm512_add_ps(_mm512_add_ps(ax, _mm512_mul_ps(bx, _mm512_set1_ps(dy))), _mm512_set1_ps(g[4] * dy * dy));
  }
  __m512 r0 = _mm512_maskz_max_ps(0xFFFF, s[0], s[1]), r1 = _mm512_maskz_max_ps(0xFFFF, s[2], s[3]);
  r0 = _mm512_maskz_max_ps(0xFFFF, r0, _mm512_shuffle_ps(r0, r0, _MM_SHUFFLE(2, 3, 0, 1)));
  r1 = _mm512_maskz_max_ps(0xFFFF, r1, _mm512_shuffle_ps(r1, r1, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512 m = _mm512_shuffle_ps(r0, r1, _MM_SHUFFLE(2, 0, 2, 0));
  const __m512 x = _mm512_mul_ps(_mm512_set1_ps(0.25f), m);
  __m512 p = _mm512_sub_ps(_mm512_set1_ps(0.5f), _mm512_mul_ps(x, _mm512_set1_ps(1.0f / 6.0f)));
  p = _mm512_sub_ps(one, _mm512_mul_ps(x, p));
  p = _mm512_sub_ps(one, _mm512_mul_ps(x, p));
  p = _mm512_mul_ps(p, p);
  const __mmask16 near = _mm512_cmp_ps_mask(x, _mm512_set1_ps(1.5f), _CMP_LE_OS);
  const __m512 lower = _mm512_maskz_mov_ps(near, _mm512_mul_ps(p, p));
  __m512 a = _mm512_maskz_min_ps(0xFFFF, _mm512_mul_ps(_mm512_set1_ps(g[5]), lower), _mm512_set1_ps(kAlphaMax));
  a = _mm512_mul_ps(_mm512_set1_ps(kSaturationMargin), a);
  const __mmask16 counted = _mm512_cmp_ps_mask(a, _mm512_set1_ps(kAlphaMin), _CMP_GE_OS);
  const __m512 f = _mm512_mask_blend_ps(counted, one, _mm512_sub_ps(one, a));
  // each tile's bit spread over its four lanes
  const __mmask16 lanes = static_cast<__mmask16>(_pdep_u32(todo, 0x1111u) * 0xFu);
  const __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, tb), f);
  _mm512_mask_storeu_ps(tb, lanes, t);
  uint32_t below = _mm512_mask_cmp_ps_mask(lanes, t, _mm512_set1_ps(kSaturationT), _CMP_LT_OS);
  below &= below >> 1;
  below &= below >> 2;
  return _pext_u32(below, 0x1111u);
}
#endif

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
