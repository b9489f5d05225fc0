// Host-side (ATen) input checks of the splat rasterizer ops, shared by the CPU (csrc/cpu/splat_*.cpp)
// and CUDA (csrc/cuda/splat_cuda.cpp) bindings, so that both accept exactly the same inputs: shapes,
// dtypes and one device for all tensors of a call; and the checked tensors as the kernels' parameter
// structs (gsw/splat_params.h). Not for .cu files (they stay ATen-free).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "gsw/splat_params.h"

namespace gsw {
namespace splat {

// t on ref's device, with dtype dt.
inline void check_like(const at::Tensor& t, const char* op, const char* name, const at::Tensor& ref,
                       at::ScalarType dt) {
  TORCH_CHECK(t.device() == ref.device(), op, ": ", name, " must be on ", ref.device(), ", got ", t.device());
  TORCH_CHECK(t.scalar_type() == dt, op, ": ", name, " must have dtype ", dt, ", got ", t.scalar_type());
}

// t on ref's device, of a floating dtype (gradients and saved outputs are converted to ref's dtype).
inline void check_float_on(const at::Tensor& t, const char* op, const char* name, const at::Tensor& ref) {
  TORCH_CHECK(t.device() == ref.device(), op, ": ", name, " must be on ", ref.device(), ", got ", t.device());
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": ", name, " must be floating point, got ",
              t.scalar_type());
}

// t as a contiguous tensor of dtype dt: t itself, without an op call, when it already is one (a no-op
// aten::to still goes through the dispatcher, which a tiny call pays for on every input).
inline at::Tensor contiguous_as(const at::Tensor& t, at::ScalarType dt) {
  return t.scalar_type() == dt ? t.contiguous() : t.to(dt).contiguous();
}

inline at::ScalarType float_dtype(const at::Tensor& t, const char* op) {
  const auto dt = t.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble, op, ": dtype must be float32 or float64, got ", dt);
  return dt;
}

// splat_project / splat_project_backward: means [N,3], quats [N,4], scales [N,3], viewmats [C,4,4],
// Ks [C,3,3], one dtype (float32/float64) and one device.
inline void check_projection_inputs(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& scales,
                                    const at::Tensor& viewmats, const at::Tensor& Ks) {
  constexpr const char* op = "splat_project";
  TORCH_CHECK(means.dim() == 2 && means.size(1) == 3, op, ": means must be [N,3]");
  const int64_t N = means.size(0);
  TORCH_CHECK(quats.dim() == 2 && quats.size(0) == N && quats.size(1) == 4, op, ": quats must be [N,4]");
  TORCH_CHECK(scales.dim() == 2 && scales.size(0) == N && scales.size(1) == 3, op, ": scales must be [N,3]");
  TORCH_CHECK(viewmats.dim() == 3 && viewmats.size(1) == 4 && viewmats.size(2) == 4, op,
              ": viewmats must be [C,4,4]");
  TORCH_CHECK(Ks.dim() == 3 && Ks.size(0) == viewmats.size(0) && Ks.size(1) == 3 && Ks.size(2) == 3, op,
              ": Ks must be [C,3,3]");
  const auto dt = float_dtype(means, op);
  check_like(quats, op, "quats", means, dt);
  check_like(scales, op, "scales", means, dt);
  check_like(viewmats, op, "viewmats", means, dt);
  check_like(Ks, op, "Ks", means, dt);
}

// splat_project_backward's radii (int32 [C,N]) and output gradients (any float dtype, [C,N,...]).
inline void check_projection_grads(const at::Tensor& means, const at::Tensor& viewmats, const at::Tensor& radii,
                                   const at::Tensor& v_means2d, const at::Tensor& v_depths,
                                   const at::Tensor& v_conics, const at::Tensor& v_comps) {
  constexpr const char* op = "splat_project_backward";
  const int64_t C = viewmats.size(0), N = means.size(0);
  TORCH_CHECK(radii.sizes() == at::IntArrayRef({C, N}), op, ": radii must be int32 [C,N]");
  check_like(radii, op, "radii", means, at::kInt);
  TORCH_CHECK(v_means2d.numel() == C * N * 2 && v_depths.numel() == C * N && v_conics.numel() == C * N * 3 &&
                  v_comps.numel() == C * N,
              op, ": gradient shapes do not match [C,N]");
  check_float_on(v_means2d, op, "v_means2d", means);
  check_float_on(v_depths, op, "v_depths", means);
  check_float_on(v_conics, op, "v_conics", means);
  check_float_on(v_comps, op, "v_comps", means);
}

// The projection inputs of both bindings (contiguous tensors, after check_projection_inputs) as the
// kernels' struct.
template <typename T>
ProjectInputs<T> project_inputs(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& scales,
                                const at::Tensor& viewmats, const at::Tensor& Ks, int64_t width, int64_t height,
                                double eps2d, double near_plane, double far_plane) {
  ProjectInputs<T> in;
  in.means = means.data_ptr<T>();
  in.quats = quats.data_ptr<T>();
  in.scales = scales.data_ptr<T>();
  in.viewmats = viewmats.data_ptr<T>();
  in.Ks = Ks.data_ptr<T>();
  in.C = viewmats.size(0);
  in.N = means.size(0);
  in.width = width;
  in.height = height;
  in.eps2d = T(eps2d);
  in.near_plane = T(near_plane);
  in.far_plane = T(far_plane);
  return in;
}

// splat_view_dirs(_backward): means [N,3], viewmats [C,4,4], one dtype (float32/float64) and one device.
inline void check_view_dirs_inputs(const at::Tensor& means, const at::Tensor& viewmats) {
  constexpr const char* op = "splat_view_dirs";
  TORCH_CHECK(means.dim() == 2 && means.size(1) == 3, op, ": means must be [N,3]");
  TORCH_CHECK(viewmats.dim() == 3 && viewmats.size(1) == 4 && viewmats.size(2) == 4, op,
              ": viewmats must be [C,4,4]");
  check_like(viewmats, op, "viewmats", means, float_dtype(means, op));
}

// splat_view_dirs_backward's v_dirs: [C,N,3], any float dtype, on the means' device.
inline void check_view_dirs_grads(const at::Tensor& v_dirs, const at::Tensor& means, const at::Tensor& viewmats) {
  constexpr const char* op = "splat_view_dirs_backward";
  check_view_dirs_inputs(means, viewmats);
  TORCH_CHECK(v_dirs.dim() == 3 && v_dirs.size(0) == viewmats.size(0) && v_dirs.size(1) == means.size(0) &&
                  v_dirs.size(2) == 3,
              op, ": v_dirs must be [C,N,3]");
  check_float_on(v_dirs, op, "v_dirs", means);
}

// splat_sh_to_color(_backward): coeffs [N,K,3] with K >= (degree+1)^2, dirs [C,N,3], degree 0..3; or
// the split form: coeffs [N,1,3] (the DC row) and rest [N,K-1,3], same dtype and device.
inline void check_sh_inputs(const at::Tensor& coeffs, const at::Tensor& dirs, int64_t degree,
                            const c10::optional<at::Tensor>& rest = c10::nullopt) {
  constexpr const char* op = "splat_sh_to_color";
  TORCH_CHECK(degree >= 0 && degree <= 3, op, ": degree must be in 0..3, got ", degree);
  TORCH_CHECK(coeffs.dim() == 3 && coeffs.size(2) == 3, op, ": coeffs must be [N,K,3]");
  int64_t K = coeffs.size(1);
  const auto dt = float_dtype(coeffs, op);
  if (rest.has_value()) {
    TORCH_CHECK(coeffs.size(1) == 1, op, ": with coeffs_rest, coeffs must be the DC row [N,1,3]");
    TORCH_CHECK(rest->dim() == 3 && rest->size(0) == coeffs.size(0) && rest->size(2) == 3, op,
                ": coeffs_rest must be [N,K-1,3]");
    check_like(*rest, op, "coeffs_rest", coeffs, dt);
    K += rest->size(1);
  }
  TORCH_CHECK(K >= (degree + 1) * (degree + 1), op, ": the coefficients must have K >= (degree+1)^2 rows, got ", K);
  TORCH_CHECK(dirs.dim() == 3 && dirs.size(1) == coeffs.size(0) && dirs.size(2) == 3, op,
              ": dirs must be [C,N,3]");
  check_like(dirs, op, "dirs", coeffs, dt);
}

// splat_project(check_values=True): the error when means, quats or scales hold a NaN or an infinity,
// or a scale is negative (a ValueError in Python, with rasterize's names and words).
inline void check_projection_values(bool means_finite, bool quats_finite, bool scales_finite, bool scales_nonneg) {
  TORCH_CHECK_VALUE(means_finite, "means contains non-finite values (NaN or Inf)");
  TORCH_CHECK_VALUE(quats_finite, "quats contains non-finite values (NaN or Inf)");
  TORCH_CHECK_VALUE(scales_finite, "scales contains non-finite values (NaN or Inf)");
  TORCH_CHECK_VALUE(scales_nonneg, "scales must be non-negative (linear scales, not log-scales)");
}

// splat_sh_to_color(check_finite=True): the error when the coefficients hold a NaN or an infinity
// (a ValueError in Python, named after the tensor: coeffs or coeffs_rest).
inline void check_sh_finite(bool coeffs_finite, bool rest_finite) {
  TORCH_CHECK_VALUE(coeffs_finite, "coeffs contains non-finite values (NaN or Inf)");
  TORCH_CHECK_VALUE(rest_finite, "coeffs_rest contains non-finite values (NaN or Inf)");
}

inline void check_sh_grads(const at::Tensor& v_colors, const at::Tensor& coeffs, const at::Tensor& dirs) {
  constexpr const char* op = "splat_sh_to_color_backward";
  TORCH_CHECK(v_colors.numel() == dirs.size(0) * dirs.size(1) * 3, op, ": v_colors must be [C,N,3]");
  check_float_on(v_colors, op, "v_colors", coeffs);
}

// splat_isect_tiles: means2d [C,N,2] (float32/64), radii int32 [C,N], depths [C,N] (any float dtype),
// one device; C*N and the number of tiles C*tile_width*tile_height below 2^31 (int32 ids). conics
// [C,N,3] and opacities [C,N] (means2d's dtype), both or neither: with them, each 3-sigma box is cut
// to the bounding box of the Gaussian's alpha support (gsw/tile_cover.h). cut_saturated needs them.
inline void check_isect_inputs(const at::Tensor& means2d, const at::Tensor& radii, const at::Tensor& depths,
                               int64_t tile_size, int64_t tile_width, int64_t tile_height,
                               const std::optional<at::Tensor>& conics = std::nullopt,
                               const std::optional<at::Tensor>& opacities = std::nullopt,
                               bool cut_saturated = false) {
  constexpr const char* op = "splat_isect_tiles";
  TORCH_CHECK(means2d.dim() == 3 && means2d.size(2) == 2, op, ": means2d must be [C,N,2]");
  const int64_t C = means2d.size(0), N = means2d.size(1);
  float_dtype(means2d, op);
  TORCH_CHECK(radii.sizes() == at::IntArrayRef({C, N}), op, ": radii must be int32 [C,N]");
  check_like(radii, op, "radii", means2d, at::kInt);
  TORCH_CHECK(depths.sizes() == at::IntArrayRef({C, N}), op, ": depths must be [C,N]");
  check_float_on(depths, op, "depths", means2d);
  TORCH_CHECK(tile_size > 0 && tile_width >= 0 && tile_height >= 0, op, ": bad tile grid");
  TORCH_CHECK(C * N < (int64_t(1) << 31), op, ": C*N must fit in int32");
  TORCH_CHECK(tile_width == 0 || tile_height == 0 || C * tile_width * tile_height < (int64_t(1) << 31), op,
              ": the number of tiles C*tile_width*tile_height must fit in int32");
  TORCH_CHECK(conics.has_value() == opacities.has_value(), op, ": pass conics and opacities together, or neither");
  TORCH_CHECK(!cut_saturated || conics.has_value(), op, ": cut_saturated needs conics and opacities");
  if (conics.has_value()) {
    TORCH_CHECK(conics->sizes() == at::IntArrayRef({C, N, 3}), op, ": conics must be [C,N,3]");
    check_like(*conics, op, "conics", means2d, means2d.scalar_type());
    TORCH_CHECK(opacities->sizes() == at::IntArrayRef({C, N}), op, ": opacities must be [C,N]");
    check_like(*opacities, op, "opacities", means2d, means2d.scalar_type());
  }
}

// splat_rasterize(_backward): means2d [C,N,2], conics [C,N,3], colors [C,N,D] (any D >= 1),
// opacities [C,N], one dtype and device; tile_offsets int32 [C,th,tw] for tiles of tile_size pixels;
// flatten_ids int32 [M].
inline RasterDims check_raster_inputs(const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& colors,
                                      const at::Tensor& opacities, int64_t width, int64_t height, int64_t tile_size,
                                      const at::Tensor& tile_offsets, const at::Tensor& flatten_ids) {
  constexpr const char* op = "splat_rasterize";
  TORCH_CHECK(means2d.dim() == 3 && means2d.size(2) == 2, op, ": means2d must be [C,N,2]");
  const int64_t C = means2d.size(0), N = means2d.size(1);
  TORCH_CHECK(conics.dim() == 3 && conics.size(0) == C && conics.size(1) == N && conics.size(2) == 3, op,
              ": conics must be [C,N,3]");
  TORCH_CHECK(colors.dim() == 3 && colors.size(0) == C && colors.size(1) == N && colors.size(2) >= 1, op,
              ": colors must be [C,N,D]");
  TORCH_CHECK(opacities.dim() == 2 && opacities.size(0) == C && opacities.size(1) == N, op,
              ": opacities must be [C,N]");
  TORCH_CHECK(width > 0 && height > 0 && tile_size > 0, op, ": width, height, tile_size must be > 0");
  const int64_t tw = (width + tile_size - 1) / tile_size, th = (height + tile_size - 1) / tile_size;
  TORCH_CHECK(C * tw * th < (int64_t(1) << 31), op, ": the number of tiles C*tile_width*tile_height must fit in int32");
  TORCH_CHECK(tile_offsets.sizes() == at::IntArrayRef({C, th, tw}), op,
              ": tile_offsets must be int32 [C, ceil(H/tile), ceil(W/tile)]");
  TORCH_CHECK(flatten_ids.dim() == 1, op, ": flatten_ids must be int32 [M]");
  const auto dt = float_dtype(means2d, op);
  check_like(conics, op, "conics", means2d, dt);
  check_like(colors, op, "colors", means2d, dt);
  check_like(opacities, op, "opacities", means2d, dt);
  check_like(tile_offsets, op, "tile_offsets", means2d, at::kInt);
  check_like(flatten_ids, op, "flatten_ids", means2d, at::kInt);
  return raster_dims(C, N, colors.size(2), flatten_ids.size(0), width, height, tile_size);
}

// splat_rasterize_backward's saved forward outputs (transmittances [C,H,W] float, last_ids int32
// [C,H,W]) and output gradients (v_colors [C,H,W,D], v_alphas [C,H,W,1], any float dtype).
inline void check_raster_grads(const RasterDims& g, const at::Tensor& means2d, const at::Tensor& transmittances,
                               const at::Tensor& last_ids, const at::Tensor& v_colors, const at::Tensor& v_alphas) {
  constexpr const char* op = "splat_rasterize_backward";
  const int64_t P = g.C * g.H * g.W;
  TORCH_CHECK(transmittances.numel() == P && last_ids.numel() == P, op,
              ": transmittances and last_ids must be [C,H,W]");
  check_float_on(transmittances, op, "transmittances", means2d);
  check_like(last_ids, op, "last_ids", means2d, at::kInt);
  TORCH_CHECK(v_colors.numel() == P * g.D && v_alphas.numel() == P, op,
              ": v_colors must be [C,H,W,D] and v_alphas [C,H,W,1]");
  check_float_on(v_colors, op, "v_colors", means2d);
  check_float_on(v_alphas, op, "v_alphas", means2d);
}

// The rasterization inputs of both bindings (contiguous tensors, after check_raster_inputs) as the
// kernels' struct.
template <typename T>
RasterInputs<T> raster_inputs(const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& colors,
                              const at::Tensor& opacities, int64_t width, int64_t height, int64_t tile_size,
                              const at::Tensor& tile_offsets, const at::Tensor& flatten_ids) {
  RasterInputs<T> in;
  in.means2d = means2d.data_ptr<T>();
  in.conics = conics.data_ptr<T>();
  in.colors = colors.data_ptr<T>();
  in.opacities = opacities.data_ptr<T>();
  in.tile_offsets = tile_offsets.data_ptr<int32_t>();
  in.flatten_ids = flatten_ids.data_ptr<int32_t>();
  in.C = colors.size(0);
  in.N = colors.size(1);
  in.D = colors.size(2);
  in.M = flatten_ids.size(0);
  in.width = width;
  in.height = height;
  in.tile_size = tile_size;
  return in;
}

}  // namespace splat
}  // namespace gsw
