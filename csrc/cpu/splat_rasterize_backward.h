// The rasterize backward of one Gaussian over the chunks of one tile (csrc/cpu/splat_rasterize_backward.cpp
// walks each tile's list back to front and calls backward_gaussian per Gaussian). Per lane, a chunk
// undoes the Gaussian's blend: the transmittance before it is recovered by division by (1 - alpha),
// and the colour composited behind it enters only as its dot product with dL/d(colour out), kept in sb
// (one value per pixel, not D). Generic lane loops (any target) and, for float, a twin under GSW_RASTER_AVX512
// with the lane masks in mask registers and one under GSW_RASTER_AVX2 (splat_simd.h). Per-pixel
// math: gsw/blend.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "gsw/blend.h"
#include "splat_simd.h"
#include "splat_tiles.h"

namespace gsw {
namespace splat {
namespace cpu {

// Per-lane state of a chunk in the backward (all pointers to kLanes values, or D * kLanes for the
// per-channel rows): pixel centres, running transmittance Tr (final T at the start, T before the
// current Gaussian after it), final T times dL/d(alpha out) (their only use is that product), last
// contributor, dL/d(colour out), and sb, the dot product of dL/d(colour out) with the colour
// composited behind the current Gaussian (per unit of its transmittance): the only use of that colour
// is dL/dalpha's sum over channels of (colour - behind / (1 - alpha)) dL/d(colour out), so the dot
// product is carried instead of D rows.
template <typename T>
struct ChunkBwd {
  const T *px, *py;
  T* Tr;
  const T* tva;
  const int32_t* last;
  const T* vr;
  T* sb;
};

// One Gaussian's per-lane gradient sums over the chunks of a tile.
template <typename T>
struct alignas(64) GaussGrad {
  T mx[kLanes], my[kLanes], ca[kLanes], cb[kLanes], cc[kLanes], op[kLanes];
  T amx[kLanes], amy[kLanes];  // sums of |per-pixel dL/dmean2d| (absgrad)
};

// The Gaussian's parameters and colour (D values), and its blend terms (gaussian_records).
template <typename T>
struct GaussIn {
  T mx, my, ca, cb, cc, op;
  int32_t kk;  // its index in the tile list (fid)
  const T* col;
  int64_t D;
  BlendTerms<T> bt;
  int64_t row0, row1;  // its alphas row by row over rows row0..row1 (rows_apply; row0 < 0: chunk by chunk)
};

// Gradients of alpha (given dL/dalpha vA per lane, zero where clamped) into gg (gsw/blend.h).
template <typename T>
inline void alpha_vjp_lanes(const ChunkBwd<T>& st, const GaussIn<T>& p, const T* vis, const T* vA, GaussGrad<T>& gg) {
#pragma omp simd
  for (int j = 0; j < kLanes; ++j) {
    const T v = p.op * vis[j] < T(kAlphaMax) ? vA[j] : T(0);
    T tmx = T(0), tmy = T(0);
    blend_alpha_vjp(p.mx - st.px[j], p.my - st.py[j], p.ca, p.cb, p.cc, p.op, vis[j], v, tmx, tmy, gg.ca[j],
                    gg.cb[j], gg.cc[j], gg.op[j]);
    gg.mx[j] += tmx;
    gg.my[j] += tmy;
    gg.amx[j] += tmx < T(0) ? -tmx : tmx;
    gg.amy[j] += tmy < T(0) ? -tmy : tmy;
  }
}

// Backward of Gaussian p at chunk st: undoes its blend (Tr, sb), adds its colour gradient to gcol
// (D * kLanes) and its alpha gradients to gg. Returns false when it contributed to no pixel here.
template <typename T>
bool backward_pair(const GaussIn<T>& p, const ChunkBwd<T>& st, T* gcol, GaussGrad<T>& gg) {
  alignas(64) T alpha[kLanes], vis[kLanes], fac[kLanes], ra[kLanes], Ti[kLanes], vA[kLanes];
  alignas(64) int32_t validm[kLanes];
  chunk_alpha_vis(st.px, st.py, p.mx, p.my, p.ca, p.cb, p.cc, p.op, alpha, vis);
#pragma omp simd
  for (int j = 0; j < kLanes; ++j) {
    const T a = alpha[j];
    const T validf = (p.kk <= st.last[j] ? T(1) : T(0)) * (a >= T(kAlphaMin) ? T(1) : T(0));  // 0/1
    validm[j] = validf > T(0) ? 1 : 0;
    const T r = T(1) / (T(1) - a);
    const T tb = st.Tr[j] * r;
    st.Tr[j] = validf > T(0) ? tb : st.Tr[j];
    Ti[j] = tb * validf;
    ra[j] = r * validf;
    fac[j] = (a * tb) * validf;
    vA[j] = (st.tva[j] * r) * validf;
  }
  if (!any_lane(validm)) return false;
  alignas(64) T cv[kLanes] = {};  // colour . dL/d(colour out)
  for (int64_t ch = 0; ch < p.D; ++ch) {
    const T col = p.col[ch];
    const T* v = st.vr + ch * kLanes;
    T* gc = gcol + ch * kLanes;
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) {
      cv[j] += col * v[j];
      gc[j] += fac[j] * v[j];
    }
  }
#pragma omp simd
  for (int j = 0; j < kLanes; ++j) {
    vA[j] += cv[j] * Ti[j] - st.sb[j] * ra[j];
    st.sb[j] += cv[j] * fac[j];
  }
  alpha_vjp_lanes(st, p, vis, vA, gg);
  return true;
}

// The per-tile backward state of all chunks: chunk 0's pointers, chunk q's being kLanes (D * kLanes
// for vr) values further; one Gaussian's colour-gradient lanes gcol (D rows); and scratch for one
// Gaussian's chunk list qs and its alphas (kLanes per listed chunk, and as many unclamped ones in raw),
// nchunks of each.
template <typename T>
struct TileBwd {
  ChunkBwd<T> c0;
  T* gcol;
  int64_t D;
  int64_t* qs;
  T *alpha, *raw;
  ChunkBwd<T> chunk(int64_t q) const {
    const int64_t o = q * kLanes, od = q * D * kLanes;
    return {c0.px + o, c0.py + o, c0.Tr + o, c0.tva + o, c0.last + o, c0.vr + od, c0.sb + o};
  }
};

// Backward of Gaussian p (back to front) over the chunks q in [qlo, qhi] that its support meets and
// that it can have contributed to (p.kk <= the chunk's largest last contributor): adds its summed
// gradients (mean2d, conic, opacity, colour) to acc[0 .. 6 + D), and with absgrad the sums of the
// per-pixel |dL/dmean2d| to acc[6 + D], acc[7 + D].
template <typename T>
void backward_gaussian(const GaussIn<T>& p, const TileBwd<T>& tb, const TileChunks& tc, const int32_t* chunk_last,
                       int64_t qlo, int64_t qhi, GaussGrad<T>& gg, T* acc, bool absgrad) {
  bool touched = false;
  for (int64_t q = qlo; q <= qhi; ++q) {
    if (p.kk > chunk_last[q] || !tc.flagged(q)) continue;
    if (!touched) {
      std::memset(static_cast<void*>(&gg), 0, sizeof(gg));
      std::fill(tb.gcol, tb.gcol + p.D * kLanes, T(0));
    }
    touched = backward_pair(p, tb.chunk(q), tb.gcol, gg) || touched;
  }
  if (!touched) return;
  acc[0] += lane_sum(gg.mx);
  acc[1] += lane_sum(gg.my);
  acc[2] += lane_sum(gg.ca);
  acc[3] += lane_sum(gg.cb);
  acc[4] += lane_sum(gg.cc);
  acc[5] += lane_sum(gg.op);
  for (int64_t ch = 0; ch < p.D; ++ch) acc[6 + ch] += lane_sum(tb.gcol + ch * kLanes);
  if (absgrad) {
    acc[6 + p.D] += lane_sum(gg.amx);
    acc[7 + p.D] += lane_sum(gg.amy);
  }
}

#if defined(GSW_RASTER_AVX512)
// float: the same, with the lane masks in mask registers (see composite_chunk<float>) and the
// Gaussian's gradient sums in registers across its chunks; DC = 3 keeps the colour-gradient sums in
// registers too (RGB, the trainer's case), DC = 0 keeps them in tb.gcol for any D.
template <int DC>
inline void backward_gaussian_f32(const GaussIn<float>& p, const TileBwd<float>& tb, const TileChunks& tc,
                                  const int32_t* chunk_last, int64_t qlo, int64_t qhi, float* acc, bool absgrad) {
  const int64_t D = DC > 0 ? DC : p.D;
  const __m512 one = _mm512_set1_ps(1.0f), amin = _mm512_set1_ps(kAlphaMin), amax = _mm512_set1_ps(kAlphaMax);
  const __m512 opv = _mm512_set1_ps(p.op), mxv = _mm512_set1_ps(p.mx), myv = _mm512_set1_ps(p.my);
  const __m512i kkv = _mm512_set1_epi32(p.kk);
  F16 gmx(0.0f), gmy(0.0f), gca(0.0f), gcb(0.0f), gcc(0.0f), gop(0.0f), gax(0.0f), gay(0.0f);
  // without absgrad: the lane sums of v_sigma (dx, dy, dx^2, dx dy, dy^2) in gmx, gmy, gca, gcb, gcc,
  // turned into the mean and conic gradients once per tile (the conic is the Gaussian's own, the
  // same at every pixel): 7 fewer vector operations per chunk visit than blend_alpha_vjp's per-pixel
  // form, which absgrad needs (|dL/dmean2d| per pixel)
  __m512 gc[3] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};  // DC = 3
  __m512 colv[3];
  for (int ch = 0; ch < (DC > 0 ? DC : 0); ++ch) colv[ch] = _mm512_set1_ps(p.col[ch]);
  if (DC == 0) std::fill(tb.gcol, tb.gcol + D * kLanes, 0.0f);
  __mmask16 touched = 0;
  alignas(64) float alpha[kLanes], vis[kLanes];
  for (int64_t q = qlo; q <= qhi; ++q) {
    if (p.kk > chunk_last[q] || !tc.flagged(q)) continue;
    const ChunkBwd<float> st = tb.chunk(q);
    chunk_alpha_vis(st.px, st.py, p.mx, p.my, p.ca, p.cb, p.cc, p.op, alpha, vis);
    const __m512 a = _mm512_load_ps(alpha);
    const __mmask16 valid =
        _mm512_cmp_ps_mask(a, amin, _CMP_GE_OQ) &
        _mm512_cmp_epi32_mask(kkv, _mm512_load_si512(reinterpret_cast<const void*>(st.last)), _MM_CMPINT_LE);
    if (!valid) continue;
    touched |= valid;
    // 1 / (1 - alpha) by the 14-bit reciprocal and one Newton step (relative error ~1e-7, about an ulp):
    // a 16-lane division's latency would otherwise be the longest stall of this loop
    const __m512 om = _mm512_sub_ps(one, a);
    const __m512 r0 = _mm512_maskz_rcp14_ps(0xFFFF, om);  // maskz: GCC 12 warns on the plain form's undefined operand
    const __m512 r = _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(om, r0, one), r0);
    const __m512 tr = _mm512_load_ps(st.Tr);
    const __m512 tbf = _mm512_mul_ps(tr, r);  // transmittance before this Gaussian
    _mm512_store_ps(st.Tr, _mm512_mask_mov_ps(tr, valid, tbf));
    const __m512 fac = _mm512_maskz_mul_ps(valid, a, tbf);
    __m512 va = _mm512_maskz_mul_ps(valid, _mm512_load_ps(st.tva), r);
    __m512 cv = _mm512_setzero_ps();  // colour . dL/d(colour out)
    for (int64_t ch = 0; ch < D; ++ch) {
      const __m512 col = DC > 0 ? colv[ch] : _mm512_set1_ps(p.col[ch]);
      const __m512 v = _mm512_load_ps(st.vr + ch * kLanes);
      cv = _mm512_fmadd_ps(col, v, cv);
      if (DC > 0) {
        gc[ch] = _mm512_fmadd_ps(fac, v, gc[ch]);
      } else {
        float* gp = tb.gcol + ch * kLanes;
        _mm512_store_ps(gp, _mm512_fmadd_ps(fac, v, _mm512_load_ps(gp)));
      }
    }
    const __m512 sb = _mm512_load_ps(st.sb);
    va = _mm512_mask_mov_ps(va, valid, _mm512_fmadd_ps(cv, tbf, _mm512_fnmadd_ps(sb, r, va)));
    _mm512_store_ps(st.sb, _mm512_fmadd_ps(cv, fac, sb));  // fac is 0 on the other lanes
    const __m512 visv = _mm512_load_ps(vis);
    // alpha = min(opacity vis, amax): below amax exactly where unclamped (va is 0 off the valid lanes)
    const __mmask16 unclamped = _mm512_cmp_ps_mask(a, amax, _CMP_LT_OQ);
    const F16 dx(_mm512_sub_ps(mxv, _mm512_load_ps(st.px))), dy(_mm512_sub_ps(myv, _mm512_load_ps(st.py)));
    const F16 vav(_mm512_maskz_mov_ps(unclamped, va));
    if (absgrad) {  // per-pixel mean2d gradients kept apart, for their absolute values
      F16 tmx(0.0f), tmy(0.0f);
      blend_alpha_vjp<F16>(dx, dy, F16(p.ca), F16(p.cb), F16(p.cc), F16(opv), F16(visv), vav, tmx, tmy, gca, gcb, gcc,
                           gop);
      gmx += tmx;
      gmy += tmy;
      gax += F16(_mm512_abs_ps(tmx.v));
      gay += F16(_mm512_abs_ps(tmy.v));
    } else {  // blend_alpha_vjp's sums, as moments of v_sigma = -opacity vis v_alpha
      const F16 w = F16(visv) * vav;
      gop += w;
      const F16 vs = -(F16(opv) * w), t1 = vs * dx, t2 = vs * dy;
      gmx += t1;
      gmy += t2;
      gca = F16(_mm512_fmadd_ps(t1.v, dx.v, gca.v));
      gcb = F16(_mm512_fmadd_ps(t1.v, dy.v, gcb.v));
      gcc = F16(_mm512_fmadd_ps(t2.v, dy.v, gcc.v));
    }
  }
  if (!touched) return;
  if (absgrad) {
    acc[0] += reduce_add(gmx.v);
    acc[1] += reduce_add(gmy.v);
    acc[2] += reduce_add(gca.v);
    acc[3] += reduce_add(gcb.v);
    acc[4] += reduce_add(gcc.v);
  } else {
    const float sx = reduce_add(gmx.v), sy = reduce_add(gmy.v);
    acc[0] += p.ca * sx + p.cb * sy;
    acc[1] += p.cb * sx + p.cc * sy;
    acc[2] += 0.5f * reduce_add(gca.v);
    acc[3] += reduce_add(gcb.v);
    acc[4] += 0.5f * reduce_add(gcc.v);
  }
  acc[5] += reduce_add(gop.v);
  for (int64_t ch = 0; ch < D; ++ch)
    acc[6 + ch] += reduce_add(DC > 0 ? gc[ch] : _mm512_load_ps(tb.gcol + ch * kLanes));
  if (absgrad) {
    acc[6 + D] += reduce_add(gax.v);
    acc[7 + D] += reduce_add(gay.v);
  }
}

#elif defined(GSW_RASTER_AVX2)
// float on AVX2: the AVX-512 twin's steps on the lanes 8 at a time, lane masks as all-ones floats
// and blends (the generic loop's conditional stores compile to masked stores, slow on AMD cores, and its
// gradient sums live in memory). 1 / (1 - alpha) is a true division here, as in the generic loop: the
// 12-bit reciprocal estimate with one Newton step is 2 ulp, an error the walk back to front compounds.
// Both halves add into one set of 8-lane sums (the order of a Gaussian's sum over its pixels is free);
// the mean and conic sums are moments of v_sigma for any absgrad, |dL/dmean2d| is summed per pixel.
static_assert(kLanes % 8 == 0, "backward_gaussian<float> (AVX2) runs the lanes 8 at a time");

// The chunks q in [qlo, qhi] (of a tile of at most 64) whose largest last contributor is at least kk,
// as bits (bit q: chunk q; bits outside the range are not meaningful); chunk_last is padded with -1 to
// whole blocks of kLanes.
inline uint64_t reach_bits(const int32_t* chunk_last, int32_t kk, int64_t qlo, int64_t qhi) {
  const __m256i below = _mm256_set1_epi32(kk - 1);
  uint64_t bits = 0;
  for (int64_t q0 = qlo - qlo % 8; q0 <= qhi; q0 += 8) {
    const __m256i last = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk_last + q0));
    const uint32_t m = static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(last, below))));
    bits |= static_cast<uint64_t>(m) << q0;
  }
  return bits;
}

template <int DC>
inline void backward_gaussian_f32(const GaussIn<float>& p, const TileBwd<float>& tb, const TileChunks& tc,
                                  const int32_t* chunk_last, int64_t qlo, int64_t qhi, float* acc, bool absgrad) {
  const int64_t D = DC > 0 ? DC : p.D;
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const __m256 amin = _mm256_set1_ps(kAlphaMin), amax = _mm256_set1_ps(kAlphaMax);
  const Alpha8 g(p.mx, p.my, p.bt);
  const __m256 mxv = g.mx, myv = g.my;
  const __m256 cav = _mm256_set1_ps(p.ca), cbv = _mm256_set1_ps(p.cb), ccv = _mm256_set1_ps(p.cc);
  const __m256i kkv = _mm256_set1_epi32(p.kk);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 gmx = zero, gmy = zero, gca = zero, gcb = zero, gcc = zero, gop = zero, gax = zero, gay = zero;
  __m256 gc[3] = {zero, zero, zero}, colv[3] = {zero, zero, zero};  // DC = 3
  for (int ch = 0; ch < (DC > 0 ? DC : 0); ++ch) colv[ch] = _mm256_set1_ps(p.col[ch]);
  if (DC == 0) std::fill(tb.gcol, tb.gcol + D * kLanes, 0.0f);
  // the chunks it can have contributed to, then their alphas, then the walk (as in the forward's
  // two passes: each alpha ends a long dependency chain, which the later steps would wait on)
  int64_t nq = 0;
  if (tc.chunks() <= 64) {
    for (uint64_t bits = tc.marked_bits(qlo, qhi) & reach_bits(chunk_last, p.kk, qlo, qhi); bits != 0;
         bits &= bits - 1)
      tb.qs[nq++] = __builtin_ctzll(bits);
  } else {
    for (int64_t q = qlo; q <= qhi; ++q) {  // no branch: whether a chunk is flagged hardly predicts
      tb.qs[nq] = q;
      nq += static_cast<int64_t>(p.kk <= chunk_last[q]) & static_cast<int64_t>(tc.flagged(q));
    }
  }
  int64_t n0 = 0;
#if defined(__AVX512F__)
  static_assert(kLanes == 8, "Alpha16 pairs chunks of 8 lanes");
  const Alpha16 g2(g);  // two chunks a vector, Alpha8's alphas bit for bit (as the forward)
  if (p.row0 >= 0) {  // the forward's alphas row by row: those of chunk q at q * kLanes
    const ChunkBwd<float> c0 = tb.chunk(0), c1 = tb.chunk(1);
    const auto py = [&](int64_t r) { return Alpha16::pair(tb.chunk(2 * r).py, tb.chunk(2 * r + 1).py); };
    g2.rows<true>(Alpha16::pair(c0.px, c1.px), py, p.row0, p.row1, p.bt, tb.alpha, tb.raw);
    n0 = nq;
  }
  for (; n0 + 1 < nq; n0 += 2) {
    const ChunkBwd<float> s0 = tb.chunk(tb.qs[n0]), s1 = tb.chunk(tb.qs[n0 + 1]);
    __m512 raw;  // opacity exp(-sigma)
    _mm512_storeu_ps(tb.alpha + n0 * kLanes, g2.alpha(Alpha16::pair(s0.px, s1.px), Alpha16::pair(s0.py, s1.py), raw));
    _mm512_storeu_ps(tb.raw + n0 * kLanes, raw);
  }
#endif
  for (int64_t n = n0; n < nq; ++n) {
    const ChunkBwd<float> st = tb.chunk(tb.qs[n]);
    for (int o = 0; o < kLanes; o += 8) {
      __m256 raw;  // opacity exp(-sigma)
      _mm256_store_ps(tb.alpha + n * kLanes + o, g.alpha(_mm256_load_ps(st.px + o), _mm256_load_ps(st.py + o), raw));
      _mm256_store_ps(tb.raw + n * kLanes + o, raw);
    }
  }
  bool touched = false;
  for (int64_t n = 0; n < nq; ++n) {
    const ChunkBwd<float> st = tb.chunk(tb.qs[n]);
    const int64_t ai = (p.row0 >= 0 ? tb.qs[n] : n) * kLanes;  // where its alphas lie
    for (int o = 0; o < kLanes; o += 8) {
      const __m256 px = _mm256_load_ps(st.px + o), py = _mm256_load_ps(st.py + o);
      const __m256 a = _mm256_load_ps(tb.alpha + ai + o), raw = _mm256_load_ps(tb.raw + ai + o);
      const __m256i last = _mm256_load_si256(reinterpret_cast<const __m256i*>(st.last + o));
      const __m256 beyond = _mm256_castsi256_ps(_mm256_cmpgt_epi32(kkv, last));  // composited after the last
      const __m256 valid = _mm256_andnot_ps(beyond, _mm256_cmp_ps(a, amin, _CMP_GE_OQ));
      if (_mm256_testz_ps(valid, valid)) continue;
      touched = true;
      const __m256 r = _mm256_div_ps(one, _mm256_sub_ps(one, a));
      const __m256 tr = _mm256_load_ps(st.Tr + o);
      const __m256 tbf = _mm256_mul_ps(tr, r);  // transmittance before this Gaussian
      _mm256_store_ps(st.Tr + o, _mm256_blendv_ps(tr, tbf, valid));
      const __m256 fac = _mm256_and_ps(valid, _mm256_mul_ps(a, tbf));
      __m256 va = _mm256_and_ps(valid, _mm256_mul_ps(_mm256_load_ps(st.tva + o), r));
      __m256 cv = zero;  // colour . dL/d(colour out)
      for (int64_t ch = 0; ch < D; ++ch) {
        const __m256 v = _mm256_load_ps(st.vr + ch * kLanes + o);
        if (DC > 0) {
          cv = _mm256_fmadd_ps(colv[ch], v, cv);
          gc[ch] = _mm256_fmadd_ps(fac, v, gc[ch]);
        } else {
          cv = _mm256_fmadd_ps(_mm256_set1_ps(p.col[ch]), v, cv);
          float* gp = tb.gcol + ch * kLanes + o;
          _mm256_store_ps(gp, _mm256_fmadd_ps(fac, v, _mm256_load_ps(gp)));
        }
      }
      const __m256 sb = _mm256_load_ps(st.sb + o);
      va = _mm256_and_ps(valid, _mm256_fmadd_ps(cv, tbf, _mm256_fnmadd_ps(sb, r, va)));
      _mm256_store_ps(st.sb + o, _mm256_fmadd_ps(cv, fac, sb));  // fac is 0 on the other lanes
      // alpha = min(opacity vis, amax): below amax exactly where unclamped (va is 0 off the valid lanes)
      const __m256 vav = _mm256_and_ps(_mm256_cmp_ps(a, amax, _CMP_LT_OQ), va);
      const __m256 dx = _mm256_sub_ps(mxv, px), dy = _mm256_sub_ps(myv, py);
      // dalpha/dopacity = exp(-sigma) = raw / opacity, summed as raw and divided once below;
      // dalpha/dsigma = -raw
      const __m256 w = _mm256_mul_ps(raw, vav);
      gop = _mm256_add_ps(gop, w);
      const __m256 vs = _mm256_sub_ps(zero, w);  // v_sigma
      const __m256 t1 = _mm256_mul_ps(vs, dx), t2 = _mm256_mul_ps(vs, dy);
      gmx = _mm256_add_ps(gmx, t1);
      gmy = _mm256_add_ps(gmy, t2);
      gca = _mm256_fmadd_ps(t1, dx, gca);
      gcb = _mm256_fmadd_ps(t1, dy, gcb);
      gcc = _mm256_fmadd_ps(t2, dy, gcc);
      if (absgrad) {  // the pixel's own dL/dmean2d = conic (t1, t2)
        const __m256 tmx = _mm256_fmadd_ps(cav, t1, _mm256_mul_ps(cbv, t2));
        const __m256 tmy = _mm256_fmadd_ps(cbv, t1, _mm256_mul_ps(ccv, t2));
        gax = _mm256_add_ps(gax, _mm256_and_ps(absmask, tmx));
        gay = _mm256_add_ps(gay, _mm256_and_ps(absmask, tmy));
      }
    }
  }
  if (!touched) return;
  const float sx = reduce_add8(gmx), sy = reduce_add8(gmy);
  acc[0] += p.ca * sx + p.cb * sy;
  acc[1] += p.cb * sx + p.cc * sy;
  acc[2] += 0.5f * reduce_add8(gca);
  acc[3] += reduce_add8(gcb);
  acc[4] += 0.5f * reduce_add8(gcc);
  acc[5] += reduce_add8(gop) / p.op;  // touched: some alpha >= 1/255, so opacity >= 1/255
  for (int64_t ch = 0; ch < D; ++ch)
    acc[6 + ch] += DC > 0 ? reduce_add8(gc[ch]) : lane_sum(tb.gcol + ch * kLanes);
  if (absgrad) {
    acc[6 + D] += reduce_add8(gax);
    acc[7 + D] += reduce_add8(gay);
  }
}
#endif

#if defined(GSW_RASTER_AVX512) || defined(GSW_RASTER_AVX2)
// float: the SIMD twin of this build (AVX-512 or AVX2), with RGB's colour sums in registers.
template <>
inline void backward_gaussian<float>(const GaussIn<float>& p, const TileBwd<float>& tb, const TileChunks& tc,
                                     const int32_t* chunk_last, int64_t qlo, int64_t qhi, GaussGrad<float>&,
                                     float* acc, bool absgrad) {
  if (p.D == 3)
    backward_gaussian_f32<3>(p, tb, tc, chunk_last, qlo, qhi, acc, absgrad);
  else
    backward_gaussian_f32<0>(p, tb, tc, chunk_last, qlo, qhi, acc, absgrad);
}
#endif

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
