// Moving a chunk's per-channel lanes to and from the image (csrc/cpu/splat_rasterize_*.cpp): a chunk
// whose kLanes pixels are one contiguous run of an image row (ChunkGeom::full_row) reads and writes its
// per-pixel values with whole-vector loads and stores, and its [pixel][channel] colours by interleaving
// the D channel rows of kLanes values (D = 3: two permutes per vector under AVX-512). Other chunks (image
// borders, tiles narrower than kLanes) go pixel by pixel in the kernels.
#pragma once

#include <cstdint>

#include "splat_simd.h"

namespace gsw {
namespace splat {
namespace cpu {

#if defined(GSW_RASTER_AVX512)
// Lane indices of the D = 3 permutes, two passes each (_mm512_permutex2var_ps: index bit 4 picks the
// second operand).
//   to_pixels: output vector k, position p holds element e = 16 k + p of the pixels, i.e. channel e % 3
//     of lane e / 3; first channels 0 and 1 from rows r, g, then channel 2 from row b, the rest kept.
//   to_rows: output row ch, lane j takes element e = 3 j + ch of the 48 pixel values (vector e / 16);
//     first from vectors 0 and 1, then the rest from vector 2.
struct Rgb16 {
  __m512i pix_first[3], pix_second[3], row_first[3], row_second[3];
  Rgb16() {
    alignas(64) int32_t t[4][16];
    for (int k = 0; k < 3; ++k) {
      for (int p = 0; p < 16; ++p) {
        const int e = 16 * k + p, ch = e % 3, j = e / 3;
        t[0][p] = ch == 0 ? j : 16 + j;
        t[1][p] = ch == 2 ? 16 + j : p;
        const int f = 3 * p + k;  // to_rows: row k (the channel), lane p
        t[2][p] = f < 32 ? f : 0;
        t[3][p] = f < 32 ? p : 16 + (f - 32);
      }
      __m512i* dst[4] = {&pix_first[k], &pix_second[k], &row_first[k], &row_second[k]};
      for (int m = 0; m < 4; ++m) *dst[m] = _mm512_load_si512(reinterpret_cast<const void*>(t[m]));
    }
  }
};
inline const Rgb16& rgb16() {
  static const Rgb16 t;
  return t;
}
#endif

#if defined(GSW_RASTER_AVX2)
// All-ones int32 lanes where bit p of bits is set.
inline __m256i lane_mask(int bits) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(bits), bit), bit);
}
#endif

// The element moves of store_interleaved and load_interleaved below, for any T and D: out[j * D + ch]
// = rows[ch * stride + j] (to_pixels), or the reverse.
template <typename T, bool to_pixels>
inline void move_interleaved(T* rows, int64_t D, T* pixels, int64_t stride = kLanes) {
  for (int j = 0; j < kLanes; ++j)
    for (int64_t ch = 0; ch < D; ++ch) {
      if (to_pixels)
        pixels[j * D + ch] = rows[ch * stride + j];
      else
        rows[ch * stride + j] = pixels[j * D + ch];
    }
}

// out[j * D + ch] = rows[ch * stride + j] for the kLanes lanes j (out: one full-row chunk's colours;
// rows: D rows of kLanes values, stride apart, aligned as a LaneBlock).
template <typename T>
inline void store_interleaved(const T* rows, int64_t D, T* out, int64_t stride = kLanes) {
  move_interleaved<T, true>(const_cast<T*>(rows), D, out, stride);
}

// rows[ch * kLanes + j] = in[j * D + ch] (the inverse of store_interleaved).
template <typename T>
inline void load_interleaved(const T* in, int64_t D, T* rows) {
  move_interleaved<T, false>(rows, D, const_cast<T*>(in));
}

#if defined(GSW_RASTER_AVX512)
template <>
inline void load_interleaved<float>(const float* in, int64_t D, float* rows) {
  if (D != 3) return move_interleaved<float, false>(rows, D, const_cast<float*>(in));
  const Rgb16& t = rgb16();
  const __m512 v0 = _mm512_loadu_ps(in), v1 = _mm512_loadu_ps(in + 16), v2 = _mm512_loadu_ps(in + 32);
  for (int ch = 0; ch < 3; ++ch) {
    const __m512 a = _mm512_permutex2var_ps(v0, t.row_first[ch], v1);
    _mm512_store_ps(rows + ch * kLanes, _mm512_permutex2var_ps(a, t.row_second[ch], v2));
  }
}

template <>
inline void store_interleaved<float>(const float* rows, int64_t D, float* out, int64_t stride) {
  if (D != 3) return move_interleaved<float, true>(const_cast<float*>(rows), D, out, stride);
  const Rgb16& t = rgb16();
  const __m512 r = _mm512_load_ps(rows), g = _mm512_load_ps(rows + stride), b = _mm512_load_ps(rows + 2 * stride);
  for (int k = 0; k < 3; ++k) {
    const __m512 rg = _mm512_permutex2var_ps(r, t.pix_first[k], g);
    _mm512_storeu_ps(out + 16 * k, _mm512_permutex2var_ps(rg, t.pix_second[k], b));
  }
}
#elif defined(GSW_RASTER_AVX2)
// D = 3 on AVX2 (chunks of 8 lanes): the 24 values of 8 RGB pixels are three vectors; each output
// vector gathers its lanes from the three inputs by one permute of each and two blends.
static_assert(kLanes == 8, "the AVX2 interleaving moves chunks of 8 lanes");

template <>
inline void store_interleaved<float>(const float* rows, int64_t D, float* out, int64_t stride) {
  if (D != 3) return move_interleaved<float, true>(const_cast<float*>(rows), D, out, stride);
  const __m256 r = _mm256_load_ps(rows), g = _mm256_load_ps(rows + stride), b = _mm256_load_ps(rows + 2 * stride);
  // output vector k, position p holds element e = 8 k + p: channel e % 3 of lane e / 3
  const __m256i ir[3] = {_mm256_setr_epi32(0, 0, 0, 1, 0, 0, 2, 0), _mm256_setr_epi32(0, 3, 0, 0, 4, 0, 0, 5),
                         _mm256_setr_epi32(0, 0, 6, 0, 0, 7, 0, 0)};
  const __m256i ig[3] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 0, 0, 2), _mm256_setr_epi32(0, 0, 3, 0, 0, 4, 0, 0),
                         _mm256_setr_epi32(5, 0, 0, 6, 0, 0, 7, 0)};
  const __m256i ib[3] = {_mm256_setr_epi32(0, 0, 0, 0, 0, 1, 0, 0), _mm256_setr_epi32(2, 0, 0, 3, 0, 0, 4, 0),
                         _mm256_setr_epi32(0, 5, 0, 0, 6, 0, 0, 7)};
  // lanes of channel 1 (g) and 2 (b) in output vector k: bit p set where (8 k + p) % 3 is that channel
  constexpr int kG[3] = {0x92, 0x24, 0x49}, kB[3] = {0x24, 0x49, 0x92};
  for (int k = 0; k < 3; ++k) {
    const __m256 rg = _mm256_blendv_ps(_mm256_permutevar8x32_ps(r, ir[k]), _mm256_permutevar8x32_ps(g, ig[k]),
                                       _mm256_castsi256_ps(lane_mask(kG[k])));
    const __m256 bv = _mm256_permutevar8x32_ps(b, ib[k]);
    _mm256_storeu_ps(out + 8 * k, _mm256_blendv_ps(rg, bv, _mm256_castsi256_ps(lane_mask(kB[k]))));
  }
}

template <>
inline void load_interleaved<float>(const float* in, int64_t D, float* rows) {
  if (D != 3) return move_interleaved<float, false>(rows, D, const_cast<float*>(in));
  const __m256 v0 = _mm256_loadu_ps(in), v1 = _mm256_loadu_ps(in + 8), v2 = _mm256_loadu_ps(in + 16);
  // channel ch sits at positions p with (p + 8 k) % 3 == ch of vector k: blend the three so that each
  // position holds its channel's value from the vector that has it there, then one permute to lane order
  constexpr int kFrom1[3] = {0x92, 0x24, 0x49}, kFrom2[3] = {0x24, 0x49, 0x92};
  const __m256i idx[3] = {_mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5), _mm256_setr_epi32(1, 4, 7, 2, 5, 0, 3, 6),
                          _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7)};
  for (int ch = 0; ch < 3; ++ch) {
    const __m256 m = _mm256_blendv_ps(_mm256_blendv_ps(v0, v1, _mm256_castsi256_ps(lane_mask(kFrom1[ch]))), v2,
                                      _mm256_castsi256_ps(lane_mask(kFrom2[ch])));
    _mm256_store_ps(rows + ch * kLanes, _mm256_permutevar8x32_ps(m, idx[ch]));
  }
}
#endif

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
