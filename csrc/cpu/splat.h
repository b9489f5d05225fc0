// CPU kernels of the 3DGS tile rasterizer (splat_*.cpp), the twins of the CUDA launchers
// (csrc/cuda/splat.h): raw pointers, contiguous row-major layouts as documented in csrc/gsworkbench.cpp;
// the projection and rasterization kernels take the parameter structs of gsw/splat_params.h. No ATen
// headers: splat_cpu.cpp binds the kernels to the ops. T is float or double.
#pragma once

#include <cstdint>
#include <vector>

#include "gsw/splat_params.h"
#include "gsw/tile_cover.h"

namespace gsw {
namespace splat {
namespace cpu {

// ---- stage 1: projection ----------------------------------------------------------------------------

// What a checking projection (check_values) found in its inputs: false where means, quats or scales
// held a NaN or an infinity, or a scale was negative.
struct ProjectionScan {
  bool means_finite = true, quats_finite = true, scales_finite = true, scales_nonneg = true;
};

// With scan, the inputs are also checked as they are read (check_values).
template <typename T>
void project_forward_kernel(const ProjectForwardParams<T>& p, ProjectionScan* scan = nullptr);

// The input gradients are added to: the caller zeroes them first.
template <typename T>
void project_backward_kernel(const ProjectBackwardParams<T>& p);

// ---- view directions (CPU only: other devices run the ATen version) --------------------------------

// dirs[c, n, j] = means[n, j] + sum_k t_c[k] R_c[k, j] (= means[n] - centre_c), for viewmats vm [C,4,4].
template <typename T>
void view_dirs_kernel(const T* means, const T* vm, T* dirs, int64_t C, int64_t N);

// With g_c = sum_n v_dirs[c, n]: v_means[n] = sum_c v_dirs[c, n], v_R_c[k, j] = t_c[k] g_c[j],
// v_t_c[k] = sum_j R_c[k, j] g_c[j]; the bottom row of v_viewmats is zero. Both written whole.
template <typename T>
void view_dirs_backward_kernel(const T* v_dirs, const T* vm, T* v_means, T* v_vm, int64_t C, int64_t N);

// ---- stage 2: spherical harmonics -------------------------------------------------------------------

// The coefficients of Gaussian n: row 0 at c0 + n s0, rows 1.. at cr + n sr (gsw/sh.h sh_row). One
// [N,K,3] tensor: c0 = cr - 3 = its data, s0 = sr = 3K; the split form (sh0 [N,1,3], shN [N,K-1,3]):
// s0 = 3, sr = 3 (K - 1).
template <typename T>
struct ShRows {
  const T *c0, *cr;
  int64_t s0, sr;
};

// The coefficients that a checking forward (check_finite) scans: Gaussian n's values are
// a[n sa .. (n + 1) sa) and, in the split form, b[n sb .. (n + 1) sb) (b null otherwise); every row of
// the tensors, those the degree leaves unused too.
template <typename T>
struct ShScan {
  const T* a;
  int64_t sa;
  const T* b;
  int64_t sb;
};

// Colours o [C,N,3] of the coefficients co seen along the directions d [C,N,3]. With scan, the
// coefficients are also checked (finite_a, finite_b: false where a NaN or an infinity was found).
template <typename T>
void sh_forward_kernel(int64_t degree, ShRows<T> co, const T* d, T* o, int64_t C, int64_t N,
                       const ShScan<T>* scan = nullptr, bool* finite_a = nullptr, bool* finite_b = nullptr);

// Gradients of the coefficients (g0, gr: laid out as co.c0 and co.cr, same strides; the rows the degree
// uses are written, the others left as they are) and of the directions (gd [C,N,3], zeroed by the
// caller), from the colour gradients vc [C,N,3].
template <typename T>
void sh_backward_kernel(int64_t degree, ShRows<T> co, const T* d, const T* vc, T* g0, T* gr, T* gd, int64_t C,
                        int64_t N);

// ---- stage 3: tile intersection ---------------------------------------------------------------------

// The intersection's working arrays, kept by each calling thread from one call to the next
// (isect_scratch): at 10^5-10^6 Gaussians, fresh ones cost page faults and zero fills on every step
// (about 16 bytes per Gaussian, and 32 per visible one, stay allocated; with cut_saturated, 6 floats per
// visible one and 8 bytes per kept intersection more). Also the state isect_count leaves for isect_fill.
struct IsectScratch {
  std::vector<int32_t> box, sbox;
  std::vector<uint64_t> done;
  std::vector<std::vector<uint64_t>> kept;  // per part, grown to the largest call's entries
  std::vector<int64_t> kept_n;
  std::vector<uint64_t> order, tmp;
  std::vector<int64_t> hist, start;
  std::vector<uint32_t> count;
  std::vector<float> rec;
  std::vector<double> rec64;
  std::vector<RowSupport> rows;   // each Gaussian's (cut_saturated), by index
  std::vector<RowSupport> srows;  // the visible ones', in depth order (count_saturated)
  int nth = 1;       // parts of the passes
  bool cut = false;  // whether the lists were cut at saturation
};
IsectScratch& isect_scratch();

// Stage 3 in two calls around the allocation of its outputs. isect_count: each Gaussian's tiles
// (tiles_per_gauss [C*N], written whole), the visible ones sorted by depth (depths [C,N], float) and
// counted per tile; returns the number M of intersections. conics and opacities: both null (every tile
// of the 3-sigma box) or both set (the box cut to the alpha support, gsw/tile_cover.h); cut_saturated
// (with them) asks for the lists cut where their tiles saturate (gsw/tile_saturation.h), which it does
// where lists are long enough to gain. isect_fill then writes tile_offsets [C,th,tw], flatten_ids [M]
// and isect_ids [M] (tile << 32 | depth key) from the state isect_count left in sc.
template <typename T>
int64_t isect_count(const T* means2d, const int32_t* radii, const float* depths, const T* conics, const T* opacities,
                    int64_t C, int64_t N, int64_t tile_size, int64_t tile_width, int64_t tile_height,
                    bool cut_saturated, int32_t* tiles_per_gauss, IsectScratch& sc);
void isect_fill(const float* depths, int64_t C, int64_t N, int64_t tile_width, int64_t tile_height, int64_t M,
                IsectScratch& sc, int32_t* tile_offsets, int32_t* flatten_ids, int64_t* isect_ids);

// ---- stages 4 and 5: rasterization and its backward -------------------------------------------------

// What one thread of a counting forward did (rasterize_forward_kernel with Count): tiles, tile-Gaussian
// pairs whose support reaches a row of the tile, chunk blends, lanes whose pixel was still compositing
// at a blend, lanes that blended, and seconds inside its tiles.
struct LaneCounts {
  int64_t tiles = 0, pairs = 0, blends = 0, active = 0, blended = 0;
  double busy_s = 0.0;
};

// out_trans and out_last may be null (neither written). Count = true: the same kernel, also filling
// counts[thread] (the counting adds scalar loops per blend, so its times are not the kernel's; the plain
// instantiation has none of it).
template <typename T, bool Count = false>
void rasterize_forward_kernel(const RasterForwardParams<T>& p, LaneCounts* counts = nullptr);

// The input gradients are written whole.
template <typename T>
void rasterize_backward_kernel(const RasterBackwardParams<T>& p);

// ---- the background under the rasterized image (CPU only) ------------------------------------------

struct BgDims {
  int64_t C, P, D, nc;  // cameras, pixels per camera, channels, background channels
};

// out [C,P,D] = col + (1 - alpha) bg on the first nc channels, col on the others (alpha [C,P], bg [C,nc]).
template <typename T>
void composite_kernel(const BgDims& d, const T* col, const T* alpha, const T* bg, T* out);

// v_alpha[p] = -sum_ch v[p][ch] bg[cam][ch]; with v_bg (else nullptr), v_bg[cam][ch] = sum over the
// camera's pixels of v[p][ch] (1 - alpha[p]), summed in double per task of one camera's pixels.
template <typename T>
void composite_backward_kernel(const BgDims& d, const T* v, const T* alpha, const T* bg, T* v_alpha, T* v_bg);

}  // namespace cpu
}  // namespace splat
}  // namespace gsw
