// Helpers of the C++ kernels that call ops through the dispatcher (the autograd kernels in
// csrc/*_autograd.cpp, composite kernels).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>

namespace gsw {

// Whether autograd records a call on these inputs: grad mode on and some input requiring grad. When it
// does not, an autograd kernel goes straight to the op's kernel: Function::apply builds a node and a
// context even when it records nothing, which a tiny no-grad call pays for.
template <typename... Ts>
inline bool records_grad(const Ts&... inputs) {
  return at::GradMode::is_enabled() && (inputs.requires_grad() || ...);
}

// The typed handle of a registered op (e.g. "gsworkbench::splat_view_dirs") with signature Sig; the lookup
// costs a hash-map search, so callers keep it in a function-local static.
template <typename Sig>
c10::TypedOperatorHandle<Sig> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

}  // namespace gsw
