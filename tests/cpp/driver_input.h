// Input of the test drivers (tests/cpp/*_driver.cpp) that take a tile and a Gaussian per case.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>

// Reads one case from stdin: a tile (tx, ty), then a Gaussian's six values g (mx, my, conic a, b, c,
// opacity). False when the input ends early or is malformed.
inline bool read_tile_gaussian(int64_t& tx, int64_t& ty, double g[6]) {
  if (std::scanf("%" SCNd64 " %" SCNd64, &tx, &ty) != 2) return false;
  for (int k = 0; k < 6; ++k)
    if (std::scanf("%lf", &g[k]) != 1) return false;
  return true;
}
