// Reads comm_configs: grpc_configs (address, message size, TLS files,
// tokens) and stream_configs (chunks, window, timeouts, rates).

#include "read_sections.hpp"

#include <filesystem>
#include <fstream>

#include "fedcaf/config/yaml_safety.hpp"

namespace fedcaf::config_reader {

namespace {

/// Cap'n Proto's Data field holds under 512 MiB: the largest chunk, and the
/// largest model that travels as one message.
constexpr uint64_t capnp_data_limit = (1ull << 29) - 1;
constexpr uint64_t max_message_bytes = (1ull << 32) - 1;
constexpr uint64_t max_window = 1024;

/// Reads a path key that must name a readable file when `needed`.
void get_file(section& s, const char* key, std::string& out, bool needed,
              const char* why) {
  s.get(key, out);
  if (!needed)
    return;
  if (out.empty())
    s.fail(key, std::string{"is required "} + why);
  else if (!std::filesystem::is_regular_file(out))
    s.fail(key, "'" + out + "' is not a file");
}

/// Reads the first line of a file holding a secret.
std::string read_secret(const std::string& path) {
  std::ifstream in{path};
  std::string line;
  std::getline(in, line);
  return line;
}

void read_tls(section& grpc, comm_config& c, bool server_side) {
  grpc.get("use_ssl", c.use_ssl);
  const char* why = "with use_ssl: true (fedcaf never falls back to "
                    "unauthenticated TLS); make one with deploy/make-certs.sh";
  const char* cert = server_side ? "server_certificate" : "client_certificate";
  const char* key =
      server_side ? "server_certificate_key" : "client_certificate_key";
  get_file(grpc, cert, c.tls.certificate, c.use_ssl, why);
  get_file(grpc, key, c.tls.certificate_key, c.use_ssl, why);
  get_file(grpc, "root_certificate", c.tls.root_certificate, c.use_ssl, why);
}

/// Reads a YAML mapping of client id to token from `file`; errors name it.
void read_tokens_file(section& args, const std::string& file,
                      std::vector<std::pair<std::string, std::string>>& out) {
  if (!std::filesystem::is_regular_file(file))
    return args.fail("tokens_file", "'" + file + "' is not a file");
  auto text = read_yaml_file(file, "tokens file");
  if (!text)
    return args.fail("tokens_file", text.err().message);
  auto tokens = parse_yaml(*text, file);
  if (!tokens)
    return args.fail("tokens_file", tokens.err().message);
  if (!tokens->IsMap())
    return args.fail("tokens_file",
                     file + ": expected a mapping of client ids to tokens");
  args.read_pairs(*tokens, out, "tokens_file");
}

void read_auth(section& grpc, comm_config& c, bool server_side) {
  grpc.get("use_authenticator", c.auth.enabled);
  std::string name = "NaiveAuthenticator";
  grpc.one_of("authenticator", name, {"NaiveAuthenticator"});
  auto args = grpc.child("authenticator_args");
  if (server_side) {
    args.get_map("tokens", c.auth.tokens);
    std::string file;
    args.get("tokens_file", file);
    if (!file.empty())
      read_tokens_file(args, file, c.auth.tokens);
    if (c.auth.enabled && c.auth.tokens.empty())
      args.fail("tokens", "use_authenticator needs a token per client "
                          "(tokens or tokens_file)");
    return;
  }
  args.get("auth_token", c.auth.token);
  std::string file;
  args.get("auth_token_file", file);
  if (!file.empty()) {
    if (!std::filesystem::is_regular_file(file))
      return args.fail("auth_token_file", "'" + file + "' is not a file");
    c.auth.token = read_secret(file);
  }
  if (c.auth.enabled && c.auth.token.empty())
    args.fail("auth_token", "use_authenticator needs auth_token or "
                            "auth_token_file");
}

} // namespace

void read(section s, comm_config& c, bool server_side) {
  auto grpc = s.child("grpc_configs");
  grpc.get("server_uri", c.server_uri);
  if (c.server_uri.rfind(':') == std::string::npos)
    grpc.fail("server_uri", "expected host:port, got '" + c.server_uri + "'");
  grpc.get("max_message_size", c.max_message_size, 1024, max_message_bytes);
  grpc.get("use_model_chunking", c.use_model_chunking);
  read_tls(grpc, c, server_side);
  read_auth(grpc, c, server_side);
  auto stream = s.child("stream_configs");
  // Unset, a chunk is 1 MiB or what max_message_size leaves room for
  // (APPFL's examples set 1 MiB messages).
  if (c.max_message_size >= 1024 + 64)
    c.stream.chunk_bytes =
        std::min<uint64_t>(c.stream.chunk_bytes, c.max_message_size - 1024);
  stream.get("chunk_bytes", c.stream.chunk_bytes, 64, capnp_data_limit);
  stream.get("window", c.stream.window, 1, max_window);
  stream.seconds("idle_timeout_s", c.stream.idle_timeout_s);
  stream.get("min_rate_bytes_per_s", c.stream.min_rate_bytes_per_s);
  if (!(c.stream.min_rate_bytes_per_s >= 0))
    stream.fail("min_rate_bytes_per_s", "must be 0 (none) or positive");
  stream.seconds("rate_window_s", c.stream.rate_window_s);
  stream.seconds("heartbeat_s", c.stream.heartbeat_s);
  stream.seconds("connection_timeout_s", c.stream.connection_timeout_s);
  if (c.stream.connection_timeout_s <= c.stream.heartbeat_s)
    stream.fail("connection_timeout_s", "must exceed heartbeat_s");
  // A client waits out a server's restart (process start, model and
  // checkpoint loaded: minutes for a large model); a server drops a lost
  // client after 30 s, so that its round goes on.
  if (!server_side)
    c.stream.reconnect_grace_s = client_reconnect_grace_s;
  stream.seconds("reconnect_grace_s", c.stream.reconnect_grace_s);
  stream.seconds("handshake_timeout_s", c.stream.handshake_timeout_s);
  stream.seconds("connect_timeout_s", c.stream.connect_timeout_s);
  stream.get("max_unauthenticated", c.stream.max_unauthenticated, 1, 65535);
  stream.get("refusal_log_lines", c.stream.refusal_log_lines, 1, 1000000);
  if (c.use_model_chunking && c.stream.chunk_bytes + 1024 > c.max_message_size)
    stream.fail("chunk_bytes",
                "a chunk of " + std::to_string(c.stream.chunk_bytes) +
                    " bytes plus its header does not fit max_message_size (" +
                    std::to_string(c.max_message_size) + ")");
}

} // namespace fedcaf::config_reader

namespace fedcaf {

result<uint64_t> comm_config::chunk_bytes_for(uint64_t model_bytes) const {
  if (use_model_chunking)
    return stream.chunk_bytes;
  // The whole model travels as one message, as peers without chunking do.
  if (model_bytes + 1024 > max_message_size)
    return error{errc::bad_config,
                 "with use_model_chunking off the model of " +
                     std::to_string(model_bytes) +
                     " bytes travels as one message, which does not fit "
                     "grpc_configs.max_message_size (" +
                     std::to_string(max_message_size) +
                     "): raise it or turn chunking on"};
  if (model_bytes > config_reader::capnp_data_limit)
    return error{errc::bad_config,
                 "with use_model_chunking off the model of " +
                     std::to_string(model_bytes) +
                     " bytes travels as one message, and one message holds "
                     "under 512 MiB: turn chunking on"};
  return std::max<uint64_t>(model_bytes, 64);
}

} // namespace fedcaf
