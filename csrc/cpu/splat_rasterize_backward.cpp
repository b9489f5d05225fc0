// CPU kernel of the 3DGS rasterizer, stage 4 backward: the analytic backward of the tile compositing
// (splat_rasterize_forward.cpp). Gaussian-major per tile: each Gaussian of a tile, back to front,
// visits every chunk of the tile that it can have contributed to (splat_rasterize_backward.h), so its
// gradient is summed lane-wise over the chunks and reduced across lanes once per tile; per-thread
// per-Gaussian sums are then reduced by the same team. Bound to the op by splat_cpu.cpp.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "gsw/parallel.h"
#include "splat.h"
#include "splat_pixels.h"
#include "splat_rasterize_backward.h"
#include "splat_simd.h"
#include "splat_tiles.h"

namespace gsw {
namespace splat {
namespace cpu {

template <typename T>
void rasterize_backward_kernel(const RasterBackwardParams<T>& p) {
  const RasterDims g = raster_dims(p.in);
  const T* means2d = p.in.means2d;
  const T* conics = p.in.conics;
  const T* colors = p.in.colors;
  const T* opac = p.in.opacities;
  const int32_t* toff = p.in.tile_offsets;
  const int32_t* fid = p.in.flatten_ids;
  const T* Tfinal = p.trans;
  const int32_t* lastids = p.last_ids;
  const T* v_color = p.v_out_colors;
  const T* v_alpha = p.v_out_alphas;
  T* g_means2d = p.v_means2d;
  T* g_conics = p.v_conics;
  T* g_colors = p.v_colors;
  T* g_opac = p.v_opacities;
  T* g_means2d_abs = p.v_means2d_abs;
  // Gaussian-major: each Gaussian of a tile (back to front) visits every chunk of the tile, so its
  // gradient is summed lane-wise over the chunks and reduced across lanes once per tile.
  const int64_t D = g.D, ntiles = g.tw * g.th, CN = g.C * g.N;
  const int64_t nchunks = (g.ts * g.ts + kLanes - 1) / kLanes;
  const bool absgrad = g_means2d_abs != nullptr;
  // per-Gaussian accumulators: mean2d (2), conic (3), opacity (1), colour (D), |mean2d| (2, with absgrad)
  const int64_t K = 6 + D + (absgrad ? 2 : 0);
  const GaussianRecord<T>* rec = gaussian_records(means2d, conics, opac, CN);
  const ChunkLayout layout(g.ts);
  const int nthreads = raster_threads(g.C * ntiles, g.M, g.ts * g.ts, g.C * g.H * g.W);
  // per-thread sums, zeroed by their own thread (first touch there; no serial zero fill of
  // nthreads * N * K values, 7 MB at 10^5 Gaussians)
  std::unique_ptr<T[]> sums(new T[static_cast<size_t>(nthreads) * CN * K]);
#pragma omp parallel num_threads(nthreads)
  {
    DenormalsOff ftz;
    T* my = sums.get() + static_cast<size_t>(omp_get_thread_num()) * CN * K;
    std::fill(my, my + CN * K, T(0));
    // per-pixel state of one tile (structure of arrays, kLanes lanes per chunk)
    using Lanes = LaneBlock<T>;
    std::vector<Lanes> s_px(nchunks), s_py(nchunks), s_Tr(nchunks), s_tva(nchunks);
    std::vector<Lanes> s_vr(nchunks * D), s_sb(nchunks), gcol(D);
    GaussGrad<T> gg;
    std::vector<LaneBlock<int32_t>> s_last(nchunks);
    std::vector<Lanes> s_alpha(nchunks), s_raw(nchunks);
    std::vector<int64_t> qs(nchunks);
    TileChunks tc(layout, g.ts);
    const TileBwd<T> tb{{s_px.data()->v, s_py.data()->v, s_Tr.data()->v, s_tva.data()->v, s_last.data()->v,
                         s_vr.data()->v, s_sb.data()->v},
                        gcol.data()->v,
                        D,
                        qs.data(),
                        s_alpha.data()->v,
                        s_raw.data()->v};
    std::vector<int32_t> chunk_last((nchunks + kLanes - 1) / kLanes * kLanes, -1);  // padded: reach_bits
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < g.C * ntiles; ++t) {
      const int64_t c = t / ntiles, tt = t % ntiles, ty = tt / g.tw, tx = tt % g.tw;
      const int64_t s = toff[t];
      int32_t maxlast = -1;
      tc.build(tx, ty, g.W, g.H);
      for (int64_t q = 0; q < nchunks; ++q) {
        const ChunkGeom& cg = tc.geo(q);
        int32_t cl = -1;
        if (cg.full_row) {  // one contiguous run of a row: whole-vector loads
          const int64_t pix = (c * g.H + cg.y[0]) * g.W + cg.x[0];
          load_interleaved(v_color + pix * D, D, s_vr[q * D].v);
#pragma omp simd reduction(max : cl)
          for (int j = 0; j < kLanes; ++j) {
            s_px[q].v[j] = T(cg.x[j]) + T(0.5);
            s_py[q].v[j] = T(cg.y[j]) + T(0.5);
            s_Tr[q].v[j] = Tfinal[pix + j];
            s_last[q].v[j] = lastids[pix + j];
            s_tva[q].v[j] = Tfinal[pix + j] * v_alpha[pix + j];
            cl = std::max(cl, lastids[pix + j]);
          }
          std::memset(static_cast<void*>(s_sb[q].v), 0, sizeof(Lanes));
          chunk_last[q] = cl;
          maxlast = cl > maxlast ? cl : maxlast;
          continue;
        }
        for (int j = 0; j < kLanes; ++j) {
          s_px[q].v[j] = T(cg.x[j]) + T(0.5);
          s_py[q].v[j] = T(cg.y[j]) + T(0.5);
          const bool in = cg.in[j] != 0;
          const int64_t pix = (c * g.H + cg.y[j]) * g.W + cg.x[j];
          s_Tr[q].v[j] = in ? Tfinal[pix] : T(1);
          s_last[q].v[j] = in ? lastids[pix] : -1;
          s_tva[q].v[j] = in ? Tfinal[pix] * v_alpha[pix] : T(0);
          for (int64_t ch = 0; ch < D; ++ch) s_vr[q * D + ch].v[j] = in ? v_color[pix * D + ch] : T(0);
          s_sb[q].v[j] = T(0);
          cl = s_last[q].v[j] > cl ? s_last[q].v[j] : cl;
        }
        chunk_last[q] = cl;
        maxlast = cl > maxlast ? cl : maxlast;
      }
      for (int64_t k = maxlast; k >= s; --k) {
        const int64_t i = fid[k];
        if (k - kPrefetchAhead >= s)  // what mark reads of the Gaussian kPrefetchAhead further back
          __builtin_prefetch(&rec[fid[k - kPrefetchAhead]]);
        const GaussianRecord<T>& r = rec[i];
        int64_t qlo, qhi;
        if (!tc.mark(r.mx, r.my, r.su, qlo, qhi)) continue;
        const T* co = conics + 3 * i;
        // rows_apply of the rows the forward asked it of: all of them where the support covers the tile
        // (asked only on 16 x 16 tiles, where it can hold)
        const bool covers = tc.rows16() && tc.covers_tile(r.mx, r.my, r.su);
        const int64_t blo = covers ? 0 : qlo, bhi = covers ? nchunks - 1 : qhi;
        const bool by_rows = rows_apply(r, tc, blo, bhi);
        const int64_t row0 = by_rows ? blo / 2 : -1;
        const GaussIn<T> p{r.mx, r.my, co[0], co[1], co[2], opac[i], static_cast<int32_t>(k), colors + D * i, D, r.bt,
                           row0, bhi / 2};
        backward_gaussian(p, tb, tc, chunk_last.data(), qlo, qhi, gg, my + i * K, absgrad);
      }
    }
    // the threads' sums (complete after the loop's barrier), reduced by the same team
    std::vector<T> v(static_cast<size_t>(K));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < CN; ++i) {
      std::fill(v.begin(), v.end(), T(0));
      for (int th = 0; th < nthreads; ++th) {
        const T* src = sums.get() + (static_cast<size_t>(th) * CN + i) * K;
        for (int64_t k = 0; k < K; ++k) v[k] += src[k];
      }
      g_means2d[2 * i] = v[0];
      g_means2d[2 * i + 1] = v[1];
      for (int k = 0; k < 3; ++k) g_conics[3 * i + k] = v[2 + k];
      g_opac[i] = v[5];
      for (int64_t ch = 0; ch < D; ++ch) g_colors[D * i + ch] = v[6 + ch];
      if (absgrad) {
        g_means2d_abs[2 * i] = v[6 + D];
        g_means2d_abs[2 * i + 1] = v[7 + D];
      }
    }
  }
}

template void rasterize_backward_kernel<float>(const RasterBackwardParams<float>&);
template void rasterize_backward_kernel<double>(const RasterBackwardParams<double>&);

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
