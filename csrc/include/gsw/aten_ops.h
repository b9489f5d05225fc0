// Per-operator ATen headers only, for every translation unit of csrc/ that includes ATen headers (the
// CUDA bindings aside): each includes this file first (the two macros must precede every ATen header),
// then <ATen/ops/NAME.h> for each operator it calls. <ATen/ATen.h>, which declares every operator and
// is most of such a file's compile time, then fails to compile.
#pragma once

#define AT_PER_OPERATOR_HEADERS
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
