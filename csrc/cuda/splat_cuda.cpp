// CUDA bindings of the splat rasterizer ops (schemas in csrc/gsworkbench.cpp, kernels in splat_*.cu).
// Compiled by setup.py only in CUDA builds. Thin: the input checks shared with the CPU bindings
// (gsw/splat_op.h), output allocation, launcher calls.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "gsw/splat_op.h"
#include "splat.h"

namespace gsw {
namespace splat {
namespace cuda {
namespace {

using at::Tensor;

// The dispatcher sends a call here when any tensor argument is a CUDA tensor; the shared checks then
// require every tensor on that one device.
void check_cuda(const Tensor& t, const char* op) {
  TORCH_CHECK(t.is_cuda(), op, " (CUDA): inputs must be CUDA tensors");
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_cuda(const Tensor& means, const Tensor& quats,
                                                                const Tensor& scales, const Tensor& viewmats,
                                                                const Tensor& Ks, int64_t width, int64_t height,
                                                                double eps2d, double near_plane, double far_plane,
                                                                bool check_values) {
  check_projection_inputs(means, quats, scales, viewmats, Ks);
  check_cuda(means, "splat_project");
  if (check_values)  // a few reductions and syncs (the CPU kernel scans as it reads)
    check_projection_values(at::isfinite(means).all().item<bool>(), at::isfinite(quats).all().item<bool>(),
                            at::isfinite(scales).all().item<bool>(),
                            scales.numel() == 0 || scales.min().item<double>() >= 0.0);
  const auto dt = means.scalar_type();
  const c10::cuda::CUDAGuard guard(means.device());
  const auto mu = means.contiguous(), q = quats.contiguous(), s = scales.contiguous();
  const auto vm = viewmats.contiguous(), K = Ks.contiguous();
  const int64_t N = mu.size(0), C = vm.size(0);
  auto radii = at::empty({C, N}, mu.options().dtype(at::kInt));
  auto means2d = at::empty({C, N, 2}, mu.options());
  auto depths = at::empty({C, N}, mu.options());
  auto conics = at::empty({C, N, 3}, mu.options());
  auto comps = at::empty({C, N}, mu.options());
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_project_cuda", [&] {
    ProjectForwardParams<scalar_t> p;
    p.in = project_inputs<scalar_t>(mu, q, s, vm, K, width, height, eps2d, near_plane, far_plane);
    p.radii = radii.data_ptr<int32_t>();
    p.means2d = means2d.data_ptr<scalar_t>();
    p.depths = depths.data_ptr<scalar_t>();
    p.conics = conics.data_ptr<scalar_t>();
    p.comps = comps.data_ptr<scalar_t>();
    project_forward<scalar_t>(p, stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {radii, means2d, depths, conics, comps};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> project_backward_cuda(
    const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& viewmats, const Tensor& Ks,
    int64_t width, int64_t height, double eps2d, double near_plane, double far_plane, const Tensor& radii,
    const Tensor& v_means2d, const Tensor& v_depths, const Tensor& v_conics, const Tensor& v_comps) {
  check_projection_inputs(means, quats, scales, viewmats, Ks);
  check_projection_grads(means, viewmats, radii, v_means2d, v_depths, v_conics, v_comps);
  check_cuda(means, "splat_project_backward");
  const auto dt = means.scalar_type();
  const c10::cuda::CUDAGuard guard(means.device());
  const auto mu = means.contiguous(), q = quats.contiguous(), s = scales.contiguous();
  const auto vm = viewmats.contiguous(), K = Ks.contiguous(), r = radii.contiguous();
  const auto g2 = v_means2d.to(dt).contiguous(), gd = v_depths.to(dt).contiguous();
  const auto gc = v_conics.to(dt).contiguous(), gp = v_comps.to(dt).contiguous();
  auto v_means = at::zeros_like(mu), v_quats = at::zeros_like(q), v_scales = at::zeros_like(s);
  auto v_view = at::zeros_like(vm);
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_project_backward_cuda", [&] {
    ProjectBackwardParams<scalar_t> p;
    p.in = project_inputs<scalar_t>(mu, q, s, vm, K, width, height, eps2d, near_plane, far_plane);
    p.radii = r.data_ptr<int32_t>();
    p.v_means2d = g2.data_ptr<scalar_t>();
    p.v_depths = gd.data_ptr<scalar_t>();
    p.v_conics = gc.data_ptr<scalar_t>();
    p.v_comps = gp.data_ptr<scalar_t>();
    p.v_means = v_means.data_ptr<scalar_t>();
    p.v_quats = v_quats.data_ptr<scalar_t>();
    p.v_scales = v_scales.data_ptr<scalar_t>();
    p.v_viewmats = v_view.data_ptr<scalar_t>();
    project_backward<scalar_t>(p, stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {v_means, v_quats, v_scales, v_view};
}

// The CUDA kernels read one [N,K,3] block: the split form (coeffs_rest given) is concatenated here.
Tensor sh_block(const Tensor& coeffs, const c10::optional<Tensor>& rest) {
  return rest.has_value() ? at::cat({coeffs, *rest}, 1) : coeffs.contiguous();
}

Tensor sh_to_color_cuda(const Tensor& coeffs, const Tensor& dirs, int64_t degree,
                        const c10::optional<Tensor>& rest, bool check_finite) {
  check_sh_inputs(coeffs, dirs, degree, rest);
  check_cuda(coeffs, "splat_sh_to_color");
  if (check_finite)  // one reduction and one sync per tensor (the CPU kernel scans as it reads)
    check_sh_finite(at::isfinite(coeffs).all().item<bool>(),
                    !rest.has_value() || at::isfinite(*rest).all().item<bool>());
  const auto dt = coeffs.scalar_type();
  const c10::cuda::CUDAGuard guard(coeffs.device());
  const auto co = sh_block(coeffs, rest), d = dirs.contiguous();
  const int64_t C = d.size(0), N = d.size(1), K = co.size(1);
  auto out = at::empty({C, N, 3}, co.options());
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_sh_to_color_cuda", [&] {
    sh_forward<scalar_t>(co.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(), C, N, K, static_cast<int>(degree),
                         out.data_ptr<scalar_t>(), stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::tuple<Tensor, Tensor, Tensor> sh_to_color_backward_cuda(const Tensor& v_colors, const Tensor& coeffs,
                                                             const Tensor& dirs, int64_t degree,
                                                             const c10::optional<Tensor>& rest) {
  check_sh_inputs(coeffs, dirs, degree, rest);
  check_sh_grads(v_colors, coeffs, dirs);
  check_cuda(coeffs, "splat_sh_to_color_backward");
  const auto dt = coeffs.scalar_type();
  const c10::cuda::CUDAGuard guard(coeffs.device());
  const auto co = sh_block(coeffs, rest), d = dirs.contiguous(), vc = v_colors.to(dt).contiguous();
  const int64_t C = d.size(0), N = d.size(1), K = co.size(1);
  auto v_coeffs = at::zeros_like(co);
  auto v_dirs = at::zeros_like(d);
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_sh_to_color_backward_cuda", [&] {
    sh_backward<scalar_t>(vc.data_ptr<scalar_t>(), co.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(), C, N, K,
                          static_cast<int>(degree), v_coeffs.data_ptr<scalar_t>(), v_dirs.data_ptr<scalar_t>(),
                          stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (!rest.has_value()) return {v_coeffs, v_dirs, at::empty({0}, co.options())};
  return {v_coeffs.narrow(1, 0, 1).contiguous(), v_dirs, v_coeffs.narrow(1, 1, K - 1).contiguous()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> isect_tiles_cuda(const Tensor& means2d, const Tensor& radii,
                                                            const Tensor& depths, int64_t tile_size,
                                                            int64_t tile_width, int64_t tile_height,
                                                            const std::optional<Tensor>& conics,
                                                            const std::optional<Tensor>& opacities,
                                                            bool cut_saturated) {
  // cut_saturated permits shorter lists and demands none: this kernel returns the whole lists
  check_isect_inputs(means2d, radii, depths, tile_size, tile_width, tile_height, conics, opacities, cut_saturated);
  check_cuda(means2d, "splat_isect_tiles");
  const auto dt = means2d.scalar_type();
  const c10::cuda::CUDAGuard guard(means2d.device());
  const auto m2 = means2d.contiguous(), r = radii.contiguous(), d = depths.to(dt).contiguous();
  const bool cull = conics.has_value();
  const auto co = cull ? conics->contiguous() : Tensor(), op = cull ? opacities->contiguous() : Tensor();
  const int64_t C = m2.size(0), N = m2.size(1), CN = C * N, ntiles = C * tile_width * tile_height;
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  auto tiles_per_gauss = at::empty({C, N}, r.options());
  auto cum = at::empty({CN}, r.options());
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_isect_count_cuda", [&] {
    isect_count<scalar_t>(m2.data_ptr<scalar_t>(), r.data_ptr<int32_t>(), cull ? co.data_ptr<scalar_t>() : nullptr,
                          cull ? op.data_ptr<scalar_t>() : nullptr, CN, tile_size, tile_width, tile_height,
                          tiles_per_gauss.data_ptr<int32_t>(), stream);
  });
  // the total in int64 first (one sync): the int32 scan below cannot overflow once it is < 2^31
  const int64_t M = CN > 0 ? tiles_per_gauss.sum(at::kLong).item<int64_t>() : 0;
  TORCH_CHECK(M < (int64_t(1) << 31), "splat_isect_tiles: more than 2^31 intersections");
  auto scan_tmp = at::empty({static_cast<int64_t>(isect_scan_temp_bytes(CN)) + 1}, r.options().dtype(at::kByte));
  isect_scan(tiles_per_gauss.data_ptr<int32_t>(), cum.data_ptr<int32_t>(), CN, scan_tmp.data_ptr(),
             static_cast<size_t>(scan_tmp.numel()), stream);
  auto keys = at::empty({M}, r.options().dtype(at::kLong));
  auto ids = at::empty({M}, r.options());
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_isect_fill_cuda", [&] {
    isect_fill<scalar_t>(m2.data_ptr<scalar_t>(), r.data_ptr<int32_t>(), cull ? co.data_ptr<scalar_t>() : nullptr,
                         cull ? op.data_ptr<scalar_t>() : nullptr, d.data_ptr<scalar_t>(), cum.data_ptr<int32_t>(), C,
                         N, tile_size, tile_width, tile_height, keys.data_ptr<int64_t>(), ids.data_ptr<int32_t>(),
                         stream);
  });
  auto keys_sorted = at::empty_like(keys);
  auto ids_sorted = at::empty_like(ids);
  int tile_bits = 0;
  while ((int64_t(1) << tile_bits) < ntiles) ++tile_bits;
  auto sort_tmp = at::empty({static_cast<int64_t>(isect_sort_temp_bytes(M)) + 1}, r.options().dtype(at::kByte));
  isect_sort(keys.data_ptr<int64_t>(), ids.data_ptr<int32_t>(), keys_sorted.data_ptr<int64_t>(),
             ids_sorted.data_ptr<int32_t>(), M, 32 + tile_bits, sort_tmp.data_ptr(),
             static_cast<size_t>(sort_tmp.numel()), stream);
  auto offsets = at::empty({C, tile_height, tile_width}, r.options());
  isect_tile_offsets(keys_sorted.data_ptr<int64_t>(), M, ntiles, offsets.data_ptr<int32_t>(), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {tiles_per_gauss, keys_sorted, ids_sorted, offsets};
}

// The shared checks, and the CUDA grid: every tile size and channel count runs (the rasterizer splits large
// tiles over several blocks and many channels over several passes); only the grid size is bounded.
RasterDims check_raster(const Tensor& means2d, const Tensor& conics, const Tensor& colors, const Tensor& opacities,
                        int64_t width, int64_t height, int64_t tile_size, const Tensor& tile_offsets,
                        const Tensor& flatten_ids) {
  const RasterDims g = check_raster_inputs(means2d, conics, colors, opacities, width, height, tile_size,
                                           tile_offsets, flatten_ids);
  check_cuda(means2d, "splat_rasterize");
  TORCH_CHECK(raster_blocks(g.C, width, height, tile_size) < (int64_t(1) << 31),
              "splat_rasterize (CUDA): image too large for one launch (C * tiles * blocks per tile >= 2^31)");
  return g;
}

std::tuple<Tensor, Tensor, Tensor, Tensor> rasterize_cuda(const Tensor& means2d, const Tensor& conics,
                                                          const Tensor& colors, const Tensor& opacities,
                                                          int64_t width, int64_t height, int64_t tile_size,
                                                          const Tensor& tile_offsets, const Tensor& flatten_ids,
                                                          bool /*absgrad: read by the backward*/, bool keep_state) {
  check_raster(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids);
  const c10::cuda::CUDAGuard guard(means2d.device());
  const auto m2 = means2d.contiguous(), co = conics.contiguous(), col = colors.contiguous();
  const auto op = opacities.contiguous(), toff = tile_offsets.contiguous(), fid = flatten_ids.contiguous();
  const int64_t C = col.size(0), D = col.size(2);
  auto out_c = at::empty({C, height, width, D}, col.options());
  auto out_a = at::empty({C, height, width, 1}, col.options());
  auto out_t = at::empty({C, height, width}, col.options());
  auto out_l = at::empty({C, height, width}, col.options().dtype(at::kInt));
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(m2.scalar_type(), "splat_rasterize_cuda", [&] {
    RasterForwardParams<scalar_t> p;
    p.in = raster_inputs<scalar_t>(m2, co, col, op, width, height, tile_size, toff, fid);
    p.out_colors = out_c.data_ptr<scalar_t>();
    p.out_alphas = out_a.data_ptr<scalar_t>();
    p.out_trans = out_t.data_ptr<scalar_t>();
    p.out_last = out_l.data_ptr<int32_t>();
    rasterize_forward<scalar_t>(p, stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (!keep_state) return {out_c, out_a, at::empty({0}, out_t.options()), at::empty({0}, out_l.options())};
  return {out_c, out_a, out_t, out_l};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_backward_cuda(
    const Tensor& means2d, const Tensor& conics, const Tensor& colors, const Tensor& opacities, int64_t width,
    int64_t height, int64_t tile_size, const Tensor& tile_offsets, const Tensor& flatten_ids,
    const Tensor& transmittances, const Tensor& last_ids, const Tensor& v_colors, const Tensor& v_alphas,
    bool absgrad) {
  const RasterDims g =
      check_raster(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids);
  // a pass sees only its channels' share of a pixel's v_means2d, and |a| + |b| is not |a + b|
  TORCH_CHECK_NOT_IMPLEMENTED(!absgrad || g.D <= kChannelChunk,
                              "splat_rasterize_backward (CUDA): absgrad needs at most ", kChannelChunk,
                              " channels, got ", g.D);
  check_raster_grads(g, means2d, transmittances, last_ids, v_colors, v_alphas);
  const c10::cuda::CUDAGuard guard(means2d.device());
  const auto dt = means2d.scalar_type();
  const auto m2 = means2d.contiguous(), co = conics.contiguous(), col = colors.contiguous();
  const auto op = opacities.contiguous(), toff = tile_offsets.contiguous(), fid = flatten_ids.contiguous();
  const auto tr = transmittances.to(dt).contiguous(), last = last_ids.contiguous();
  const auto vc = v_colors.to(dt).contiguous(), va = v_alphas.to(dt).contiguous();
  auto g_m2 = at::zeros_like(m2), g_co = at::zeros_like(co), g_col = at::zeros_like(col), g_op = at::zeros_like(op);
  auto g_abs = absgrad ? at::zeros_like(m2) : at::empty({0}, m2.options());
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  AT_DISPATCH_FLOATING_TYPES(dt, "splat_rasterize_backward_cuda", [&] {
    RasterBackwardParams<scalar_t> p;
    p.in = raster_inputs<scalar_t>(m2, co, col, op, width, height, tile_size, toff, fid);
    p.trans = tr.data_ptr<scalar_t>();
    p.last_ids = last.data_ptr<int32_t>();
    p.v_out_colors = vc.data_ptr<scalar_t>();
    p.v_out_alphas = va.data_ptr<scalar_t>();
    p.v_means2d = g_m2.data_ptr<scalar_t>();
    p.v_conics = g_co.data_ptr<scalar_t>();
    p.v_colors = g_col.data_ptr<scalar_t>();
    p.v_opacities = g_op.data_ptr<scalar_t>();
    p.v_means2d_abs = absgrad ? g_abs.data_ptr<scalar_t>() : nullptr;
    rasterize_backward<scalar_t>(p, stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {g_m2, g_co, g_col, g_op, g_abs};
}

}  // namespace
}  // namespace cuda
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, CUDA, m) {
  m.impl("splat_project", &gsw::splat::cuda::project_cuda);
  m.impl("splat_project_backward", &gsw::splat::cuda::project_backward_cuda);
  m.impl("splat_sh_to_color", &gsw::splat::cuda::sh_to_color_cuda);
  m.impl("splat_sh_to_color_backward", &gsw::splat::cuda::sh_to_color_backward_cuda);
  m.impl("splat_isect_tiles", &gsw::splat::cuda::isect_tiles_cuda);
  m.impl("splat_rasterize", &gsw::splat::cuda::rasterize_cuda);
  m.impl("splat_rasterize_backward", &gsw::splat::cuda::rasterize_backward_cuda);
}
