// Output of the test drivers (tests/cpp/*_driver.cpp): float32 values as their 32-bit patterns in hex,
// which the Python tests read back to compare results bit for bit.
#pragma once

#include <cstdio>
#include <cstring>

// Prints the patterns of v[0 .. n), each followed by a space.
inline void print_float_bits(const float* v, int n) {
  for (int k = 0; k < n; ++k) {
    unsigned bits;
    std::memcpy(&bits, v + k, 4);
    std::printf("%08x ", bits);
  }
}
