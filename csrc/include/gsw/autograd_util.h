// Helpers of the C++ autograd kernels (csrc/*_autograd.cpp).
#pragma once

#include <ATen/ATen.h>

namespace gsw {

// Whether autograd records a call on these inputs: grad mode on and some input requiring grad. When it
// does not, an autograd kernel goes straight to the op's kernel: Function::apply builds a node and a
// context even when it records nothing, which a tiny no-grad call pays for.
template <typename... Ts>
inline bool records_grad(const Ts&... inputs) {
  return at::GradMode::is_enabled() && (inputs.requires_grad() || ...);
}

}  // namespace gsw
