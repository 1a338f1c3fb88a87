#include "protocol/client_registry.hpp"

#include <array>

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace fedcaf {

namespace {

using digest = token_digest;

/// SHA-256 of `s`: tokens of any length compare in the same time.
digest digest_of(const std::string& s) {
  digest d{};
  unsigned int size = 0;
  EVP_Digest(s.data(), s.size(), d.data(), &size, EVP_sha256(), nullptr);
  return d;
}

/// Returns true iff a configured (id, token) pair is `h`'s. Every pair is
/// looked at, whether or not the id is known: the same work either way.
bool token_matches(const admission_rules& rules, const msg::hello& h,
                   const token_digests* digests) {
  auto id = digest_of(h.client_id);
  auto token = digest_of(h.token);
  int found = 0;
  auto compare = [&](const digest& i, const digest& t) {
    int same_id = CRYPTO_memcmp(i.data(), id.data(), id.size()) == 0;
    int same_token = CRYPTO_memcmp(t.data(), token.data(), token.size()) == 0;
    found |= same_id & same_token;
  };
  if (digests && digests->size() == rules.tokens.size())
    for (const auto& [i, t] : *digests)
      compare(i, t);
  else
    for (const auto& [known_id, known_token] : rules.tokens)
      compare(digest_of(known_id), digest_of(known_token));
  return found != 0;
}

} // namespace

token_digests hash_tokens(const admission_rules& rules) {
  token_digests out;
  for (const auto& [id, token] : rules.tokens)
    out.emplace_back(digest_of(id), digest_of(token));
  return out;
}

result<bool> authenticate(const admission_rules& rules, const msg::hello& h,
                          bool remote, const std::string& certificate_name,
                          const token_digests* digests) {
  bool authenticated = false;
  if (!rules.tokens.empty()) {
    if (!token_matches(rules, h, digests))
      return error{errc::not_authorized, "unknown client id or wrong token"};
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
