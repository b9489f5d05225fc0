// CPU kernels of the loss ops (ssim.cpp: the SSIM and its gradient; photometric_loss.cpp: the trainer's
// photometric terms in one pass). No ATen headers: losses_cpu.cpp binds them to the ops. Images are
// [H,W,C], contiguous, of the dimensions d (ssim_window.h). T is float or double.
#pragma once

#include <array>
#include <cstdint>

#include "ssim_window.h"

namespace gsw {
namespace ssim {

// The mean SSIM of x against y over every window and channel.
template <typename T>
double ssim_mean(const Dims& d, const T* x, const T* y);

// o = g dS/dx, S the sum of the SSIM over every window and channel.
template <typename T>
void ssim_grad(const Dims& d, const T* x, const T* y, T g, T* o);

// (sum |x - y|, sum of S, sum (x - y)^2), and with g (else null) the SSIM gradient scaled to the mean.
template <typename T>
std::array<double, 3> terms_kernel(const Dims& d, const T* x, const T* y, T* g);

// o = ga sign(x - y) + gs G + gq (x - y), elementwise over n values.
template <typename T>
void terms_backward_kernel(int64_t n, const T* x, const T* y, const T* G, T ga, T gs, T gq, T* o);

}  // namespace ssim
}  // namespace gsw
