// CPU kernels of the splat transforms: one fused pass over the splats per frame, OpenMP over blocks
// of kBlock Gaussians; each block is transposed to SoA in a small stack buffer so the per-Gaussian
// math (csrc/include/gsw/transforms.h) runs as SIMD across the Gaussians of the block. Bound to the op
// by transforms_cpu.cpp.
#include <omp.h>

#include <cstring>
#include <type_traits>

#include "gsw/transforms.h"
#include "huge_pages.h"
#include "transforms_cpu.h"
#include "transforms_simd.h"  // transpose16, rotate_band16 and <immintrin.h> on AVX-512 targets
#if defined(__SSE2__)
#include <immintrin.h>  // streaming stores, on every x86-64 target
#endif

namespace gsw {
namespace transforms {
namespace {

constexpr int64_t kBlock = 16;   // Gaussians per SH block (one AVX-512 float vector)
constexpr int64_t kChunk = 512;  // Gaussians per parallel task
constexpr int64_t kParallelWork = int64_t(1) << 18;  // below ~1 MB of traffic a call runs serially
constexpr int64_t kPrefetchBlocks = 4;  // SH blocks prefetched ahead
// SH outputs above this size bypass the caches: written through them, they would evict a large share
// of a last-level cache for lines that are not read again
constexpr int64_t kStreamBytes = int64_t(8) << 20;

// Means, quaternions and log-scales of `count` Gaussians of one frame (uniform case; every pointer at
// the first of them): one SIMD loop; the compiler turns the stride-3/4 interleaved accesses into
// permutes. Outputs may be the inputs (in-place): each iteration reads its Gaussian before writing it.
template <typename T>
void similarity_range(const T* A, const T* b, const T* qr, T log_s, const T* means, const T* quats,
                      const T* log_scales, T* om, T* oq, T* os, int64_t count) {
  const T a0 = A[0], a1 = A[1], a2 = A[2], a3 = A[3], a4 = A[4], a5 = A[5], a6 = A[6], a7 = A[7], a8 = A[8];
  const T Al[9] = {a0, a1, a2, a3, a4, a5, a6, a7, a8};
  const T bl[3] = {b[0], b[1], b[2]};
  const T ql[4] = {qr[0], qr[1], qr[2], qr[3]};
#pragma omp simd
  for (int64_t n = 0; n < count; ++n) {
    T x, y, z, w, qx, qy, qz;
    affine_point(Al, bl, means[3 * n], means[3 * n + 1], means[3 * n + 2], x, y, z);
    quat_mul(ql, quats[4 * n], quats[4 * n + 1], quats[4 * n + 2], quats[4 * n + 3], w, qx, qy, qz);
    const T s0 = log_scales[3 * n] + log_s, s1 = log_scales[3 * n + 1] + log_s, s2 = log_scales[3 * n + 2] + log_s;
    om[3 * n] = x, om[3 * n + 1] = y, om[3 * n + 2] = z;
    oq[4 * n] = w, oq[4 * n + 1] = qx, oq[4 * n + 2] = qy, oq[4 * n + 3] = qz;
    os[3 * n] = s0, os[3 * n + 1] = s1, os[3 * n + 2] = s2;
  }
}

#if defined(__SSE2__)
// similarity_range into outputs that are much larger than the caches and are not the inputs: blocks of
// kBlock Gaussians are transformed into L1-resident buffers and written out as whole cache lines with
// streaming stores, so the output lines are not read first (read-for-ownership: a third of the
// traffic of an SH-free transform). kBlock Gaussians fill whole 64-byte lines for float and double;
// out* must be 64-byte aligned (the caller checks). A tail of fewer than kBlock is stored normally.
template <typename T>
void similarity_range_streaming(const T* A, const T* b, const T* qr, T log_s, const T* means, const T* quats,
                                const T* log_scales, T* om, T* oq, T* os, int64_t count) {
  static_assert(3 * kBlock * sizeof(float) % 64 == 0, "a block of means fills whole cache lines");
  alignas(64) T bm[3 * kBlock], bq[4 * kBlock], bs[3 * kBlock];
  // the widest streaming store of the target: a cache line is one AVX-512, two AVX or four SSE2 stores
  auto stream = [](T* dst, const T* src, int64_t bytes) {
    char* d = reinterpret_cast<char*>(dst);
    const char* c = reinterpret_cast<const char*>(src);
#if defined(__AVX512F__)
    for (int64_t i = 0; i < bytes; i += 64)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_load_si512(c + i));
#elif defined(__AVX__)
    for (int64_t i = 0; i < bytes; i += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), _mm256_load_si256(reinterpret_cast<const __m256i*>(c + i)));
#else
    for (int64_t i = 0; i < bytes; i += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), _mm_load_si128(reinterpret_cast<const __m128i*>(c + i)));
#endif
  };
  int64_t n = 0;
  for (; n + kBlock <= count; n += kBlock) {
    similarity_range(A, b, qr, log_s, means + 3 * n, quats + 4 * n, log_scales + 3 * n, bm, bq, bs, kBlock);
    stream(om + 3 * n, bm, sizeof(bm));
    stream(oq + 4 * n, bq, sizeof(bq));
    stream(os + 3 * n, bs, sizeof(bs));
  }
  similarity_range(A, b, qr, log_s, means + 3 * n, quats + 4 * n, log_scales + 3 * n, om + 3 * n, oq + 4 * n,
                   os + 3 * n, count - n);
}
#endif

// Means (affine) and covariance re-decomposition of one block (general case; scalar, double inside).
template <typename T>
void general_block(const T* A, const T* b, const T* means, const T* quats, const T* log_scales, T* om, T* oq,
                   T* os, int64_t n0, int64_t count) {
  double Ad[9];
  for (int i = 0; i < 9; ++i) Ad[i] = A[i];
  for (int64_t n = n0; n < n0 + count; ++n) {
    affine_point(A, b, means[3 * n], means[3 * n + 1], means[3 * n + 2], om[3 * n], om[3 * n + 1], om[3 * n + 2]);
    const double qi[4] = {quats[4 * n], quats[4 * n + 1], quats[4 * n + 2], quats[4 * n + 3]};
    const double lsi[3] = {log_scales[3 * n], log_scales[3 * n + 1], log_scales[3 * n + 2]};
    double q[4], ls[3];
    general_covariance(Ad, qi, lsi, q, ls);
    for (int c = 0; c < 4; ++c) oq[4 * n + c] = static_cast<T>(q[c]);
    for (int c = 0; c < 3; ++c) os[3 * n + c] = static_cast<T>(ls[c]);
  }
}

// SH rest of one block of kBlock Gaussians: [count, K, 3] AoS -> SoA buf[3k + c][kBlock] -> bands
// rotated per channel as SIMD over the block's Gaussians -> back to AoS. Global memory is read and
// written sequentially; the scattered side is the L1-resident buffer.
template <typename T, int Deg>
void sh_block_generic(const T* D, const T* sh, T* osh, int64_t n0, int64_t count) {
  constexpr int K = (Deg + 1) * (Deg + 1) - 1;
  constexpr int E = 3 * K;  // values per Gaussian
  alignas(64) T in[E * kBlock], out[E * kBlock];
  const T* src = sh + n0 * E;
  for (int64_t j = 0; j < kBlock; ++j) {
    const T* g = src + (j < count ? j : 0) * E;  // padded lanes repeat the first Gaussian
    for (int e = 0; e < E; ++e) in[e * kBlock + j] = g[e];
  }
  for (int c = 0; c < 3; ++c) {
    if constexpr (Deg >= 1) rotate_band<T, 1, kBlock, 3 * kBlock>(D, K, in + c * kBlock, out + c * kBlock);
    if constexpr (Deg >= 2) rotate_band<T, 2, kBlock, 3 * kBlock>(D, K, in + c * kBlock, out + c * kBlock);
    if constexpr (Deg >= 3) rotate_band<T, 3, kBlock, 3 * kBlock>(D, K, in + c * kBlock, out + c * kBlock);
  }
  T* dst = osh + n0 * E;
  for (int64_t j = 0; j < count; ++j)
    for (int e = 0; e < E; ++e) dst[j * E + e] = out[e * kBlock + j];
}

#if defined(__AVX512F__)
// float, AVX-512: the same as sh_block_generic with the AoS <-> SoA moves done as 16x16 register
// transposes (masked loads/stores at the end of each Gaussian's E values).
template <int Deg, bool Full>
void sh_block_avx512_impl(const float* D, const float* sh, float* osh, int64_t n0, int64_t count_, bool streaming,
                          int64_t prefetch_end) {
  const int64_t count = Full ? 16 : count_;  // a compile-time trip count for full blocks
  static_assert(kBlock == 16, "the AVX-512 path transposes 16x16 tiles");
  constexpr int K = (Deg + 1) * (Deg + 1) - 1;
  constexpr int E = 3 * K;
  constexpr int tiles = (E + 15) / 16;
  alignas(64) float in[tiles * 16 * 16], out[tiles * 16 * 16];
  const float* src = sh + n0 * E;
  if (prefetch_end > n0 + kPrefetchBlocks * 16 + 16)  // the block kPrefetchBlocks ahead, into L2
    for (int e = 0; e < E; ++e) _mm_prefetch(reinterpret_cast<const char*>(src + (kPrefetchBlocks * 16 + e) * 16), _MM_HINT_T1);
  __m512 r[16];
  for (int t = 0; t < tiles; ++t) {
    const int cols = E - 16 * t < 16 ? E - 16 * t : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1u);
    for (int j = 0; j < 16; ++j) r[j] = _mm512_maskz_loadu_ps(mask, src + (j < count ? j : 0) * E + 16 * t);
    transpose16(r);
    for (int e = 0; e < 16; ++e) _mm512_store_ps(in + (16 * t + e) * 16, r[e]);
  }
  if constexpr (Deg >= 1) rotate_band16<1>(D, K, in, out);
  if constexpr (Deg >= 2) rotate_band16<2>(D, K, in, out);
  if constexpr (Deg >= 3) rotate_band16<3>(D, K, in, out);
  float* dst = osh + n0 * E;
  // a full block of output is 16 * E floats = E whole cache lines: when it is 64-byte aligned it is
  // assembled in L1 and written as whole lines (streaming stores, no read-for-ownership, when the
  // output is much larger than the caches); otherwise rows are stored with masked stores
  const bool whole_lines = count == 16 && (reinterpret_cast<uintptr_t>(dst) & 63) == 0;
  alignas(64) float aos[16 * E + 16];
  float* target = whole_lines ? aos : dst;
  for (int t = 0; t < tiles; ++t) {
    const int cols = E - 16 * t < 16 ? E - 16 * t : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1u);
    for (int e = 0; e < 16; ++e)  // rows past E are padding: rotate_band16 does not write them
      r[e] = 16 * t + e < E ? _mm512_load_ps(out + (16 * t + e) * 16) : _mm512_setzero_ps();
    transpose16(r);
    for (int j = 0; j < count; ++j) _mm512_mask_storeu_ps(target + j * E + 16 * t, mask, r[j]);
  }
  if (whole_lines && streaming) {
    for (int e = 0; e < E; ++e) _mm512_stream_ps(dst + 16 * e, _mm512_load_ps(aos + 16 * e));
  } else if (whole_lines) {
    for (int e = 0; e < E; ++e) _mm512_store_ps(dst + 16 * e, _mm512_load_ps(aos + 16 * e));
  }
}
template <int Deg>
void sh_block_avx512(const float* D, const float* sh, float* osh, int64_t n0, int64_t count, bool streaming,
                     int64_t prefetch_end) {
  if (count == 16)
    sh_block_avx512_impl<Deg, true>(D, sh, osh, n0, count, streaming, prefetch_end);
  else
    sh_block_avx512_impl<Deg, false>(D, sh, osh, n0, count, streaming, prefetch_end);
}
#endif

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
// float, AVX2: sh_block_generic with the AoS <-> SoA moves done as 8x8 register transposes, two groups
// of 8 Gaussians per block. A block's E values per Gaussian are contiguous in memory, 16 E floats in
// all, so rows are read and written as unaligned 8-float vectors across the Gaussians' boundaries:
// - reads past a row's last value land in the next Gaussian's values (ignored lanes); the last
//   block of the array, whose last row would read past its end, is first copied into a padded buffer;
// - the rows are assembled in an L1 buffer whose tiles are written last to first, so a tile's lanes
//   past a row's end are overwritten by the next row's first tile; the buffer then leaves as whole
//   vectors (streaming stores for outputs much larger than the caches, when 32-byte aligned).
template <int Deg>
void sh_block_avx2(const float* D, const float* sh, float* osh, int64_t n0, int64_t count, bool streaming,
                   int64_t n_total) {
  static_assert(kBlock == 16, "the AVX2 path transposes two 8x8 groups per block");
  constexpr int K = (Deg + 1) * (Deg + 1) - 1;
  constexpr int E = 3 * K;
  constexpr int tiles = (E + 7) / 8;
  alignas(64) float in[tiles * 8 * kBlock], out[tiles * 8 * kBlock];
  alignas(64) float aos[kBlock * E + 8];
  const float* src = sh + n0 * E;
  if (n0 + kBlock >= n_total) {  // the array's last block: rows may not be read past its end
    std::memset(aos, 0, sizeof(aos));
    std::memcpy(aos, src, sizeof(float) * count * E);
    src = aos;
  } else if (n0 + kBlock + kPrefetchBlocks * kBlock < n_total) {  // the block kPrefetchBlocks ahead, into L2
    for (int line = 0; line < E; ++line)  // a block is 16 E floats: E cache lines
      _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchBlocks * kBlock * E + 16 * line), _MM_HINT_T1);
  }
  __m256 r[8];
  for (int g = 0; g < 2; ++g)
    for (int t = 0; t < tiles; ++t) {
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + (8 * g + j) * E + 8 * t);
      transpose8(r);
      for (int e = 0; e < 8; ++e) _mm256_store_ps(in + (8 * t + e) * kBlock + 8 * g, r[e]);
    }
  for (int c = 0; c < 3; ++c) {
    if constexpr (Deg >= 1) rotate_band<float, 1, kBlock, 3 * kBlock>(D, K, in + c * kBlock, out + c * kBlock);
    if constexpr (Deg >= 2) rotate_band<float, 2, kBlock, 3 * kBlock>(D, K, in + c * kBlock, out + c * kBlock);
    if constexpr (Deg >= 3) rotate_band<float, 3, kBlock, 3 * kBlock>(D, K, in + c * kBlock, out + c * kBlock);
  }
  for (int g = 0; g < 2; ++g)
    for (int t = tiles - 1; t >= 0; --t) {
      for (int e = 0; e < 8; ++e) r[e] = _mm256_load_ps(out + (8 * t + e) * kBlock + 8 * g);
      transpose8(r);
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(aos + (8 * g + j) * E + 8 * t, r[j]);
    }
  float* dst = osh + n0 * E;
  if (count == kBlock) {
    const bool aligned = (reinterpret_cast<uintptr_t>(dst) & 31) == 0;
    if (streaming && aligned) {
      for (int v = 0; v < kBlock * E; v += 8) _mm256_stream_ps(dst + v, _mm256_load_ps(aos + v));
    } else {
      for (int v = 0; v < kBlock * E; v += 8) _mm256_storeu_ps(dst + v, _mm256_load_ps(aos + v));
    }
  } else {
    std::memcpy(dst, aos, sizeof(float) * count * E);
  }
}
#endif

template <typename T, int Deg>
void sh_block(const T* D, const T* sh, T* osh, int64_t n0, int64_t count, bool streaming, int64_t prefetch_end) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    sh_block_avx512<Deg>(D, sh, osh, n0, count, streaming, prefetch_end);
    return;
  }
#elif defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<T, float>) {
    sh_block_avx2<Deg>(D, sh, osh, n0, count, streaming, prefetch_end);
    return;
  }
#endif
  (void)streaming, (void)prefetch_end;
  sh_block_generic<T, Deg>(D, sh, osh, n0, count);
}

// Huge pages for an output of at least 8 MiB (advise_huge_pages): an output allocated for this call has
// no pages yet, and faulting them in 4 KiB at a time costs more than the transform itself.
void advise_huge_output(const void* p, int64_t bytes) {
  if (bytes >= int64_t(4 * gsw::cpu::kHugePage)) gsw::cpu::advise_huge_pages(p, static_cast<size_t>(bytes));
}

template <typename T, int Deg>
void run(const TransformParams<T>& p) {
  constexpr int K = (Deg + 1) * (Deg + 1) - 1;
  const int64_t F = p.F, N = p.N;
  const bool general = p.general;
  const int64_t nchunks = (N + kChunk - 1) / kChunk;
  const T* mu = p.means;
  const T* q = p.quats;
  const T* ls = p.log_scales;
  const T* sh = K ? p.sh_rest : nullptr;
  const T* aff = p.affine;
  const T* qr = p.quat_r;  // per frame (uniform case): A = s R(qr), lsr = log s
  const T* lsr = p.log_s;
  const T* D = K ? p.sh_rot : nullptr;
  T* om = p.out_means;
  T* oq = p.out_quats;
  T* os = p.out_log_scales;
  T* osh = K ? p.out_sh_rest : nullptr;
  const int64_t total = F * nchunks;
  const int64_t out_bytes = F * N * static_cast<int64_t>(sizeof(T));
  advise_huge_output(om, out_bytes * 3);
  advise_huge_output(oq, out_bytes * 4);
  advise_huge_output(os, out_bytes * 3);
  advise_huge_output(osh, out_bytes * K * 3);
  // outputs much larger than the last-level cache are written with streaming stores: the SH rest, and
  // (similarity path) means, quaternions and log-scales when they are not the inputs (in place, the
  // output lines are already in the cache) and 64-byte aligned
  const bool streaming = F * N * K * 3 * static_cast<int64_t>(sizeof(T)) > kStreamBytes;
  const auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 63) == 0; };
#if defined(__SSE2__)
  const bool stream_params = F * N * 10 * static_cast<int64_t>(sizeof(T)) > kStreamBytes && om != mu && oq != q &&
                             os != ls;
#else
  constexpr bool stream_params = false;  // the streaming stores are written for x86-64 targets only
#endif
  // small calls run on the calling thread: waking a thread team costs more than the work
  const int64_t work = F * N * (general ? 200 : 10 + 6 * K);  // ~floats moved (the SVD counts more)
#pragma omp parallel for schedule(static) if (work > kParallelWork && total > 1)
  for (int64_t t = 0; t < total; ++t) {
    DenormalsOff ftz;
    const int64_t f = t / nchunks, chunk = t - f * nchunks;
    const int64_t n0 = chunk * kChunk, n1 = N - n0 < kChunk ? N : n0 + kChunk;
    const T* A = aff + 12 * f;
    T* fm = om + f * N * 3;
    T* fq = oq + f * N * 4;
    T* fs = os + f * N * 3;
    if (general) {
      general_block(A, A + 9, mu, q, ls, fm, fq, fs, n0, n1 - n0);
    } else if (stream_params && aligned(fm + 3 * n0) && aligned(fq + 4 * n0) && aligned(fs + 3 * n0)) {
#if defined(__SSE2__)
      similarity_range_streaming(A, A + 9, qr + 4 * f, lsr[f], mu + 3 * n0, q + 4 * n0, ls + 3 * n0, fm + 3 * n0,
                                 fq + 4 * n0, fs + 3 * n0, n1 - n0);
#endif
    } else {
      similarity_range(A, A + 9, qr + 4 * f, lsr[f], mu + 3 * n0, q + 4 * n0, ls + 3 * n0, fm + 3 * n0,
                       fq + 4 * n0, fs + 3 * n0, n1 - n0);
    }
    if constexpr (K > 0) {
      for (int64_t b0 = n0; b0 < n1; b0 += kBlock)
        sh_block<T, Deg>(D + f * K * K, sh, osh + f * N * K * 3, b0, n1 - b0 < kBlock ? n1 - b0 : kBlock, streaming, N);
    }
  }
#if defined(__SSE2__)
  if (streaming || stream_params) _mm_sfence();  // order the streaming stores before the op returns
#endif
}

}  // namespace

template <typename T>
void transform_splats_cpu(const TransformParams<T>& p) {
  switch (p.K) {
    case 0: return run<T, 0>(p);
    case 3: return run<T, 1>(p);
    case 8: return run<T, 2>(p);
    default: return run<T, 3>(p);
  }
}

template void transform_splats_cpu<float>(const TransformParams<float>&);
template void transform_splats_cpu<double>(const TransformParams<double>&);

}  // namespace transforms
}  // namespace gsw
