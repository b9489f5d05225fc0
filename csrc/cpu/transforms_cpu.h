// CPU kernel of the splat transforms (csrc/cpu/transforms.cpp), the twin of the CUDA launcher
// (csrc/cuda/transforms_cuda.h). Raw pointers only; csrc/cpu/transforms_cpu.cpp binds it to
// gsworkbench::transform_splats.
#pragma once

#include "gsw/transforms_params.h"

namespace gsw {
namespace transforms {

// One fused pass over the splats per frame; p.K is 0, 3, 8 or 15 (the binding checks it).
template <typename T>
void transform_splats_cpu(const TransformParams<T>& p);

}  // namespace transforms
}  // namespace gsw
