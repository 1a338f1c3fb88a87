#include "fedcaf/update_clip.hpp"

#include <cmath>
#include <cstring>

#include "fedcaf/element.hpp"

namespace fedcaf {

void copy_model(const const_model_view& model, std::vector<std::byte>& out) {
  size_t total = 0;
  for (auto t : model.tensors)
    total += t.size();
  out.resize(total);
  size_t at = 0;
  for (auto t : model.tensors) {
    std::memcpy(out.data() + at, t.data(), t.size());
    at += t.size();
  }
}

double update_norm(const manifest& layout, const const_model_view& params,
                   std::span<const std::byte> base) {
  double squares = 0;
  size_t at = 0;
  for (size_t t = 0; t < layout.tensors.size(); ++t) {
    auto type = layout.tensors[t].type;
    auto n = layout.tensors[t].held
                 ? 0 // integer and bool tensors: no part
                 : params.tensors[t].size() / dtype_bytes(type);
    for (size_t i = 0; i < n; ++i) {
      double d =
          static_cast<double>(load_element(type, params.tensors[t].data(), i)) -
          load_element(type, base.data() + at, i);
      squares += d * d;
    }
    at += params.tensors[t].size();
  }
  return std::sqrt(squares);
}

double clip_update(const manifest& layout, const model_view& params,
                   std::span<const std::byte> base, double clip) {
  const_model_view read;
  for (auto t : params.tensors)
    read.tensors.emplace_back(t.data(), t.size());
  auto norm = update_norm(layout, read, base);
  if (norm <= clip)
    return norm;
  auto scale = clip / norm;
  size_t at = 0;
  for (size_t t = 0; t < layout.tensors.size(); ++t) {
    auto type = layout.tensors[t].type;
    auto* p = params.tensors[t].data();
    auto n = layout.tensors[t].held
                 ? 0 // kept as they are
                 : params.tensors[t].size() / dtype_bytes(type);
    for (size_t i = 0; i < n; ++i) {
      double b = load_element(type, base.data() + at, i);
      double x = load_element(type, p, i);
      store_element(type, p, i, static_cast<float>(b + scale * (x - b)));
    }
    at += params.tensors[t].size();
  }
  return norm;
}

} // namespace fedcaf
