// Autograd of the rasterizer's tile intersection (none: integer outputs) and rasterization, in C++ (see
// splat_autograd.cpp): the rasterization backward is the analytic splat_rasterize_backward op.
// absgrad (the sum of per-pixel |dL/dmeans2d|, set as the Python attribute means2d.absgrad) is not
// produced here: gsworkbench.splat.ops.rasterize_to_pixels(absgrad=True) runs the op under a Python
// autograd.Function that does it (eager only).
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <tuple>

#include "gsw/autograd_util.h"

namespace gsw {
namespace splat {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Tensors5 = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;
using Tensors4 = std::tuple<Tensor, Tensor, Tensor, Tensor>;

Tensors4 call_rasterize(const Tensor& means2d, const Tensor& conics, const Tensor& colors, const Tensor& opacities,
                        int64_t width, int64_t height, int64_t tile_size, const Tensor& tile_offsets,
                        const Tensor& flatten_ids, bool absgrad, bool keep_state = true) {
  static const auto op = op_handle<Tensors4(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t,
                                            int64_t, int64_t, const Tensor&, const Tensor&, bool,
                                            bool)>("gsworkbench::splat_rasterize");
  return op.call(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids, absgrad,
                 keep_state);
}

Tensors5 call_rasterize_backward(const variable_list& s, int64_t width, int64_t height, int64_t tile_size,
                                 const Tensor& v_colors, const Tensor& v_alphas) {
  static const auto op = op_handle<Tensors5(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t,
                                            int64_t, int64_t, const Tensor&, const Tensor&, const Tensor&,
                                            const Tensor&, const Tensor&, const Tensor&,
                                            bool)>("gsworkbench::splat_rasterize_backward");
  return op.call(s[0], s[1], s[2], s[3], width, height, tile_size, s[4], s[5], s[6], s[7], v_colors, v_alphas,
                 false);
}

// Saved: means2d, conics, colors, opacities, tile_offsets, flatten_ids, and the forward's transmittances
// and last contributors.
class Rasterize : public torch::autograd::Function<Rasterize> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& means2d, const Tensor& conics, const Tensor& colors,
                               const Tensor& opacities, int64_t width, int64_t height, int64_t tile_size,
                               const Tensor& tile_offsets, const Tensor& flatten_ids, bool absgrad,
                               bool /*keep_state: the backward needs the state*/) {
    Tensors4 out;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      out = call_rasterize(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids,
                           absgrad);
    }
    auto& [render_colors, alphas, trans, last] = out;
    ctx->saved_data["width"] = width;
    ctx->saved_data["height"] = height;
    ctx->saved_data["tile_size"] = tile_size;
    ctx->set_materialize_grads(false);
    ctx->mark_non_differentiable({last});
    ctx->save_for_backward({means2d, conics, colors, opacities, tile_offsets, flatten_ids, trans, last});
    return {render_colors, alphas, trans, last};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor& v_colors = grads[0];
    const Tensor& v_alphas = grads[1];
    const Tensor& v_trans = grads[2];
    TORCH_CHECK_NOT_IMPLEMENTED(!v_trans.defined() || !v_trans.ne(0).any().item<bool>(),
                                "splat_rasterize: gradients through the transmittance output are not supported");
    variable_list out(11);
    if (!v_colors.defined() && !v_alphas.defined()) return out;
    const variable_list s = ctx->get_saved_variables();
    const Tensor& colors = s[2];
    const Tensor& trans = s[6];
    const int64_t C = trans.size(0), H = trans.size(1), W = trans.size(2);
    auto [gm, gc, gcol, go, gabs] = call_rasterize_backward(
        s, ctx->saved_data["width"].toInt(), ctx->saved_data["height"].toInt(), ctx->saved_data["tile_size"].toInt(),
        v_colors.defined() ? v_colors : at::zeros({C, H, W, colors.size(2)}, colors.options()),
        v_alphas.defined() ? v_alphas : at::zeros({C, H, W, 1}, colors.options()));
    out[0] = gm;
    out[1] = gc;
    out[2] = gcol;
    out[3] = go;
    return out;
  }
};

// Tile intersection has no gradient (integer outputs): straight to the kernel, whether or not the inputs
// require grad (so callers need not detach them).
Tensors4 isect_tiles_autograd(const Tensor& means2d, const Tensor& radii, const Tensor& depths, int64_t tile_size,
                              int64_t tile_width, int64_t tile_height, const std::optional<Tensor>& conics,
                              const std::optional<Tensor>& opacities, bool cut_saturated) {
  static const auto op =
      op_handle<Tensors4(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t,
                         const std::optional<Tensor>&, const std::optional<Tensor>&, bool)>(
          "gsworkbench::splat_isect_tiles");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(means2d, radii, depths, tile_size, tile_width, tile_height, conics, opacities, cut_saturated);
}

// absgrad=True asks for means2d.absgrad, which only the Python wrapper provides (see the top of the file):
// here the input gradients are the same, and the flag is passed on to the forward kernel (which ignores it).
// keep_state=False holds only where no gradient is recorded: the backward reads the state.
Tensors4 rasterize_autograd(const Tensor& means2d, const Tensor& conics, const Tensor& colors, const Tensor& opacities,
                            int64_t width, int64_t height, int64_t tile_size, const Tensor& tile_offsets,
                            const Tensor& flatten_ids, bool absgrad, bool keep_state) {
  if (absgrad && at::GradMode::is_enabled() && means2d.requires_grad()) {
    TORCH_WARN_ONCE(
        "splat_rasterize(absgrad=True) called directly computes no means2d.absgrad; use "
        "gsworkbench.splat.ops.rasterize_to_pixels(absgrad=True) or rasterize(absgrad=True)");
  }
  if (!records_grad(means2d, conics, colors, opacities)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_rasterize(means2d, conics, colors, opacities, width, height, tile_size, tile_offsets, flatten_ids,
                          absgrad, keep_state);
  }
  const variable_list out = Rasterize::apply(means2d, conics, colors, opacities, width, height, tile_size,
                                             tile_offsets, flatten_ids, absgrad, keep_state);
  return {out[0], out[1], out[2], out[3]};
}

}  // namespace
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, Autograd, m) {
  m.impl("splat_isect_tiles", &gsw::splat::isect_tiles_autograd);
  m.impl("splat_rasterize", &gsw::splat::rasterize_autograd);
}
