// Autograd of the rasterizer's projection, view-direction and SH ops, in C++ (as field_autograd.cpp for
// the field; tile intersection and rasterization: splat_rasterize_autograd.cpp): the backwards are the
// analytic *_backward ops. C++ because a Python autograd layer (torch.library.register_autograd) would
// cost a tiny call more than its kernels, in the forward and again in the backward.
#include "gsw/aten_ops.h"  // first: before any ATen header

#include <ATen/ops/zeros.h>
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
using Tensors2 = std::tuple<Tensor, Tensor>;

Tensors5 call_project(const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& viewmats,
                      const Tensor& Ks, int64_t width, int64_t height, double eps2d, double near_plane,
                      double far_plane, bool check_values) {
  static const auto op =
      op_handle<Tensors5(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t,
                         double, double, double, bool)>("gsworkbench::splat_project");
  return op.call(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane, check_values);
}

Tensors4 call_project_backward(const variable_list& s, int64_t width, int64_t height, double eps2d,
                               double near_plane, double far_plane, const Tensor& v_means2d,
                               const Tensor& v_depths, const Tensor& v_conics, const Tensor& v_comps) {
  static const auto op = op_handle<Tensors4(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                            int64_t, int64_t, double, double, double, const Tensor&, const Tensor&,
                                            const Tensor&, const Tensor&,
                                            const Tensor&)>("gsworkbench::splat_project_backward");
  return op.call(s[0], s[1], s[2], s[3], s[4], width, height, eps2d, near_plane, far_plane, s[5], v_means2d,
                 v_depths, v_conics, v_comps);
}

using OptTensor = c10::optional<Tensor>;
using Tensors3 = std::tuple<Tensor, Tensor, Tensor>;

Tensor call_sh(const Tensor& coeffs, const Tensor& dirs, int64_t degree, const OptTensor& rest, bool check_finite) {
  static const auto op = op_handle<Tensor(const Tensor&, const Tensor&, int64_t, const OptTensor&, bool)>(
      "gsworkbench::splat_sh_to_color");
  return op.call(coeffs, dirs, degree, rest, check_finite);
}

Tensors3 call_sh_backward(const Tensor& v_colors, const Tensor& coeffs, const Tensor& dirs, int64_t degree,
                          const OptTensor& rest) {
  static const auto op = op_handle<Tensors3(const Tensor&, const Tensor&, const Tensor&, int64_t, const OptTensor&)>(
      "gsworkbench::splat_sh_to_color_backward");
  return op.call(v_colors, coeffs, dirs, degree, rest);
}

// The optional coefficient rows as saved (an undefined tensor for none) and back.
Tensor saved_or_undefined(const OptTensor& t) { return t.has_value() ? *t : Tensor(); }
OptTensor optional_of(const Tensor& t) { return t.defined() ? OptTensor(t) : c10::nullopt; }

Tensor call_view_dirs(const Tensor& means, const Tensor& viewmats) {
  static const auto op = op_handle<Tensor(const Tensor&, const Tensor&)>("gsworkbench::splat_view_dirs");
  return op.call(means, viewmats);
}

Tensors2 call_view_dirs_backward(const Tensor& v_dirs, const Tensor& means, const Tensor& viewmats) {
  static const auto op = op_handle<Tensors2(const Tensor&, const Tensor&,
                                            const Tensor&)>("gsworkbench::splat_view_dirs_backward");
  return op.call(v_dirs, means, viewmats);
}

class Project : public torch::autograd::Function<Project> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& means, const Tensor& quats, const Tensor& scales,
                               const Tensor& viewmats, const Tensor& Ks, int64_t width, int64_t height, double eps2d,
                               double near_plane, double far_plane, bool check_values) {
    Tensors5 out;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      out = call_project(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane,
                         check_values);
    }
    auto& [radii, means2d, depths, conics, comps] = out;
    ctx->saved_data["width"] = width;
    ctx->saved_data["height"] = height;
    ctx->saved_data["eps2d"] = eps2d;
    ctx->saved_data["near_plane"] = near_plane;
    ctx->saved_data["far_plane"] = far_plane;
    ctx->set_materialize_grads(false);  // unused outputs' gradients stay undefined, not zero tensors
    ctx->mark_non_differentiable({radii});
    ctx->save_for_backward({means, quats, scales, viewmats, Ks, radii});
    return {radii, means2d, depths, conics, comps};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    const Tensor& v_means2d = grads[1];
    const Tensor& v_depths = grads[2];
    const Tensor& v_conics = grads[3];
    const Tensor& v_comps = grads[4];
    variable_list out(11);
    if (!v_means2d.defined() && !v_depths.defined() && !v_conics.defined() && !v_comps.defined()) return out;
    const Tensor& radii = s[5];
    const int64_t C = radii.size(0), N = radii.size(1);
    auto zeros_or = [&](const Tensor& g, at::IntArrayRef shape) {
      return g.defined() ? g : at::zeros(shape, s[0].options());
    };
    auto [gm, gq, gs, gv] = call_project_backward(
        s, ctx->saved_data["width"].toInt(), ctx->saved_data["height"].toInt(), ctx->saved_data["eps2d"].toDouble(),
        ctx->saved_data["near_plane"].toDouble(), ctx->saved_data["far_plane"].toDouble(),
        zeros_or(v_means2d, {C, N, 2}), zeros_or(v_depths, {C, N}), zeros_or(v_conics, {C, N, 3}),
        zeros_or(v_comps, {C, N}));
    out[0] = gm;
    out[1] = gq;
    out[2] = gs;
    out[3] = gv;
    return out;
  }
};

class ShToColor : public torch::autograd::Function<ShToColor> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& coeffs, const Tensor& dirs, int64_t degree,
                        const OptTensor& rest, bool check_finite) {
    ctx->saved_data["degree"] = degree;
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({coeffs, dirs, saved_or_undefined(rest)});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_sh(coeffs, dirs, degree, rest, check_finite);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    const variable_list s = ctx->get_saved_variables();
    const OptTensor rest = optional_of(s[2]);
    auto [gc, gd, gr] = call_sh_backward(grads[0], s[0], s[1], ctx->saved_data["degree"].toInt(), rest);
    return {gc, gd, Tensor(), rest.has_value() ? gr : Tensor(), Tensor()};
  }
};

class ViewDirs : public torch::autograd::Function<ViewDirs> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& means, const Tensor& viewmats) {
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({means, viewmats});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_view_dirs(means, viewmats);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    const variable_list s = ctx->get_saved_variables();
    auto [gm, gv] = call_view_dirs_backward(grads[0], s[0], s[1]);
    return {gm, gv};
  }
};

// sh_to_color(coeffs, view_dirs(means, viewmats), degree) as one node: a tiny call pays for each node in
// both directions, and for summing two gradients into the means and the viewmats (the projection's too).
class ShColorsFromCameras : public torch::autograd::Function<ShColorsFromCameras> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& coeffs, const Tensor& means, const Tensor& viewmats,
                        int64_t degree, const OptTensor& rest, bool check_finite) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    const Tensor dirs = call_view_dirs(means, viewmats);
    ctx->saved_data["degree"] = degree;
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({coeffs, means, viewmats, dirs, saved_or_undefined(rest)});
    return call_sh(coeffs, dirs, degree, rest, check_finite);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    const variable_list s = ctx->get_saved_variables();
    const OptTensor rest = optional_of(s[4]);
    auto [gc, gd, gr] = call_sh_backward(grads[0], s[0], s[3], ctx->saved_data["degree"].toInt(), rest);
    auto [gm, gv] = call_view_dirs_backward(gd, s[1], s[2]);
    return {gc, gm, gv, Tensor(), rest.has_value() ? gr : Tensor(), Tensor()};
  }
};

Tensors5 project_autograd(const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& viewmats,
                          const Tensor& Ks, int64_t width, int64_t height, double eps2d, double near_plane,
                          double far_plane, bool check_values) {
  if (!records_grad(means, quats, scales, viewmats, Ks)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_project(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane,
                        check_values);
  }
  const variable_list out =
      Project::apply(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane, check_values);
  return {out[0], out[1], out[2], out[3], out[4]};
}

Tensor sh_to_color_autograd(const Tensor& coeffs, const Tensor& dirs, int64_t degree, const OptTensor& rest,
                            bool check_finite) {
  if (!records_grad(coeffs, dirs) && !(rest.has_value() && records_grad(*rest))) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_sh(coeffs, dirs, degree, rest, check_finite);
  }
  return ShToColor::apply(coeffs, dirs, degree, rest, check_finite);
}

Tensor view_dirs_autograd(const Tensor& means, const Tensor& viewmats) {
  if (!records_grad(means, viewmats)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_view_dirs(means, viewmats);
  }
  return ViewDirs::apply(means, viewmats);
}

Tensor sh_colors_from_cameras_autograd(const Tensor& coeffs, const Tensor& means, const Tensor& viewmats,
                                       int64_t degree, const OptTensor& rest, bool check_finite) {
  if (!records_grad(coeffs, means, viewmats) && !(rest.has_value() && records_grad(*rest))) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_sh(coeffs, call_view_dirs(means, viewmats), degree, rest, check_finite);
  }
  return ShColorsFromCameras::apply(coeffs, means, viewmats, degree, rest, check_finite);
}

}  // namespace
}  // namespace splat
}  // namespace gsw

TORCH_LIBRARY_IMPL(gsworkbench, Autograd, m) {
  m.impl("splat_project", &gsw::splat::project_autograd);
  m.impl("splat_sh_to_color", &gsw::splat::sh_to_color_autograd);
  m.impl("splat_view_dirs", &gsw::splat::view_dirs_autograd);
  m.impl("splat_sh_colors_from_cameras", &gsw::splat::sh_colors_from_cameras_autograd);
}
