// CPU kernel of the 3DGS rasterizer, stage 4: front-to-back alpha compositing of each tile's
// depth-sorted Gaussians. OpenMP runs over tiles; the pixels of a tile are SIMD lanes, in chunks of
// kLanes (splat_tiles.h). The forward keeps each pixel's final transmittance and the index of its last
// contributing intersection, so the backward (splat_rasterize_backward.cpp) walks the tile's list back
// to front and recovers every intermediate transmittance by division, without storing the blends. Each
// tile is walked Gaussian by Gaussian, each blended into the chunks it reaches (splat_rasterize_forward.h).
// Per-pixel math: gsw/blend.h (shared with csrc/cuda/splat_rasterize_*.cu); bound to the ops by
// splat_cpu.cpp.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gsw/blend.h"
#include "gsw/parallel.h"
#include "splat.h"
#include "splat_pixels.h"
#include "splat_rasterize_forward.h"
#include "splat_simd.h"
#include "splat_tiles.h"

namespace gsw {
namespace splat {
namespace cpu {
template <typename T, bool Count>
void rasterize_forward_kernel(const RasterForwardParams<T>& p, LaneCounts* counts) {
  const RasterDims g = raster_dims(p.in);
  const T* means2d = p.in.means2d;
  const T* conics = p.in.conics;
  const T* colors = p.in.colors;
  const T* opac = p.in.opacities;
  const int32_t* toff = p.in.tile_offsets;
  const int32_t* fid = p.in.flatten_ids;
  T* out_color = p.out_colors;
  T* out_alpha = p.out_alphas;
  T* out_T = p.out_trans;
  int32_t* out_last = p.out_last;
  const int64_t D = g.D, ntiles = g.tw * g.th;
  const int64_t nchunks = (g.ts * g.ts + kLanes - 1) / kLanes;
  const GaussianRecord<T>* rec = gaussian_records(means2d, conics, opac, g.C * g.N);
  const ChunkLayout layout(g.ts);
  const BlendInputs<T> in{means2d, conics, colors, opac, fid, D};
#pragma omp parallel num_threads(raster_threads(g.C * ntiles, g.M, g.ts * g.ts, g.C * g.H * g.W))
  {
    DenormalsOff ftz;
    TileLanes<T> st(nchunks, D);
    std::vector<uint8_t> active(nchunks);
    std::vector<int64_t> qs(nchunks);  // the chunks one Gaussian blends into
    TileChunks tc(layout, g.ts);
    RowBatch<T> batch;
    LaneCounts mine;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < g.C * ntiles; ++t) {
      double t0 = 0.0;
      if constexpr (Count) t0 = omp_get_wtime(), ++mine.tiles;
      const int64_t c = t / ntiles, tt = t % ntiles, ty = tt / g.tw, tx = tt % g.tw;
      const int64_t s = toff[t];
      const int64_t e = (t + 1 < g.C * ntiles) ? toff[t + 1] : g.M;
      tc.build(tx, ty, g.W, g.H);
      const bool rows16 = tc.rows16();
      int64_t n_active = 0;
      uint64_t active_bits = 0;
      for (int64_t q = 0; q < nchunks; ++q) {
        const ChunkGeom& cg = tc.geo(q);
        active[q] = cg.any_inside ? 1 : 0;
        n_active += active[q];
        if (q < 64 && active[q]) active_bits |= uint64_t(1) << q;
#pragma omp simd
        for (int j = 0; j < kLanes; ++j) {
          st.px(q)[j] = T(cg.x[j]) + T(0.5);
          st.py(q)[j] = T(cg.y[j]) + T(0.5);
          st.Tr(q)[j] = T(1);
          st.done(q)[j] = T(1 - cg.in[j]);
          st.last(q)[j] = -1;
        }
        for (int64_t ch = 0; ch < D; ++ch)
          std::memset(static_cast<void*>(st.acc(q) + ch * kPairLanes), 0, sizeof(LaneBlock<T>));
      }
      // Gaussian-major: each Gaussian (front to back) is blended into every chunk it reaches that is
      // still compositing, so consecutive blends are on different chunks and their dependency chains
      // (transmittance -> termination test -> transmittance) overlap. The tile stops once every pixel is
      // done (dense tiles never look at most of their list).
      for (int64_t k = s; k < e && n_active > 0; ++k) {
        if (k + kPrefetchAhead < e) {
          const int64_t ip = fid[k + kPrefetchAhead];
          __builtin_prefetch(&rec[ip]);
          __builtin_prefetch(colors + D * ip);
        }
        const GaussianRecord<T>& r = rec[fid[k]];
        const auto done_with = [&](int64_t q) {
          active[q] = 0;
          --n_active;
          if (q < 64) active_bits &= ~(uint64_t(1) << q);
        };
        if (nchunks <= 64 && !Count) {
          // the chunks still compositing that the Gaussian reaches, as bits: all of them where its support
          // covers the tile (large Gaussians in crowded tiles), with no chunk test
          uint64_t bits = active_bits;
          int64_t qlo = 0, qhi = nchunks - 1;  // its rows' chunks: all of them where it covers the tile
          // on 16 x 16 tiles, alphas row by row where rows_apply holds (the backward asks it of the same rows)
          const bool covers = tc.covers_tile(r.mx, r.my, r.su);
          bool row_form = covers && rows16 && rows_apply(r, tc, qlo, qhi);
          if (row_form && batch.accepts(D)) {
            batch.add(in, r, static_cast<int32_t>(k), st);
            if (batch.full()) batch.flush(st, active_bits, done_with);
            continue;
          }
          if (!covers) {
            if (!tc.chunk_rows(r.my, r.su, qlo, qhi)) continue;
            // skip Gaussians that only reach finished chunks before the (costlier) support test
            bits &= (~uint64_t(0) >> (63 - (qhi - qlo))) << qlo;
            if (bits == 0) continue;
            bits &= tc.support_bits(r.mx, r.my, r.su, qlo, qhi);
            if (bits == 0) continue;
            row_form = rows16 && rows_apply(r, tc, qlo, qhi);
          }
          if (!batch.empty()) {  // the batch's Gaussians come first
            batch.flush(st, active_bits, done_with);
            if ((bits &= active_bits) == 0) continue;
          }
          const GaussianLanes<T> gl(in, r, static_cast<int32_t>(k));
          if (row_form)
            gl.blend_rows(bits, qlo / 2, qhi / 2, st, done_with);
          else
            gl.blend_bits(bits, st, done_with);
          continue;
        }
        // the counting twin, and tiles of more than 64 chunks: the flagged chunks still compositing, listed
        int64_t qlo, qhi;
        if (!tc.chunk_rows(r.my, r.su, qlo, qhi)) continue;
        if (nchunks <= 64 && ((active_bits >> qlo) & (~uint64_t(0) >> (63 - (qhi - qlo)))) == 0) continue;
        tc.mark_range(r.mx, r.my, r.su, qlo, qhi);
        int64_t nq = 0;
        if (nchunks <= 64) {
          for (uint64_t bits = tc.marked_bits(qlo, qhi) & active_bits; bits != 0; bits &= bits - 1)
            qs[nq++] = __builtin_ctzll(bits);
        } else {
          for (int64_t q = qlo; q <= qhi; ++q) {  // no branch: whether a chunk is flagged hardly predicts
            qs[nq] = q;
            nq += active[q] & static_cast<uint8_t>(tc.flagged(q));
          }
        }
        if constexpr (Count) ++mine.pairs;
        if (nq == 0) continue;
        if constexpr (Count) {
          mine.blends += nq;
          for (int64_t n = 0; n < nq; ++n)
            for (int j = 0; j < kLanes; ++j) mine.active += st.done(qs[n])[j] == T(0);
        }
        const GaussianLanes<T> gl(in, r, static_cast<int32_t>(k));
        gl.blend(qs.data(), nq, st, done_with);
        if constexpr (Count)  // the lanes this Gaussian composited are those it became the last of
          for (int64_t n = 0; n < nq; ++n)
            for (int j = 0; j < kLanes; ++j) mine.blended += st.last(qs[n])[j] == static_cast<int32_t>(k);
      }
      // the tile's last blends: no chunk is tracked after them
      if (!batch.empty()) batch.flush(st, active_bits, [](int64_t) {});
      for (int64_t q = 0; q < nchunks; ++q) {
        const ChunkGeom& cg = tc.geo(q);
        if (!cg.any_inside) continue;
        const T* acc = st.acc(q);
        if (cg.full_row) {  // one contiguous run of a row: whole-vector stores
          const int64_t pix = (c * g.H + cg.y[0]) * g.W + cg.x[0];
          const T* Tr = st.Tr(q);
          store_interleaved(acc, D, out_color + pix * D, kPairLanes);
#pragma omp simd
          for (int j = 0; j < kLanes; ++j) out_alpha[pix + j] = T(1) - Tr[j];
          if (out_T == nullptr) continue;
#pragma omp simd
          for (int j = 0; j < kLanes; ++j) {
            out_T[pix + j] = Tr[j];
            out_last[pix + j] = st.last(q)[j];
          }
          continue;
        }
        for (int j = 0; j < kLanes; ++j) {
          if (!cg.in[j]) continue;
          const int64_t pix = (c * g.H + cg.y[j]) * g.W + cg.x[j];
          for (int64_t ch = 0; ch < D; ++ch) out_color[pix * D + ch] = acc[ch * kPairLanes + j];
          out_alpha[pix] = T(1) - st.Tr(q)[j];
          if (out_T == nullptr) continue;
          out_T[pix] = st.Tr(q)[j];
          out_last[pix] = st.last(q)[j];
        }
      }
      if constexpr (Count) mine.busy_s += omp_get_wtime() - t0;
    }
    if constexpr (Count) counts[omp_get_thread_num()] = mine;
  }
}

template void rasterize_forward_kernel<float, false>(const RasterForwardParams<float>&, LaneCounts*);
template void rasterize_forward_kernel<double, false>(const RasterForwardParams<double>&, LaneCounts*);
template void rasterize_forward_kernel<float, true>(const RasterForwardParams<float>&, LaneCounts*);
template void rasterize_forward_kernel<double, true>(const RasterForwardParams<double>&, LaneCounts*);

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
