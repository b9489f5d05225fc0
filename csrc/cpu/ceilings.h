// The loops of the roofline ceilings (csrc/cpu/ceilings.cpp). Raw pointers only;
// csrc/cpu/ceilings_cpu.cpp binds them to the ops.
#pragma once

#include <cstdint>

namespace gsw {
namespace ceilings {

// rows [T, kFmaAccumulators, kFmaLanes] (gsw/ceilings.h): row t's chains, acc = acc * a + b `iterations`
// times in registers, on thread t of a team of T (T at most the OpenMP thread count).
void fma_team(float* rows, int64_t T, float a, float b, int64_t iterations);

// STREAM's triad a[i] = b[i] + s * c[i], OpenMP static schedule.
void triad(float* a, const float* b, const float* c, float s, int64_t n);

}  // namespace ceilings
}  // namespace gsw
