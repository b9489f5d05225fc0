// Test driver of the saturation bound in SIMD lanes (csrc/cpu/tile_saturation_simd.h), built and run by
// tests/test_tile_saturation_lanes.py with the extension's compiler flags. stdin: a count and a tile
// size, then per case 6 + 3 + 16 numbers: a Gaussian (mx, my, conic a, b, c, opacity: its record is
// saturation_record's), the first tile column c, the tile row ty, the open tiles todo (bit k: tile
// c + k), and the four tiles' quarter bounds tb[16]. stdout: "none" when the build has no four-tile form
// (saturate_tiles4); else per case one line: the saturated tiles and the 16 bounds (32-bit patterns in
// hex) after saturate_tiles4, then the same after saturate_tile<float> on each open tile.
#include <cstdio>
#include <cstring>
#include <utility>

#include "float_bits.h"
#include "tile_saturation_simd.h"

int main() {
#if defined(GSW_SATURATION_TILES4)
  using namespace gsw::splat;
  int count = 0;
  float ts = 0;
  if (std::scanf("%d %f", &count, &ts) != 2) return 1;
  float edges[4];
  quarter_edges<float>(static_cast<int64_t>(ts), edges);
  for (int n = 0; n < count; ++n) {
    float in[6], tb4[16], tb1[16];
    int c = 0, ty = 0;
    unsigned todo = 0;
    for (float& x : in)
      if (std::scanf("%f", &x) != 1) return 1;
    if (std::scanf("%d %d %u", &c, &ty, &todo) != 3) return 1;
    for (float& x : tb4)
      if (std::scanf("%f", &x) != 1) return 1;
    std::memcpy(tb1, tb4, sizeof tb1);
    float g[6];
    saturation_record<float>(in[0], in[1], in[2], in[3], in[4], in[5], g);
    const float py = float(ty) * ts;
    const unsigned sat4 = cpu::saturate_tiles4(g, c, ts, py, edges, todo, tb4);
    unsigned sat1 = 0;
    for (int k = 0; k < 4; ++k)
      if ((todo >> k) & 1u)
        sat1 |= unsigned(cpu::saturate_tile<float>(g, float(c + k) * ts, py, edges, tb1 + 4 * k)) << k;
    for (const auto& [sat, tb] : {std::pair<unsigned, const float*>{sat4, tb4}, {sat1, tb1}}) {
      std::printf("%x ", sat);
      print_float_bits(tb, 16);
    }
    std::printf("\n");
  }
  return 0;
#else
  std::printf("none\n");
  return 0;
#endif
}
