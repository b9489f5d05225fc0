// Test driver of the rasterizer's alphas row by row (Alpha16::rows and rows_apply, csrc/cpu/splat_simd.h
// and splat_tiles.h), built and run by tests/test_alpha_lanes.py with the extension's compiler flags.
// stdin: a count and the image's width and height, then per case a tile (tx, ty) of 16 x 16 pixels and a
// Gaussian (mx, my, conic a, b, c, opacity). stdout: "none" when the build has no row recurrence (no
// AVX2 rasterizer or no AVX-512); else per case one line: "-" when chunk_rows finds no row or
// rows_apply does not hold, else r0 r1 and, for each row r0..r1, 80 32-bit patterns in hex: the
// alphas of rows<true> (16), of rows<false> (16), the raw values of rows<true> (16), then Alpha8's
// alphas (16) and raw values (16) at the same pixels.
#include <cinttypes>
#include <cstdio>

#include "driver_input.h"
#include "float_bits.h"
#include "splat_simd.h"
#include "splat_tiles.h"

int main() {
#if !defined(GSW_RASTER_AVX2) || !defined(__AVX512F__)
  std::printf("none\n");  // no row recurrence in this build
  return 0;
#else
  using namespace gsw::splat::cpu;
  gsw::DenormalsOff ftz;  // as in the rasterizer's threads
  int count = 0;
  int64_t W = 0, H = 0;
  if (std::scanf("%d %" SCNd64 " %" SCNd64, &count, &W, &H) != 3) return 1;
  const ChunkLayout layout(16);
  TileChunks tc(layout, 16);
  for (int n = 0; n < count; ++n) {
    int64_t tx = 0, ty = 0;
    double g[6];
    if (!read_tile_gaussian(tx, ty, g)) return 1;
    tc.build(tx, ty, W, H);
    // the record as gaussian_records builds it
    GaussianRecord<float> rec;
    rec.su = support_of(float(g[2]), float(g[3]), float(g[4]), float(g[5]));
    rec.mx = float(g[0]);
    rec.my = float(g[1]);
    rec.bt = BlendTerms<float>::of(float(g[2]), float(g[3]), float(g[4]), float(g[5]));
    int64_t qlo = 0, qhi = 0;
    if (!tc.chunk_rows(rec.my, rec.su, qlo, qhi) || !rows_apply(rec, tc, qlo, qhi)) {
      std::printf("-\n");
      continue;
    }
    const int64_t r0 = qlo / 2, r1 = qhi / 2;
    // pixel centres as the rasterizer's chunk state holds them
    alignas(64) float px[16], py[16][16], out[3][16 * 16];
    for (int j = 0; j < 16; ++j) px[j] = float(tc.geo(j / 8).x[j % 8]) + 0.5f;
    for (int r = 0; r < 16; ++r)
      for (int j = 0; j < 16; ++j) py[r][j] = float(tc.geo(2 * r + j / 8).y[j % 8]) + 0.5f;
    const Alpha8 g8(rec.mx, rec.my, rec.bt);
    const Alpha16 g16(g8);
    const auto pyr = [&](int64_t r) { return _mm512_load_ps(py[r]); };
    g16.rows<true>(_mm512_load_ps(px), pyr, r0, r1, rec.bt, out[0], out[2]);
    g16.rows<false>(_mm512_load_ps(px), pyr, r0, r1, rec.bt, out[1], nullptr);
    std::printf("%" PRId64 " %" PRId64 " ", r0, r1);
    for (int64_t r = r0; r <= r1; ++r) {
      alignas(64) float a8[16], raw8[16];
      for (int h = 0; h < 16; h += 8) {
        __m256 raw;
        _mm256_store_ps(a8 + h, g8.alpha(_mm256_load_ps(px + h), _mm256_load_ps(py[r] + h), raw));
        _mm256_store_ps(raw8 + h, raw);
      }
      for (int k = 0; k < 3; ++k) print_float_bits(out[k] + 16 * r, 16);
      print_float_bits(a8, 16);
      print_float_bits(raw8, 16);
    }
    std::printf("\n");
  }
  return 0;
#endif
}
