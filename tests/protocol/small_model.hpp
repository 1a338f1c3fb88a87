#pragma once
// The model the client's protocol tests move: small enough to check by
// hand, odd enough that chunks split and pack tensors.

#include "fedcaf/manifest.hpp"

namespace fedcaf::testing {

/// 10 + 40 + 3 float32 values: 212 bytes, four chunks of at most 64.
inline manifest small_model() {
  manifest m;
  m.tensors.push_back(make_tensor_info("a", dtype::float32, {10}));
  m.tensors.push_back(make_tensor_info("b", dtype::float32, {4, 10}));
  m.tensors.push_back(make_tensor_info("c", dtype::float32, {3}));
  return m;
}

} // namespace fedcaf::testing
