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

#if defined(__AVX512F__)
// Lane indices of the D = 3 interleave: output vector k, position p holds element e = 16 k + p, i.e.
// channel e % 3 of lane e / 3. First pass: channels 0 and 1 from rows r, g; second pass: channel 2 from
// row b, the rest kept.
struct Rgb16 {
  __m512i first[3], second[3];
  Rgb16() {
    alignas(64) int32_t f[16], s[16];
    for (int k = 0; k < 3; ++k) {
      for (int p = 0; p < 16; ++p) {
        const int e = 16 * k + p, ch = e % 3, j = e / 3;
        f[p] = ch == 0 ? j : 16 + j;
        s[p] = ch == 2 ? 16 + j : p;
      }
      first[k] = _mm512_load_si512(reinterpret_cast<const void*>(f));
      second[k] = _mm512_load_si512(reinterpret_cast<const void*>(s));
    }
  }
};
inline const Rgb16& rgb16() {
  static const Rgb16 t;
  return t;
}
#endif

// out[j * D + ch] = rows[ch * kLanes + j] for the kLanes lanes j (out: one full-row chunk's colours).
template <typename T>
inline void store_interleaved(const T* rows, int64_t D, T* out) {
  for (int j = 0; j < kLanes; ++j)
    for (int64_t ch = 0; ch < D; ++ch) out[j * D + ch] = rows[ch * kLanes + j];
}

// rows[ch * kLanes + j] = in[j * D + ch] (the inverse of store_interleaved).
template <typename T>
inline void load_interleaved(const T* in, int64_t D, T* rows) {
  for (int j = 0; j < kLanes; ++j)
    for (int64_t ch = 0; ch < D; ++ch) rows[ch * kLanes + j] = in[j * D + ch];
}

#if defined(__AVX512F__)
// The inverse permutes: output row ch, lane j takes element 3 j + ch of the 48 input values (vectors
// k = 0, 1, 2 of 16); first gather from vectors 0 and 1, then fill the rest from vector 2.
struct Rgb16Inv {
  __m512i first[3], second[3];
  Rgb16Inv() {
    alignas(64) int32_t f[16], s[16];
    for (int ch = 0; ch < 3; ++ch) {
      for (int j = 0; j < 16; ++j) {
        const int e = 3 * j + ch;  // in vector e / 16, position e % 16
        f[j] = e < 32 ? e : 0;
        s[j] = e < 32 ? j : 16 + (e - 32);
      }
      first[ch] = _mm512_load_si512(reinterpret_cast<const void*>(f));
      second[ch] = _mm512_load_si512(reinterpret_cast<const void*>(s));
    }
  }
};
inline const Rgb16Inv& rgb16_inv() {
  static const Rgb16Inv t;
  return t;
}

template <>
inline void load_interleaved<float>(const float* in, int64_t D, float* rows) {
  if (D != 3) {
    for (int j = 0; j < kLanes; ++j)
      for (int64_t ch = 0; ch < D; ++ch) rows[ch * kLanes + j] = in[j * D + ch];
    return;
  }
  const Rgb16Inv& t = rgb16_inv();
  const __m512 v0 = _mm512_loadu_ps(in), v1 = _mm512_loadu_ps(in + 16), v2 = _mm512_loadu_ps(in + 32);
  for (int ch = 0; ch < 3; ++ch) {
    const __m512 a = _mm512_permutex2var_ps(v0, t.first[ch], v1);
    _mm512_store_ps(rows + ch * kLanes, _mm512_permutex2var_ps(a, t.second[ch], v2));
  }
}

template <>
inline void store_interleaved<float>(const float* rows, int64_t D, float* out) {
  if (D != 3) {
    for (int j = 0; j < kLanes; ++j)
      for (int64_t ch = 0; ch < D; ++ch) out[j * D + ch] = rows[ch * kLanes + j];
    return;
  }
  const Rgb16& t = rgb16();
  const __m512 r = _mm512_load_ps(rows), g = _mm512_load_ps(rows + kLanes), b = _mm512_load_ps(rows + 2 * kLanes);
  for (int k = 0; k < 3; ++k) {
    const __m512 rg = _mm512_permutex2var_ps(r, t.first[k], g);
    _mm512_storeu_ps(out + 16 * k, _mm512_permutex2var_ps(rg, t.second[k], b));
  }
}
#endif

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
