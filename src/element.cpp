#include "fedcaf/element.hpp"

namespace fedcaf {

result<dtype> common_floating_dtype(const manifest& m) {
  FEDCAF_REQUIRE(!m.tensors.empty(), errc::manifest_mismatch, m.tensors.size());
  auto t = m.tensors.front().type;
  for (const auto& x : m.tensors)
    if (x.type != t || !is_floating(x.type))
      return error{
          errc::unsupported_dtype,
          "tensor '" + x.name + "' is " + std::string{dtype_name(x.type)} +
              "; averaging needs all tensors of one of F32, BF16, F16"};
  return t;
}

} // namespace fedcaf
