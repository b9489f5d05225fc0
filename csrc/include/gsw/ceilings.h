// Shape of the FMA-throughput loop of the roofline ceilings (csrc/cpu/ceilings.cpp): each thread runs
// kFmaAccumulators independent chains of kFmaLanes float32 lanes, the width of the SIMD registers this
// build's kernels use. The module gsworkbench._C reports both (fma_lanes, fma_accumulators), so Python
// shapes the op's input and counts its flops.
#pragma once

namespace gsw {
namespace ceilings {

// Enough independent chains to cover an FMA latency of 4-6 cycles on two FMA pipes.
constexpr int kFmaAccumulators = 12;
#if defined(__AVX512F__)
constexpr int kFmaLanes = 16;
constexpr const char* kFmaIsa = "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kFmaLanes = 8;
constexpr const char* kFmaIsa = "avx2-fma";
#else
constexpr int kFmaLanes = 8;
constexpr const char* kFmaIsa = "generic";
#endif

}  // namespace ceilings
}  // namespace gsw
