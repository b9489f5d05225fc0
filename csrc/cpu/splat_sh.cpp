// CPU kernels of the 3DGS rasterizer, stage 2: spherical harmonics to colour per camera and Gaussian,
// and its analytic backward, for one [N,K,3] block of coefficients or 3DGS's split (sh0, shN) pair. The
// per-Gaussian math is gsw/sh.h, shared with the CUDA kernels (csrc/cuda/splat_sh.cu); bound to the ops
// by splat_cpu.cpp.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "gsw/parallel.h"
#include "gsw/sh.h"
#include "scan_values.h"
#include "splat.h"

namespace gsw {
namespace splat {
namespace cpu {
namespace {

// Camera-Gaussian pairs per thread below which the SH passes wake no further thread.
constexpr int64_t kMinShPerThread = 2048;

// Calls fn(std::integral_constant<int, degree>{}): the SH loops then have fixed trip counts and the
// loops over Gaussians below vectorize.
template <typename Fn>
void with_sh_degree(int64_t degree, Fn&& fn) {
  switch (degree) {
    case 0: return fn(std::integral_constant<int, 0>{});
    case 1: return fn(std::integral_constant<int, 1>{});
    case 2: return fn(std::integral_constant<int, 2>{});
    default: return fn(std::integral_constant<int, 3>{});
  }
}

#if defined(__AVX512F__)
// r[0..16) rows of a 16 x 16 float matrix -> its columns, in place (unpacks, then in-lane shuffles,
// then 128-bit lane shuffles: 64 permutes). Mask forms with a full mask: GCC 12 warns on the plain
// forms' undefined pass-through operand.
inline void transpose16(__m512* r) {
  __m512 a[16], b[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_maskz_unpacklo_ps(0xFFFF, r[i], r[i + 1]);
    a[i + 1] = _mm512_maskz_unpackhi_ps(0xFFFF, r[i], r[i + 1]);
  }
  // b[4 g + c], 128-bit lane q: rows 4 g .. 4 g + 3 of column 4 q + c
  for (int g = 0; g < 16; g += 4) {
    b[g] = _mm512_maskz_shuffle_ps(0xFFFF, a[g], a[g + 2], 0x44);
    b[g + 1] = _mm512_maskz_shuffle_ps(0xFFFF, a[g], a[g + 2], 0xEE);
    b[g + 2] = _mm512_maskz_shuffle_ps(0xFFFF, a[g + 1], a[g + 3], 0x44);
    b[g + 3] = _mm512_maskz_shuffle_ps(0xFFFF, a[g + 1], a[g + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 e0 = _mm512_maskz_shuffle_f32x4(0xFFFF, b[c], b[4 + c], 0x44);
    const __m512 e1 = _mm512_maskz_shuffle_f32x4(0xFFFF, b[c], b[4 + c], 0xEE);
    const __m512 e2 = _mm512_maskz_shuffle_f32x4(0xFFFF, b[8 + c], b[12 + c], 0x44);
    const __m512 e3 = _mm512_maskz_shuffle_f32x4(0xFFFF, b[8 + c], b[12 + c], 0xEE);
    r[c] = _mm512_maskz_shuffle_f32x4(0xFFFF, e0, e2, 0x88);
    r[4 + c] = _mm512_maskz_shuffle_f32x4(0xFFFF, e0, e2, 0xDD);
    r[8 + c] = _mm512_maskz_shuffle_f32x4(0xFFFF, e1, e3, 0x88);
    r[12 + c] = _mm512_maskz_shuffle_f32x4(0xFFFF, e1, e3, 0xDD);
  }
}

// Degree 3, float: the colours of 16 Gaussians as lanes. A per-Gaussian SIMD loop reads each of their
// 48 coefficients with single-lane loads (rows 48 or 45 floats apart), which cost more than the
// arithmetic. Here the 45 coefficients of rows 1.. are three contiguous loads per Gaussian, turned
// into one vector per coefficient by three 16 x 16 transposes; the DC row and the direction (three
// values a Gaussian) are gathered. The sums are 16-lane FMAs in the order of sh_to_color_forward, and
// the three colour vectors are interleaved back by permutes.
struct Sh3Colors {
  __m512i row0, dir, pick[3], mix[3];
  __mmask16 from_b[3];
  explicit Sh3Colors(const ShRows<float>& co) {
    alignas(64) int32_t t[16];
    auto load = [&] { return _mm512_load_si512(reinterpret_cast<const void*>(t)); };
    for (int l = 0; l < 16; ++l) t[l] = static_cast<int32_t>(l * co.s0);
    row0 = load();
    for (int l = 0; l < 16; ++l) t[l] = 3 * l;
    dir = load();
    // output vector j, element p: value 16 j + p of the interleaved colours, lane e / 3, channel e % 3;
    // red and green come from one two-source permute (index bit 4 picks green), blue from a second
    for (int j = 0; j < 3; ++j) {
      unsigned m = 0;
      for (int p = 0; p < 16; ++p) {
        const int e = 16 * j + p, lane = e / 3, ch = e % 3;
        t[p] = ch == 1 ? 16 + lane : lane;
        if (ch == 2) m |= 1u << p;
      }
      pick[j] = load();
      for (int p = 0; p < 16; ++p) t[p] = (16 * j + p) / 3;
      mix[j] = load();
      from_b[j] = static_cast<__mmask16>(m);
    }
  }

  // Colours of Gaussians n0 .. n0 + 16 for one camera (d, o: that camera's directions and colours).
  void block(const ShRows<float>& co, const float* d, float* o, int64_t n0) const {
    const float *c0 = co.c0 + n0 * co.s0, *cr = co.cr + n0 * co.sr;
    auto gather = [](__m512i at, const float* base) {
      return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xFFFF, at, base, 4);
    };
    // rest[16 j + p], lane l: value 16 j + p of Gaussian n0 + l's rows 1..15 (45 values)
    __m512 rest[48];
    for (int j = 0; j < 3; ++j) {
      const __mmask16 take = j < 2 ? __mmask16(0xFFFF) : __mmask16(0x1FFF);  // 16, 16, then 13 values
      for (int l = 0; l < 16; ++l) rest[16 * j + l] = _mm512_maskz_loadu_ps(take, cr + l * co.sr + 16 * j);
      transpose16(rest + 16 * j);
    }
    const __m512 x = gather(dir, d + 3 * n0), y = gather(dir, d + 3 * n0 + 1), z = gather(dir, d + 3 * n0 + 2);
    __m512 n = _mm512_maskz_sqrt_ps(0xFFFF, _mm512_fmadd_ps(x, x, _mm512_fmadd_ps(y, y, _mm512_mul_ps(z, z))));
    n = _mm512_maskz_max_ps(0xFFFF, n, _mm512_set1_ps(1e-12f));
    alignas(64) float b[16][16];
    {
      alignas(64) float u[3][16];
      _mm512_store_ps(u[0], _mm512_div_ps(x, n));
      _mm512_store_ps(u[1], _mm512_div_ps(y, n));
      _mm512_store_ps(u[2], _mm512_div_ps(z, n));
#pragma omp simd
      for (int l = 0; l < 16; ++l) sh_basis<float, 16>(3, u[0][l], u[1][l], u[2][l], &b[0][l]);
    }
    __m512 col[3];
    for (int ch = 0; ch < 3; ++ch) {
      __m512 s = _mm512_mul_ps(_mm512_load_ps(b[0]), gather(row0, c0 + ch));
      for (int k = 1; k < 16; ++k) s = _mm512_fmadd_ps(_mm512_load_ps(b[k]), rest[3 * (k - 1) + ch], s);
      col[ch] = _mm512_maskz_max_ps(0xFFFF, _mm512_add_ps(s, _mm512_set1_ps(0.5f)), _mm512_setzero_ps());
    }
    float* out = o + 3 * n0;
    for (int j = 0; j < 3; ++j) {
      const __m512 rg = _mm512_permutex2var_ps(col[0], pick[j], col[1]);
      _mm512_storeu_ps(out + 16 * j, _mm512_mask_permutexvar_ps(rg, from_b[j], mix[j], col[2]));
    }
  }
};
#endif

// Gaussians that a checking forward scans and then colours at a time: a multiple of the 16-Gaussian
// blocks, whose coefficients (192 bytes a Gaussian at degree 3 in float) stay in the L1 cache between
// the scan and the colours, so the check reads memory once.
constexpr int64_t kScanBlock = 128;

// Stands in for Sh3Colors where there are no 16-Gaussian blocks (never called).
struct NoBlocks {
  template <typename Rows>
  explicit NoBlocks(const Rows&) {}
  template <typename Rows, typename T>
  void block(const Rows&, const T*, T*, int64_t) const {}
};

#if defined(__AVX512F__)
// Degree 3, float: the coefficient gradients b[i] v[ch] of 16 Gaussians, from their basis B[i][l] and
// colour gradients V[ch][l] (lane l = Gaussian n0 + l), written Gaussian by Gaussian as whole vectors:
// its 48 values (3 at g0 + l s0, 45 at gr + l sr) are three 16-lane products of the basis and the
// colour gradient spread by permutes, instead of the 48 single-lane stores a per-Gaussian SIMD loop
// makes (those stores, not the arithmetic, would dominate the degree-3 backward).
struct Sh3Writer {
  __m512i col, bidx[3], vidx[3];
  Sh3Writer() {
    alignas(64) int32_t t[16];
    for (int k = 0; k < 16; ++k) t[k] = 16 * k;  // B's column: basis k of lane l at 16 k + l
    col = _mm512_load_si512(reinterpret_cast<const void*>(t));
    for (int j = 0; j < 3; ++j) {  // output vector j of the 45 rest values: element e = 16 j + p
      for (int p = 0; p < 16; ++p) t[p] = std::min(15, 1 + (16 * j + p) / 3);
      bidx[j] = _mm512_load_si512(reinterpret_cast<const void*>(t));
      for (int p = 0; p < 16; ++p) t[p] = (16 * j + p) % 3;
      vidx[j] = _mm512_load_si512(reinterpret_cast<const void*>(t));
    }
  }
  void write(const float* B, const float* V, float* g0, int64_t s0, float* gr, int64_t sr) const {
    for (int l = 0; l < 16; ++l) {
      // mask forms with a full mask: GCC 12 warns on the plain forms' undefined pass-through operand
      const __m512i at = _mm512_add_epi32(col, _mm512_set1_epi32(l));
      const __m512 b = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xFFFF, at, B, 4);
      const __m512 v = _mm512_setr_ps(V[l], V[16 + l], V[32 + l], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
      _mm512_mask_storeu_ps(g0 + l * s0, 0x7, _mm512_mul_ps(_mm512_set1_ps(B[l]), v));
      float* o = gr + l * sr;
      for (int j = 0; j < 3; ++j) {
        const __m512 prod = _mm512_mul_ps(_mm512_maskz_permutexvar_ps(0xFFFF, bidx[j], b),
                                          _mm512_maskz_permutexvar_ps(0xFFFF, vidx[j], v));
        _mm512_mask_storeu_ps(o + 16 * j, j < 2 ? __mmask16(0xFFFF) : __mmask16(0x1FFF), prod);
      }
    }
  }
};

// sh_backward_core (degree 3) of Gaussians n0 .. n0 + 16 as SIMD lanes: adds their direction gradients
// to gd and leaves their basis in B[16 i + l] and colour gradients in V[16 ch + l] (lane l: n0 + l), the
// core writing them with stride 16 itself (GCC does not vectorize the loop when they are copied out of
// per-lane arrays).
inline void sh3_core_block(const ShRows<float>& co, const float* __restrict d, const float* __restrict vc,
                           float* __restrict gd, int64_t n0, float* __restrict B, float* __restrict V) {
  constexpr std::integral_constant<int, 3> deg{};
  const float *c0 = co.c0 + n0 * co.s0, *cr = co.cr + n0 * co.sr;
  const int64_t s0 = co.s0, sr = co.sr;
  d += 3 * n0, vc += 3 * n0, gd += 3 * n0;
#pragma omp simd
  for (int64_t l = 0; l < 16; ++l) {
    sh_backward_core<float, 16>(deg, c0 + l * s0, cr + l * sr, d + 3 * l, vc + 3 * l, B + l, V + l, gd + 3 * l);
  }
}
#endif

}  // namespace

template <typename T>
void sh_forward_kernel(int64_t degree, ShRows<T> co, const T* d, T* o, int64_t C, int64_t N, const ShScan<T>* scan,
                       bool* finite_a, bool* finite_b) {
  bool fa = true, fb = true;
  with_sh_degree(degree, [&](auto deg) {
#pragma omp parallel num_threads(threads_for(C * N, kMinShPerThread)) reduction(&& : fa, fb)
    {
#if defined(__AVX512F__)
      // degree 3, float, DC rows close enough for 32-bit gather offsets: blocks of 16 Gaussians
      constexpr bool kBlocks = std::is_same_v<T, float> && decltype(deg)::value == 3;
      const bool blocks = kBlocks && 16 * co.s0 < (int64_t(1) << 31);
      const std::conditional_t<kBlocks, Sh3Colors, NoBlocks> lanes(co);
#endif
      // the colours of Gaussians [n0, n1) seen from camera c
      const auto colours = [&](int64_t c, int64_t n0, int64_t n1) {
        const T* dc = d + 3 * c * N;
        T* oc = o + 3 * c * N;
#if defined(__AVX512F__)
        if constexpr (kBlocks)
          if (blocks)
            for (; n0 + 16 <= n1; n0 += 16) lanes.block(co, dc, oc, n0);
#endif
#pragma omp simd
        for (int64_t n = n0; n < n1; ++n)
          sh_to_color_forward<T>(deg, co.c0 + n * co.s0, co.cr + n * co.sr, dc + 3 * n, oc + 3 * n);
      };
      const auto scan_block = [&](int64_t n0, int64_t n1) {
        fa = fa && value_stats(scan->a + n0 * scan->sa, (n1 - n0) * scan->sa).nonfinite == 0;
        fb = fb && (scan->b == nullptr || value_stats(scan->b + n0 * scan->sb, (n1 - n0) * scan->sb).nonfinite == 0);
      };
      scan_then_compute(thread_range(N), C, scan != nullptr, kScanBlock, scan_block, colours);
    }
  });
  if (finite_a != nullptr) *finite_a = fa;
  if (finite_b != nullptr) *finite_b = fb;
}

template <typename T>
void sh_backward_kernel(int64_t degree, ShRows<T> co, const T* d, const T* vc, T* g0, T* gr, T* gd, int64_t C,
                        int64_t N) {
  with_sh_degree(degree, [&](auto deg) {
#pragma omp parallel num_threads(threads_for(C * N, kMinShPerThread))
    {
      const Range share = thread_range(N);
      int64_t n0 = share.begin;
      const int64_t n1 = share.end;
#if defined(__AVX512F__)
      // the first camera, degree 3, float: blocks of 16 Gaussians, core per lane, then Sh3Writer
      if constexpr (std::is_same_v<T, float> && decltype(deg)::value == 3) {
        static const Sh3Writer writer;
        alignas(64) float B[16 * 16], V[3 * 16];
        for (; n0 + 16 <= n1; n0 += 16) {
          sh3_core_block(co, d, vc, gd, n0, B, V);
          writer.write(B, V, g0 + n0 * co.s0, co.s0, gr + n0 * co.sr, co.sr);
        }
      }
#endif
      // cameras in turn (a Gaussian's coefficient rows belong to one lane): the first writes the rows
      // the degree uses (those of [n0, n1) not written above), the others add to them
#pragma omp simd
      for (int64_t n = n0; n < n1; ++n)
        sh_to_color_backward<T, true>(deg, co.c0 + n * co.s0, co.cr + n * co.sr, d + 3 * n, vc + 3 * n,
                                      g0 + n * co.s0, gr + n * co.sr, gd + 3 * n);
      for (int64_t c = 1; c < C; ++c) {
        const int64_t off = 3 * c * N;
#pragma omp simd
        for (int64_t n = share.begin; n < n1; ++n)
          sh_to_color_backward<T>(deg, co.c0 + n * co.s0, co.cr + n * co.sr, d + off + 3 * n, vc + off + 3 * n,
                                  g0 + n * co.s0, gr + n * co.sr, gd + off + 3 * n);
      }
    }
  });
}

template void sh_forward_kernel<float>(int64_t, ShRows<float>, const float*, float*, int64_t, int64_t,
                                       const ShScan<float>*, bool*, bool*);
template void sh_forward_kernel<double>(int64_t, ShRows<double>, const double*, double*, int64_t, int64_t,
                                        const ShScan<double>*, bool*, bool*);
template void sh_backward_kernel<float>(int64_t, ShRows<float>, const float*, const float*, float*, float*, float*,
                                        int64_t, int64_t);
template void sh_backward_kernel<double>(int64_t, ShRows<double>, const double*, const double*, double*, double*,
                                         double*, int64_t, int64_t);

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
