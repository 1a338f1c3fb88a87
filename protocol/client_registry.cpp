#include "protocol/client_registry.hpp"

#include <algorithm>

namespace fedcaf {

bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

result<bool> authenticate(const admission_rules& rules, const msg::hello& h,
                          bool remote, const std::string& certificate_name) {
  bool authenticated = false;
  if (!rules.tokens.empty()) {
    auto t =
        std::find_if(rules.tokens.begin(), rules.tokens.end(),
                     [&h](const auto& kv) { return kv.first == h.client_id; });
    if (t == rules.tokens.end())
      return error{errc::not_authorized, "unknown client id"};
    if (!same_secret(t->second, h.token))
      return error{errc::not_authorized, "wrong token"};
    authenticated = true;
  }
  if (rules.require_certificate_name && remote) {
    if (certificate_name != h.client_id)
      return error{errc::not_authorized,
                   "its client certificate is for '" + certificate_name + "'"};
    authenticated = true;
  }
  return authenticated;
}

} // namespace fedcaf
