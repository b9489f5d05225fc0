// Test driver of the chunk-reach tests of the CPU rasterizer (TileChunks in csrc/cpu/splat_tiles.h),
// built and run by tests/test_chunk_support.py with the extension's compiler flags. stdin: a count, a
// tile size and the image's width and height, then per case a tile (tx, ty) and a Gaussian (mx, my,
// conic a, b, c, opacity). stdout: first the number of lanes of a chunk; then per case one line: "-"
// when chunk_rows finds no row, else qlo, qhi, then in hex the chunks support_bits reaches and those
// mark_range flags (marked_bits), and whether covers_tile holds.
#include <cinttypes>
#include <cstdio>

#include "driver_input.h"
#include "splat_tiles.h"

int main() {
  using namespace gsw::splat::cpu;
  int count = 0;
  int64_t ts = 0, W = 0, H = 0;
  if (std::scanf("%d %" SCNd64 " %" SCNd64 " %" SCNd64, &count, &ts, &W, &H) != 4) return 1;
  const ChunkLayout layout(ts);
  if (layout.nchunks > 64) return 2;  // support_bits serves tiles of at most 64 chunks
  TileChunks tc(layout, ts);
  std::printf("%d\n", kLanes);
  for (int n = 0; n < count; ++n) {
    int64_t tx = 0, ty = 0;
    double g[6];
    if (!read_tile_gaussian(tx, ty, g)) return 1;
    tc.build(tx, ty, W, H);
    // the record's values in float, as gaussian_records keeps them
    const float mx = float(g[0]), my = float(g[1]);
    const Support su = support_of(float(g[2]), float(g[3]), float(g[4]), float(g[5]));
    int64_t qlo = 0, qhi = 0;
    if (!tc.chunk_rows(my, su, qlo, qhi)) {
      std::printf("-\n");
      continue;
    }
    const uint64_t fast = tc.support_bits(mx, my, su, qlo, qhi);
    tc.mark_range(mx, my, su, qlo, qhi);
    const uint64_t flags = tc.marked_bits(qlo, qhi);
    std::printf("%" PRId64 " %" PRId64 " %" PRIx64 " %" PRIx64 " %d\n", qlo, qhi, fast, flags,
                tc.covers_tile(mx, my, su) ? 1 : 0);
  }
  return 0;
}
