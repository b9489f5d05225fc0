// CPU bindings of the splat rasterizer ops (schemas in csrc/gsworkbench.cpp, kernels in splat_*.cpp,
// declared in splat.h), the twin of csrc/cuda/splat_cuda.cpp. Thin: the input checks shared with the
// CUDA bindings (gsw/splat_op.h), contiguous copies, output allocation, kernel calls.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <omp.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "gsw/splat_op.h"
#include "splat.h"
#include "splat_simd.h"  // kLanes

namespace gsw {
namespace splat {
namespace cpu {
namespace {

using at::Tensor;

// The projection inputs of both ops, checked and contiguous.
struct ProjectTensors {
  Tensor means, quats, scales, viewmats, Ks;
  ProjectTensors(const Tensor& means_, const Tensor& quats_, const Tensor& scales_, const Tensor& viewmats_,
                 const Tensor& Ks_) {
    check_projection_inputs(means_, quats_, scales_, viewmats_, Ks_);
    means = means_.contiguous(), quats = quats_.contiguous(), scales = scales_.contiguous();
    viewmats = viewmats_.contiguous(), Ks = Ks_.contiguous();
  }
  template <typename T>
  ProjectInputs<T> inputs(int64_t width, int64_t height, double eps2d, double near_plane, double far_plane) const {
    return project_inputs<T>(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane);
  }
};

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_cpu(const Tensor& means_, const Tensor& quats_,
                                                               const Tensor& scales_, const Tensor& viewmats_,
                                                               const Tensor& Ks_, int64_t width, int64_t height,
                                                               double eps2d, double near_plane, double far_plane,
                                                               bool check_values) {
  const ProjectTensors in(means_, quats_, scales_, viewmats_, Ks_);
  const int64_t N = in.means.size(0), C = in.viewmats.size(0);
  const auto opt = in.means.options();
  auto radii = at::empty({C, N}, opt.dtype(at::kInt));
  auto means2d = at::empty({C, N, 2}, opt);
  auto depths = at::empty({C, N}, opt);
  auto conics = at::empty({C, N, 3}, opt);
  auto comps = at::empty({C, N}, opt);
  ProjectionScan scan;
  AT_DISPATCH_FLOATING_TYPES(in.means.scalar_type(), "splat_project_cpu", [&] {
    using T = scalar_t;
    ProjectForwardParams<T> p;
    p.in = in.inputs<T>(width, height, eps2d, near_plane, far_plane);
    p.radii = radii.data_ptr<int32_t>();
    p.means2d = means2d.data_ptr<T>();
    p.depths = depths.data_ptr<T>();
    p.conics = conics.data_ptr<T>();
    p.comps = comps.data_ptr<T>();
    project_forward_kernel<T>(p, check_values ? &scan : nullptr);
  });
  check_projection_values(scan.means_finite, scan.quats_finite, scan.scales_finite, scan.scales_nonneg);
  return {radii, means2d, depths, conics, comps};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> project_backward_cpu(
    const Tensor& means_, const Tensor& quats_, const Tensor& scales_, const Tensor& viewmats_, const Tensor& Ks_,
    int64_t width, int64_t height, double eps2d, double near_plane, double far_plane, const Tensor& radii_,
    const Tensor& v_means2d_, const Tensor& v_depths_, const Tensor& v_conics_, const Tensor& v_comps_) {
  const ProjectTensors in(means_, quats_, scales_, viewmats_, Ks_);
  const int64_t N = in.means.size(0), C = in.viewmats.size(0);
  const auto dt = in.means.scalar_type();
  check_projection_grads(means_, viewmats_, radii_, v_means2d_, v_depths_, v_conics_, v_comps_);
  const auto radii = radii_.contiguous();
  const auto v_means2d = contiguous_as(v_means2d_, dt), v_depths = contiguous_as(v_depths_, dt);
  const auto v_conics = contiguous_as(v_conics_, dt), v_comps = contiguous_as(v_comps_, dt);
  const auto opt = in.means.options();
  auto v_means = at::zeros({N, 3}, opt);
  auto v_quats = at::zeros({N, 4}, opt);
  auto v_scales = at::zeros({N, 3}, opt);
  auto v_viewmats = at::zeros({C, 4, 4}, opt);
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_project_backward_cpu", [&] {
    using T = scalar_t;
    ProjectBackwardParams<T> p;
    p.in = in.inputs<T>(width, height, eps2d, near_plane, far_plane);
    p.radii = radii.data_ptr<int32_t>();
    p.v_means2d = v_means2d.data_ptr<T>();
    p.v_depths = v_depths.data_ptr<T>();
    p.v_conics = v_conics.data_ptr<T>();
    p.v_comps = v_comps.data_ptr<T>();
    p.v_means = v_means.data_ptr<T>();
    p.v_quats = v_quats.data_ptr<T>();
    p.v_scales = v_scales.data_ptr<T>();
    p.v_viewmats = v_viewmats.data_ptr<T>();
    project_backward_kernel<T>(p);
  });
  return {v_means, v_quats, v_scales, v_viewmats};
}

Tensor view_dirs_cpu(const Tensor& means_, const Tensor& viewmats_) {
  check_view_dirs_inputs(means_, viewmats_);
  const Tensor means = means_.contiguous(), viewmats = viewmats_.contiguous();
  const int64_t C = viewmats.size(0), N = means.size(0);
  Tensor dirs = at::empty({C, N, 3}, means.options());
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "splat_view_dirs_cpu", [&] {
    view_dirs_kernel<scalar_t>(means.data_ptr<scalar_t>(), viewmats.data_ptr<scalar_t>(), dirs.data_ptr<scalar_t>(),
                               C, N);
  });
  return dirs;
}

std::tuple<Tensor, Tensor> view_dirs_backward_cpu(const Tensor& v_dirs_, const Tensor& means_,
                                                  const Tensor& viewmats_) {
  check_view_dirs_grads(v_dirs_, means_, viewmats_);
  const Tensor means = means_.contiguous(), viewmats = viewmats_.contiguous();
  const Tensor v_dirs = contiguous_as(v_dirs_, means.scalar_type());
  const int64_t C = viewmats.size(0), N = means.size(0);
  Tensor v_means = at::empty({N, 3}, means.options()), v_viewmats = at::empty({C, 4, 4}, means.options());
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "splat_view_dirs_backward_cpu", [&] {
    view_dirs_backward_kernel<scalar_t>(v_dirs.data_ptr<scalar_t>(), viewmats.data_ptr<scalar_t>(),
                                        v_means.data_ptr<scalar_t>(), v_viewmats.data_ptr<scalar_t>(), C, N);
  });
  return {v_means, v_viewmats};
}

// The SH inputs of both ops, checked and contiguous (rest: the split form's coeffs_rest, or none).
struct ShTensors {
  Tensor coeffs, dirs;
  c10::optional<Tensor> rest;
  ShTensors(const Tensor& coeffs_, const Tensor& dirs_, int64_t degree, const c10::optional<Tensor>& rest_) {
    check_sh_inputs(coeffs_, dirs_, degree, rest_);
    coeffs = coeffs_.contiguous(), dirs = dirs_.contiguous();
    if (rest_.has_value()) rest = rest_->contiguous();
  }
  // The rows of coeffs (and coeffs_rest, when given) as the kernels' ShRows.
  template <typename T>
  ShRows<T> rows() const {
    const T* c0 = coeffs.data_ptr<T>();
    if (!rest.has_value()) return {c0, c0 + 3, 3 * coeffs.size(1), 3 * coeffs.size(1)};
    return {c0, rest->data_ptr<T>(), 3, 3 * rest->size(1)};
  }
};

Tensor sh_to_color_cpu(const Tensor& coeffs_, const Tensor& dirs_, int64_t degree, const c10::optional<Tensor>& rest_,
                       bool check_finite) {
  const ShTensors in(coeffs_, dirs_, degree, rest_);
  const auto &coeffs = in.coeffs, &dirs = in.dirs;
  const auto& rest = in.rest;
  const int64_t C = dirs.size(0), N = dirs.size(1);
  auto out = at::empty({C, N, 3}, coeffs.options());
  bool finite = true, rest_finite = true;
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_cpu", [&] {
    using T = scalar_t;
    const ShScan<T> scan{coeffs.data_ptr<T>(), 3 * coeffs.size(1), rest.has_value() ? rest->data_ptr<T>() : nullptr,
                         rest.has_value() ? 3 * rest->size(1) : 0};
    sh_forward_kernel<T>(degree, in.rows<T>(), dirs.data_ptr<T>(), out.data_ptr<T>(), C, N,
                         check_finite ? &scan : nullptr, &finite, &rest_finite);
  });
  check_sh_finite(finite, rest_finite);
  return out;
}

std::tuple<Tensor, Tensor, Tensor> sh_to_color_backward_cpu(const Tensor& v_colors_, const Tensor& coeffs_,
                                                            const Tensor& dirs_, int64_t degree,
                                                            const c10::optional<Tensor>& rest_) {
  const ShTensors in(coeffs_, dirs_, degree, rest_);
  check_sh_grads(v_colors_, coeffs_, dirs_);
  const auto &coeffs = in.coeffs, &dirs = in.dirs;
  const auto& rest = in.rest;
  const auto v_colors = contiguous_as(v_colors_, coeffs.scalar_type());
  const int64_t C = dirs.size(0), N = dirs.size(1);
  const int64_t K = coeffs.size(1) + (rest.has_value() ? rest->size(1) : 0);
  // rows the degree uses are written by the kernel; only unused rows (K > (degree + 1)^2) need zeros
  const bool all_rows = K == (degree + 1) * (degree + 1);
  auto alloc = [&](const Tensor& t) { return all_rows ? at::empty_like(t) : at::zeros_like(t); };
  auto v_coeffs = alloc(coeffs);
  auto v_rest = rest.has_value() ? alloc(*rest) : at::empty({0}, coeffs.options());
  auto v_dirs = at::zeros_like(dirs);
  AT_DISPATCH_FLOATING_TYPES(coeffs.scalar_type(), "splat_sh_to_color_backward_cpu", [&] {
    using T = scalar_t;
    T* g0 = v_coeffs.data_ptr<T>();
    T* gr = rest.has_value() ? v_rest.data_ptr<T>() : g0 + 3;
    sh_backward_kernel<T>(degree, in.rows<T>(), dirs.data_ptr<T>(), v_colors.data_ptr<T>(), g0, gr,
                          v_dirs.data_ptr<T>(), C, N);
  });
  return {v_coeffs, v_dirs, v_rest};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> isect_tiles_cpu(const Tensor& means2d_, const Tensor& radii_,
                                                           const Tensor& depths_, int64_t tile_size,
                                                           int64_t tile_width, int64_t tile_height,
                                                           const std::optional<Tensor>& conics_,
                                                           const std::optional<Tensor>& opacities_,
                                                           bool cut_saturated) {
  check_isect_inputs(means2d_, radii_, depths_, tile_size, tile_width, tile_height, conics_, opacities_,
                     cut_saturated);
  const int64_t C = means2d_.size(0), N = means2d_.size(1);
  const auto radii = radii_.contiguous();
  const auto depths = contiguous_as(depths_, at::kFloat);
  const auto means2d = means2d_.contiguous();
  const bool cull = conics_.has_value();
  const auto conics = cull ? conics_->contiguous() : Tensor(), opac = cull ? opacities_->contiguous() : Tensor();
  auto tiles_per_gauss = at::zeros({C, N}, radii.options());
  IsectScratch& sc = isect_scratch();
  int64_t M = 0;
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "splat_isect_tiles_cpu", [&] {
    using T = scalar_t;
    M = isect_count<T>(means2d.data_ptr<T>(), radii.data_ptr<int32_t>(), depths.data_ptr<float>(),
                       cull ? conics.data_ptr<T>() : nullptr, cull ? opac.data_ptr<T>() : nullptr, C, N, tile_size,
                       tile_width, tile_height, cut_saturated, tiles_per_gauss.data_ptr<int32_t>(), sc);
  });
  TORCH_CHECK(M < (int64_t(1) << 31), "splat_isect_tiles: more than 2^31 intersections");
  auto isect_ids = at::empty({M}, radii.options().dtype(at::kLong));
  auto flatten_ids = at::empty({M}, radii.options());
  auto tile_offsets = at::empty({C, tile_height, tile_width}, radii.options());
  isect_fill(depths.data_ptr<float>(), C, N, tile_width, tile_height, M, sc, tile_offsets.data_ptr<int32_t>(),
             flatten_ids.data_ptr<int32_t>(), isect_ids.data_ptr<int64_t>());
  return {tiles_per_gauss, isect_ids, flatten_ids, tile_offsets};
}

// The rasterization inputs of the forward and backward, checked and contiguous.
struct RasterTensors {
  RasterDims g;
  Tensor means2d, conics, colors, opacities, tile_offsets, flatten_ids;
  RasterTensors(const Tensor& means2d_, const Tensor& conics_, const Tensor& colors_, const Tensor& opacities_,
                int64_t width, int64_t height, int64_t tile_size, const Tensor& tile_offsets_,
                const Tensor& flatten_ids_)
      : g(check_raster_inputs(means2d_, conics_, colors_, opacities_, width, height, tile_size, tile_offsets_,
                              flatten_ids_)) {
    means2d = means2d_.contiguous(), conics = conics_.contiguous(), colors = colors_.contiguous();
    opacities = opacities_.contiguous(), tile_offsets = tile_offsets_.contiguous();
    flatten_ids = flatten_ids_.contiguous();
  }
  template <typename T>
  RasterInputs<T> inputs() const {
    return raster_inputs<T>(means2d, conics, colors, opacities, g.W, g.H, g.ts, tile_offsets, flatten_ids);
  }
};

// Checks the inputs, allocates the outputs and runs the forward (its counting twin with Count, which
// fills counts[thread]): (colours, alphas, transmittances, last contributors); without keep_state the
// last two, which only the backward reads, are neither written nor allocated (returned empty, [0]).
template <bool Count>
std::tuple<Tensor, Tensor, Tensor, Tensor> run_forward(const RasterTensors& in, LaneCounts* counts,
                                                       bool keep_state = true) {
  const RasterDims& g = in.g;
  const auto opt = in.means2d.options();
  auto out_color = at::empty({g.C, g.H, g.W, g.D}, opt);
  auto out_alpha = at::empty({g.C, g.H, g.W, 1}, opt);
  auto out_T = keep_state ? at::empty({g.C, g.H, g.W}, opt) : at::empty({0}, opt);
  auto out_last = keep_state ? at::empty({g.C, g.H, g.W}, opt.dtype(at::kInt)) : at::empty({0}, opt.dtype(at::kInt));
  AT_DISPATCH_FLOATING_TYPES(in.means2d.scalar_type(), "splat_rasterize_cpu", [&] {
    using T = scalar_t;
    RasterForwardParams<T> p;
    p.in = in.inputs<T>();
    p.out_colors = out_color.data_ptr<T>();
    p.out_alphas = out_alpha.data_ptr<T>();
    p.out_trans = keep_state ? out_T.data_ptr<T>() : nullptr;
    p.out_last = keep_state ? out_last.data_ptr<int32_t>() : nullptr;
    rasterize_forward_kernel<T, Count>(p, counts);
  });
  return {out_color, out_alpha, out_T, out_last};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> rasterize_cpu(const Tensor& means2d, const Tensor& conics,
                                                         const Tensor& colors, const Tensor& opacities, int64_t width,
                                                         int64_t height, int64_t tile_size, const Tensor& tile_offsets,
                                                         const Tensor& flatten_ids,
                                                         bool /*absgrad: read by the backward*/, bool keep_state) {
  const RasterTensors in(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids);
  return run_forward<false>(in, nullptr, keep_state);
}

// The forward's counting twin: float64 [9] = threads that ran, tiles, tile-Gaussian pairs reaching a
// row, chunk blends, lanes active at a blend, lanes blended, the threads' summed and largest seconds
// inside their tiles, and the lanes of a chunk. The image is computed and dropped.
Tensor rasterize_lane_counts_cpu(const Tensor& means2d, const Tensor& conics, const Tensor& colors,
                                 const Tensor& opacities, int64_t width, int64_t height, int64_t tile_size,
                                 const Tensor& tile_offsets, const Tensor& flatten_ids) {
  const RasterTensors in(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids);
  std::vector<LaneCounts> per_thread(static_cast<size_t>(omp_get_max_threads()));
  run_forward<true>(in, per_thread.data());
  auto out = at::zeros({9}, means2d.options().dtype(at::kDouble));
  double* o = out.data_ptr<double>();
  for (const LaneCounts& c : per_thread) {
    o[0] += c.tiles > 0 ? 1.0 : 0.0;
    o[1] += double(c.tiles), o[2] += double(c.pairs), o[3] += double(c.blends);
    o[4] += double(c.active), o[5] += double(c.blended), o[6] += c.busy_s;
    o[7] = std::max(o[7], c.busy_s);
  }
  o[8] = kLanes;
  return out;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_backward_cpu(
    const Tensor& means2d_, const Tensor& conics_, const Tensor& colors_, const Tensor& opacities_, int64_t width,
    int64_t height, int64_t tile_size, const Tensor& tile_offsets_, const Tensor& flatten_ids_,
    const Tensor& transmittances_, const Tensor& last_ids_, const Tensor& v_colors_, const Tensor& v_alphas_,
    bool absgrad) {
  const RasterTensors in(means2d_, conics_, colors_, opacities_, width, height, tile_size, tile_offsets_,
                         flatten_ids_);
  const auto dt = means2d_.scalar_type();
  check_raster_grads(in.g, means2d_, transmittances_, last_ids_, v_colors_, v_alphas_);
  const auto Tf = contiguous_as(transmittances_, dt), last = last_ids_.contiguous();
  const auto vc = contiguous_as(v_colors_, dt), va = contiguous_as(v_alphas_, dt);
  auto g_means2d = at::empty_like(in.means2d);
  auto g_conics = at::empty_like(in.conics);
  auto g_colors = at::empty_like(in.colors);
  auto g_opac = at::empty_like(in.opacities);
  auto g_abs = absgrad ? at::empty_like(in.means2d) : at::empty({0}, in.means2d.options());
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_rasterize_backward_cpu", [&] {
    using T = scalar_t;
    RasterBackwardParams<T> p;
    p.in = in.inputs<T>();
    p.trans = Tf.data_ptr<T>();
    p.last_ids = last.data_ptr<int32_t>();
    p.v_out_colors = vc.data_ptr<T>();
    p.v_out_alphas = va.data_ptr<T>();
    p.v_means2d = g_means2d.data_ptr<T>();
    p.v_conics = g_conics.data_ptr<T>();
    p.v_colors = g_colors.data_ptr<T>();
    p.v_opacities = g_opac.data_ptr<T>();
    p.v_means2d_abs = absgrad ? g_abs.data_ptr<T>() : nullptr;
    rasterize_backward_kernel<T>(p);
  });
  return {g_means2d, g_conics, g_colors, g_opac, g_abs};
}

// colors [C,H,W,D], alphas [C,H,W,1] and backgrounds [C,nc] (nc <= D), one float dtype, CPU tensors.
BgDims check_background(const Tensor& colors, const Tensor& alphas, const Tensor& bg, const char* op) {
  TORCH_CHECK(colors.dim() == 4 && alphas.dim() == 4 && alphas.size(3) == 1 &&
                  colors.sizes().slice(0, 3) == alphas.sizes().slice(0, 3),
              op, ": colors must be [C,H,W,D] and alphas [C,H,W,1], got ", colors.sizes(), " and ", alphas.sizes());
  TORCH_CHECK(bg.dim() == 2 && bg.size(0) == colors.size(0) && bg.size(1) <= colors.size(3), op,
              ": backgrounds must be [C,nc] with nc <= D, got ", bg.sizes(), " for colors ", colors.sizes());
  TORCH_CHECK(colors.scalar_type() == alphas.scalar_type() && colors.scalar_type() == bg.scalar_type() &&
                  (colors.scalar_type() == at::kFloat || colors.scalar_type() == at::kDouble),
              op, ": colors, alphas and backgrounds must share one float dtype");
  TORCH_CHECK(colors.device().is_cpu() && alphas.device().is_cpu() && bg.device().is_cpu(), op,
              ": CPU tensors expected");
  return {colors.size(0), colors.size(1) * colors.size(2), colors.size(3), bg.size(1)};
}

Tensor composite_background_cpu(const Tensor& colors_, const Tensor& alphas_, const Tensor& bg_) {
  const BgDims d = check_background(colors_, alphas_, bg_, "splat_composite_background");
  const auto colors = colors_.contiguous(), alphas = alphas_.contiguous(), bg = bg_.contiguous();
  auto out = at::empty_like(colors);
  AT_DISPATCH_FLOATING_TYPES(colors.scalar_type(), "splat_composite_background_cpu", [&] {
    using T = scalar_t;
    composite_kernel<T>(d, colors.data_ptr<T>(), alphas.data_ptr<T>(), bg.data_ptr<T>(), out.data_ptr<T>());
  });
  return out;
}

std::tuple<Tensor, Tensor> composite_background_backward_cpu(const Tensor& v_out_, const Tensor& alphas_,
                                                             const Tensor& bg_, bool bg_grad) {
  const BgDims d = check_background(v_out_, alphas_, bg_, "splat_composite_background_backward");
  const auto v = v_out_.contiguous(), alphas = alphas_.contiguous(), bg = bg_.contiguous();
  auto v_alpha = at::empty_like(alphas);
  auto v_bg = bg_grad ? at::empty_like(bg) : at::empty({0}, bg.options());
  AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "splat_composite_background_backward_cpu", [&] {
    using T = scalar_t;
    composite_backward_kernel<T>(d, v.data_ptr<T>(), alphas.data_ptr<T>(), bg.data_ptr<T>(), v_alpha.data_ptr<T>(),
                                 bg_grad ? v_bg.data_ptr<T>() : nullptr);
  });
  return {v_alpha, v_bg};
}

}  // namespace
}  // namespace cpu
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CPU, m) {
  m.impl("splat_project", &gsw::splat::cpu::project_cpu);
  m.impl("splat_project_backward", &gsw::splat::cpu::project_backward_cpu);
  m.impl("splat_sh_to_color", &gsw::splat::cpu::sh_to_color_cpu);
  m.impl("splat_sh_to_color_backward", &gsw::splat::cpu::sh_to_color_backward_cpu);
  m.impl("splat_isect_tiles", &gsw::splat::cpu::isect_tiles_cpu);
  m.impl("splat_rasterize", &gsw::splat::cpu::rasterize_cpu);
  m.impl("splat_rasterize_lane_counts", &gsw::splat::cpu::rasterize_lane_counts_cpu);
  m.impl("splat_rasterize_backward", &gsw::splat::cpu::rasterize_backward_cpu);
  m.impl("splat_view_dirs", &gsw::splat::cpu::view_dirs_cpu);
  m.impl("splat_view_dirs_backward", &gsw::splat::cpu::view_dirs_backward_cpu);
  m.impl("splat_composite_background", &gsw::splat::cpu::composite_background_cpu);
  m.impl("splat_composite_background_backward", &gsw::splat::cpu::composite_background_backward_cpu);
}
