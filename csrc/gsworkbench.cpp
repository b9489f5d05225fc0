// Every op schema of the gsworkbench library, in one place. Implementations register per dispatch key
// in csrc/cpu/*_cpu.cpp (CPU), csrc/cuda/*_cuda.cpp (CUDA), csrc/autograd/ (C++ autograd) and
// csrc/composite/ (ATen-op kernels for any device). Python wrappers and fake kernels live beside each
// capability in gsworkbench/ (e.g. gsworkbench/field/ops.py).
#include <Python.h>
#include <torch/library.h>

#include "gsw/ceilings.h"
#include "cpu/splat_simd.h"

#define GSW_STRINGIFY_(x) #x
#define GSW_STRINGIFY(x) GSW_STRINGIFY_(x)

extern "C" {
// Importing gsworkbench._C loads this library, which registers the ops. The module holds no functions,
// only what the CPU kernels were compiled for: `march` (setup.py's GSW_MARCH) and `avx512` (1 when the
// AVX-512 twins of the hot loops are in, 0 when the generic loops run) and `raster_lanes` (the CPU
// rasterizer's lanes per chunk: 8 for its AVX2 twin, 16 for its AVX-512 twin or the generic loops), so
// a test can tell which build it imported. `fma_lanes`, `fma_accumulators` and `fma_isa` give the
// shape and instruction set of the roofline's FMA loop (gsw/ceilings.h).
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
#if defined(GSW_MARCH)
  const char* march = GSW_STRINGIFY(GSW_MARCH);
#else
  const char* march = "unknown";
#endif
#if defined(__AVX512F__)
  const long avx512 = 1;
#else
  const long avx512 = 0;
#endif
  if (PyModule_AddStringConstant(m, "march", march) < 0 || PyModule_AddIntConstant(m, "avx512", avx512) < 0 ||
      PyModule_AddIntConstant(m, "raster_lanes", gsw::splat::cpu::kLanes) < 0 ||
      PyModule_AddIntConstant(m, "fma_lanes", gsw::ceilings::kFmaLanes) < 0 ||
      PyModule_AddIntConstant(m, "fma_accumulators", gsw::ceilings::kFmaAccumulators) < 0 ||
      PyModule_AddStringConstant(m, "fma_isa", gsw::ceilings::kFmaIsa) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
}

TORCH_LIBRARY(gsworkbench, m) {
  // ---- input checks (gsworkbench/validation.py) ----
  // per tensor (number of non-finite values, min, max) -> float64 [n, 3]
  m.def("tensor_stats(Tensor[] tensors) -> Tensor");

  // ---- field (gsworkbench/field/ops.py) ----
  // points [B,3], means [N,3], factors [N,3,3] lower Cholesky, weights [N] -> values [B]
  m.def("field_forward(Tensor points, Tensor means, Tensor factors, Tensor weights) -> Tensor");
  // -> (grad_points [B,3], grad_means [N,3], grad_factors [N,3,3], grad_weights [N])
  m.def(
      "field_backward(Tensor grad_values, Tensor points, Tensor means, Tensor factors, Tensor weights)"
      " -> (Tensor, Tensor, Tensor, Tensor)");

  // ---- transforms (gsworkbench/transforms/) ----
  // Writes F transformed copies of N splats into the out tensors (see csrc/include/gsw/transforms.h):
  // means [N,3], quats [N,4], log_scales [N,3], sh_rest [N,K,3]; per frame (Frames.params, computed
  // once in Python): affine [F,12] (A row-major, then b), quat_r [F,4] (wxyz) and log_s [F] with
  // A = s R(quat_r) for a similarity, sh_rot [F,K,K]; general=false: A = s R (quats rotated by quat_r,
  // log s added), general=true: any A with det > 0 (covariances re-decomposed per Gaussian).
  // out_means [F,N,3], out_quats [F,N,4], out_log_scales [F,N,3], out_sh_rest [F,N,K,3].
  m.def(
      "transform_splats(Tensor means, Tensor quats, Tensor log_scales, Tensor sh_rest, Tensor affine,"
      " Tensor quat_r, Tensor log_s, Tensor sh_rot, bool general, Tensor(a!) out_means, Tensor(b!) out_quats,"
      " Tensor(c!) out_log_scales, Tensor(d!) out_sh_rest) -> ()");

  // ---- splat rasterizer (gsworkbench/splat/) ----
  // 1. EWA projection: means [N,3], quats [N,4] (wxyz), scales [N,3], viewmats [C,4,4], Ks [C,3,3]
  //    -> (radii int32 [C,N], means2d [C,N,2], depths [C,N], conics [C,N,3], compensations [C,N]).
  //    check_values: a NaN or an infinity in means, quats or scales, or a negative scale, raises a
  //    ValueError (the CPU kernel scans each block of Gaussians as it reads it: no second pass)
  m.def(
      "splat_project(Tensor means, Tensor quats, Tensor scales, Tensor viewmats, Tensor Ks, int width, "
      "int height, float eps2d, float near_plane, float far_plane, bool check_values=False) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  //    -> (v_means [N,3], v_quats [N,4], v_scales [N,3], v_viewmats [C,4,4])
  m.def(
      "splat_project_backward(Tensor means, Tensor quats, Tensor scales, Tensor viewmats, Tensor Ks, int width, "
      "int height, float eps2d, float near_plane, float far_plane, Tensor radii, Tensor v_means2d, "
      "Tensor v_depths, Tensor v_conics, Tensor v_compensations) -> (Tensor, Tensor, Tensor, Tensor)");
  // 2. view directions (camera centre to mean) of the SH colours: means [N,3], viewmats [C,4,4] -> dirs [C,N,3]
  m.def("splat_view_dirs(Tensor means, Tensor viewmats) -> Tensor");
  //    -> (v_means [N,3], v_viewmats [C,4,4])
  m.def("splat_view_dirs_backward(Tensor v_dirs, Tensor means, Tensor viewmats) -> (Tensor, Tensor)");
  //    SH colours seen from the cameras, sh_to_color(coeffs, view_dirs(means, viewmats), degree) as one op
  //    (one autograd node, csrc/autograd/splat_autograd.cpp): coeffs [N,K,3], means [N,3],
  //    viewmats [C,4,4] -> [C,N,3]
  m.def(
      "splat_sh_colors_from_cameras(Tensor coeffs, Tensor means, Tensor viewmats, int degree, "
      "Tensor? coeffs_rest=None, bool check_finite=False) -> Tensor");
  //    SH to colour: coeffs [N,K,3], dirs [C,N,3] (camera centre to mean) -> colors [C,N,3]. With
  //    coeffs_rest [N,K-1,3], coeffs is the DC row [N,1,3] (3DGS's sh0 and shN kept apart: no
  //    concatenation per step; the coefficients are the two along dim 1). check_finite: a NaN or an
  //    infinity anywhere in coeffs or coeffs_rest raises a ValueError (the CPU kernel scans each block of
  //    coefficients as it reads it, so the input check costs no second pass over memory)
  m.def(
      "splat_sh_to_color(Tensor coeffs, Tensor dirs, int degree, Tensor? coeffs_rest=None, "
      "bool check_finite=False) -> Tensor");
  //    -> (v_coeffs [N,K,3] (or [N,1,3]), v_dirs [C,N,3], v_coeffs_rest [N,K-1,3] (or [0] without coeffs_rest))
  m.def(
      "splat_sh_to_color_backward(Tensor v_colors, Tensor coeffs, Tensor dirs, int degree, "
      "Tensor? coeffs_rest=None) -> (Tensor, Tensor, Tensor)");
  // 3. tile intersection: -> (tiles_per_gauss int32 [C,N], isect_ids int64 [M] (tile << 32 | depth bits),
  //    flatten_ids int32 [M] (c*N + n, sorted by tile then depth), tile_offsets int32 [C,th,tw]).
  //    cut_saturated (with conics and opacities): lists may end where every pixel of the tile has
  //    surely stopped compositing (gsw/tile_saturation.h; the CPU kernel cuts, the CUDA one does not)
  m.def(
      "splat_isect_tiles(Tensor means2d, Tensor radii, Tensor depths, int tile_size, int tile_width, "
      "int tile_height, Tensor? conics=None, Tensor? opacities=None, bool cut_saturated=False) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  // 4. rasterization: -> (colors [C,H,W,D], alphas [C,H,W,1], transmittances [C,H,W], last_ids int32 [C,H,W]).
  //    keep_state=False: transmittances and last_ids, which only the backward reads, come back empty ([0])
  //    and cost no memory traffic, unless the call records a gradient (its backward needs them)
  m.def(
      "splat_rasterize(Tensor means2d, Tensor conics, Tensor colors, Tensor opacities, int width, int height, "
      "int tile_size, Tensor tile_offsets, Tensor flatten_ids, bool absgrad=False, bool keep_state=True) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  //    absgrad (unused by the forward; read by its autograd) asks the backward for v_means2d_abs.
  //    -> (v_means2d [C,N,2], v_conics [C,N,3], v_colors [C,N,D], v_opacities [C,N],
  //        v_means2d_abs [C,N,2]: the sum over pixels of |dL/dmean2d| per component when absgrad, else [0])
  m.def(
      "splat_rasterize_backward(Tensor means2d, Tensor conics, Tensor colors, Tensor opacities, int width, "
      "int height, int tile_size, Tensor tile_offsets, Tensor flatten_ids, Tensor transmittances, "
      "Tensor last_ids, Tensor v_colors, Tensor v_alphas, bool absgrad=False) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  //    the forward's counting twin (CPU; gsworkbench/bench/rasterize_lanes.py) -> float64 [9]: threads that
  //    ran, tiles, tile-Gaussian pairs reaching a row, chunk blends, lanes active, lanes blended, busy
  //    seconds summed over threads and of the busiest thread, lanes per chunk
  m.def(
      "splat_rasterize_lane_counts(Tensor means2d, Tensor conics, Tensor colors, Tensor opacities, int width, "
      "int height, int tile_size, Tensor tile_offsets, Tensor flatten_ids) -> Tensor");

  // ---- background compositing of a render (gsworkbench/splat/rasterize.py; CPU) ----
  // colors [C,H,W,D], alphas [C,H,W,1], backgrounds [C,nc] (nc <= D)
  //    -> colors with (1 - alpha) backgrounds added to the first nc channels [C,H,W,D]
  m.def("splat_composite_background(Tensor colors, Tensor alphas, Tensor backgrounds) -> Tensor");
  //    -> v_alphas [C,H,W,1], v_backgrounds [C,nc] when bg_grad (else [0]); v_colors is v_out itself
  m.def(
      "splat_composite_background_backward(Tensor v_out, Tensor alphas, Tensor backgrounds, bool bg_grad) "
      "-> (Tensor, Tensor)");

  // ---- fused SSIM (gsworkbench/train/losses.py; CPU) ----
  // img, ref [H,W,C] (H, W >= 11) -> mean SSIM over the valid 11x11 Gaussian windows (sigma 1.5), a scalar
  m.def("ssim(Tensor img, Tensor ref) -> Tensor");
  //    -> d(mean SSIM)/d img [H,W,C], times grad (a scalar)
  m.def("ssim_backward(Tensor grad, Tensor img, Tensor ref) -> Tensor");

  // ---- the trainer's photometric loss terms in one pass (gsworkbench/train/losses.py; CPU) ----
  // img, ref [H,W,C] (H, W >= 11) -> terms [3] = (mean |img - ref|, mean SSIM, mean (img - ref)^2), and
  // d(mean SSIM)/d img [H,W,C] when with_grad (else an empty [0]), which the backward reuses
  m.def("photometric_terms(Tensor img, Tensor ref, bool with_grad) -> (Tensor, Tensor)");
  //    -> dL/d img [H,W,C] for dL/d terms = grad_terms [3], from the forward's ssim_grad
  m.def("photometric_terms_backward(Tensor grad_terms, Tensor img, Tensor ref, Tensor ssim_grad) -> Tensor");

  // ---- the machine's roofline ceilings (gsworkbench/profiling/ceilings.py; CPU, not differentiable) ----
  // FMA throughput: start [T, A, L] float32 (T threads, A accumulators of L lanes: gsworkbench._C.fma_*)
  //    -> each lane after `iterations` of x = x * a + b (2 A L T iterations flops)
  m.def("ceiling_fma(Tensor start, float a, float b, int iterations) -> Tensor");
  // STREAM triad: out[i] = b[i] + s * c[i] over 1-D float32 buffers of one length, in place in out
  m.def("ceiling_triad(Tensor(a!) out, Tensor b, Tensor c, float s) -> ()");
}
