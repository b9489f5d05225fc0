// Test driver of the AVX2 rasterizer's alpha (csrc/cpu/splat_simd.h), built and run by
// tests/test_alpha_lanes.py with the extension's compiler flags. stdin: a count, then per case 6 + 32
// floats: a Gaussian's terms mx, my, A, B, C, L (BlendTerms<float>) and two chunks' pixel centres
// px[16], py[16] (chunk 0 in lanes 0-7, chunk 1 in 8-15). stdout: "none" when the build has no AVX2
// rasterizer or no AVX-512 (Alpha16 not compiled); else per case one line of 80 32-bit patterns in
// hex: the alphas of Alpha8 on each chunk (16), of Alpha16 on the pair (16) and of Alpha16's form
// without raw (16), then raw (opacity exp(-sigma)) from Alpha8 (16) and from Alpha16 (16).
#include <cstdio>
#include <cstring>

#include "float_bits.h"
#include "splat_simd.h"

int main() {
#if defined(GSW_RASTER_AVX2) && defined(__AVX512F__)
  using namespace gsw::splat::cpu;
  gsw::DenormalsOff ftz;  // as in the rasterizer's threads
  int count = 0;
  if (std::scanf("%d", &count) != 1) return 1;
  for (int c = 0; c < count; ++c) {
    float in[38];
    for (float& x : in)
      if (std::scanf("%f", &x) != 1) return 1;
    const BlendTerms<float> bt{in[2], in[3], in[4], in[5]};
    const Alpha8 g(in[0], in[1], bt);
    alignas(64) float px[16], py[16], out[5][16];  // alpha: Alpha8, Alpha16, Alpha16 (no raw); raw: Alpha8, Alpha16
    std::memcpy(px, in + 6, sizeof px);
    std::memcpy(py, in + 22, sizeof py);
    for (int h = 0; h < 16; h += 8) {
      __m256 raw;
      _mm256_store_ps(out[0] + h, g.alpha(_mm256_load_ps(px + h), _mm256_load_ps(py + h), raw));
      _mm256_store_ps(out[3] + h, raw);
    }
    const Alpha16 g2(g);
    __m512 raw;
    _mm512_store_ps(out[1], g2.alpha(Alpha16::pair(px, px + 8), Alpha16::pair(py, py + 8), raw));
    _mm512_store_ps(out[4], raw);
    _mm512_store_ps(out[2], g2.alpha(Alpha16::pair(px, px + 8), Alpha16::pair(py, py + 8)));
    for (const float* row : out) print_float_bits(row, 16);
    std::printf("\n");
  }
  return 0;
#else
  std::printf("none\n");
  return 0;
#endif
}
