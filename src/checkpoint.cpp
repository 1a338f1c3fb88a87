#include "fedcaf/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <xxhash.h>
#include <yaml-cpp/yaml.h>

#include "fedcaf/log.hpp"
#include "fedcaf/safetensors.hpp"

namespace fedcaf {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* model_name = "model.safetensors";
constexpr const char* optimizer_name = "optimizer.safetensors";
constexpr const char* state_name = "state.json";
constexpr const char* held_key = "fedcaf.held";
constexpr uint64_t piece = 64u << 20;

error io_failure(const std::string& path, const std::string& what) {
  return error{errc::io_error, "checkpoint: " + path + ": " + what};
}

error io_failure(const std::string& path) {
  return io_failure(path, std::strerror(errno));
}

/// An open file descriptor, closed on destruction.
struct file {
  int fd = -1;
  explicit file(int f) : fd(f) {}
  file(const file&) = delete;
  ~file() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// "round-000007".
std::string folder_name(uint32_t round) {
  char name[32];
  std::snprintf(name, sizeof name, "round-%06u", round);
  return name;
}

/// A file's SHA-256, fed piece by piece: "sha256:" and 64 hex digits.
class file_digest {
public:
  file_digest() : ctx_(EVP_MD_CTX_new()) {
    EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
  }
  file_digest(const file_digest&) = delete;
  ~file_digest() { EVP_MD_CTX_free(ctx_); }

  void update(const void* p, uint64_t n) { EVP_DigestUpdate(ctx_, p, n); }

  std::string hex() {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_DigestFinal_ex(ctx_, d, &size);
    std::string out = "sha256:";
    char two[3];
    for (unsigned int i = 0; i < size; ++i) {
      std::snprintf(two, sizeof two, "%02x", d[i]);
      out += two;
    }
    return out;
  }

private:
  EVP_MD_CTX* ctx_;
};

/// The digest of the whole file at `path`, read in 1 MiB pieces (the
/// page cache's, not the process's memory).
result<std::string> digest_of_file(const std::string& path) {
  file in{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0)
    return io_failure(path);
  file_digest d;
  std::vector<char> buffer(1u << 20);
  for (;;) {
    auto k = ::read(in.fd, buffer.data(), buffer.size());
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return io_failure(path);
    if (k == 0)
      return d.hex();
    d.update(buffer.data(), static_cast<uint64_t>(k));
  }
}

/// Feeds bytes [0, size) of `fd` (of `path`) into `digest`, read with
/// pread in 1 MiB pieces (the file offset untouched). Fails iff `fd` is
/// shorter or cannot be read.
result<void> digest_range(int fd, uint64_t size, const std::string& path,
                          file_digest& digest) {
  std::vector<char> buffer(1u << 20);
  for (uint64_t at = 0; at < size;) {
    auto k =
        ::pread(fd, buffer.data(), std::min<uint64_t>(buffer.size(), size - at),
                static_cast<off_t>(at));
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return k == 0 ? io_failure(path, "shorter than the model")
                    : io_failure(path);
    digest.update(buffer.data(), static_cast<uint64_t>(k));
    at += static_cast<uint64_t>(k);
  }
  return {};
}

/// Writes `n` bytes at `p` to `fd` (of `path`), into `digest` if given.
result<void> write_all(int fd, const std::byte* p, uint64_t n,
                       const std::string& path, file_digest* digest = nullptr) {
  if (digest)
    digest->update(p, n);
  while (n > 0) {
    auto k = ::write(fd, p, std::min<uint64_t>(n, piece));
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return io_failure(path);
    p += k;
    n -= static_cast<uint64_t>(k);
  }
  return {};
}

result<void> sync_path(const std::string& path, int flags) {
  file f{::open(path.c_str(), flags | O_CLOEXEC)};
  if (f.fd < 0 || ::fsync(f.fd) != 0)
    return io_failure(path);
  return {};
}

/// The bytes a writer goes ahead of the disk by, at most about twice.
constexpr uint64_t behind_piece = 64ull << 20;

/// Keeps a file's writeback just behind its writer: each `behind_piece`
/// written is handed to the disk at once (sync_file_range, not waiting) and
/// the piece before it waited for. The page cache never holds more than two
/// pieces of it dirty, so the kernel does not throttle the writer (it did:
/// a 4 GiB copy_file_range paced at 300 MB/s with 1.4 GB dirty, the disk
/// idle), and the fsync at the end finds little left to write.
class write_behind {
public:
  write_behind(int fd, uint64_t from)
      : fd_(fd), started_(from), waited_(from) {}

  /// The file is written up to `end`.
  void written(uint64_t end) {
    if (end - started_ < behind_piece)
      return;
    ::sync_file_range(fd_, static_cast<off_t>(started_),
                      static_cast<off_t>(end - started_),
                      SYNC_FILE_RANGE_WRITE);
    if (started_ > waited_)
      ::sync_file_range(fd_, static_cast<off_t>(waited_),
                        static_cast<off_t>(started_ - waited_),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                            SYNC_FILE_RANGE_WAIT_AFTER);
    waited_ = started_;
    started_ = end;
  }

private:
  int fd_;
  uint64_t started_; ///< writeback asked for up to here
  uint64_t waited_;  ///< written back up to here
};

/// The safetensors header of tensors laid out as `layout` travels (every
/// tensor in its floating dtype), `metadata` in "__metadata__": 8 bytes of
/// length, then the JSON, padded to 8.
std::string header_of(const manifest& layout,
                      const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty())
    h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : layout.tensors) {
    h[t.name] = {{"dtype", std::string{dtype_name(t.type)}},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + t.byte_size}}};
    offset += t.byte_size;
  }
  auto text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t n = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + text;
}

/// A file written into a checkpoint: its size and digest.
struct written_file {
  uint64_t size = 0;
  std::string digest;
};

/// Writes `header`, then the bytes: from `source` (a file: copied in the
/// kernel while a thread digests the source) or from `bytes` (digested as
/// written, a mapped buffer's pages released behind it). Fsynced.
result<written_file> write_tensors(const std::string& path,
                                   const std::string& header,
                                   const byte_buffer& bytes,
                                   const std::string& source) {
  file_digest digest;
  file out{
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (out.fd < 0)
    return io_failure(path);
  auto ok = write_all(out.fd, reinterpret_cast<const std::byte*>(header.data()),
                      header.size(), path, &digest);
  if (!ok)
    return ok.err();
  auto started = std::chrono::steady_clock::now();
  file in{source.empty() ? -1 : ::open(source.c_str(), O_RDONLY | O_CLOEXEC)};
  write_behind behind{out.fd, header.size()};
  // File to file: the kernel copies while a thread digests the source's
  // bytes (the same bytes, read through the page cache), so the digest
  // costs no second pass after the copy.
  result<void> hashed{};
  std::thread hasher;
  if (in.fd >= 0)
    hasher = std::thread{
        [&] { hashed = digest_range(in.fd, bytes.size(), source, digest); }};
  auto join = [&hasher] {
    if (hasher.joinable())
      hasher.join();
  };
  if (in.fd >= 0) { // file to file, in the kernel
    loff_t from = 0;
    while (static_cast<uint64_t>(from) < bytes.size()) {
      auto k = ::copy_file_range(
          in.fd, &from, out.fd, nullptr,
          std::min<uint64_t>(behind_piece, bytes.size() - from), 0);
      if (k < 0 && errno == EINTR)
        continue;
      if (k <= 0) {
        join();
        return k == 0 ? io_failure(source, "shorter than the model")
                      : io_failure(path);
      }
      behind.written(header.size() + from);
    }
  } else { // from memory; a mapped model's pages go back behind the write
    for (uint64_t at = 0; at < bytes.size(); at += piece) {
      auto n = std::min<uint64_t>(piece, bytes.size() - at);
      ok = write_all(out.fd, bytes.data() + at, n, path, &digest);
      if (!ok)
        return ok.err();
      bytes.release(at, n);
      behind.written(header.size() + at + n);
    }
  }
  auto copied = std::chrono::steady_clock::now();
  if (::fsync(out.fd) != 0) {
    join();
    return io_failure(path);
  }
  auto synced = std::chrono::steady_clock::now();
  join(); // the digest of a copy: what is left of its pass
  if (!hashed)
    return hashed.err();
  written_file written{header.size() + bytes.size(), digest.hex()};
  auto digested = std::chrono::steady_clock::now();
  char line[128];
  std::snprintf(line, sizeof line, " in %.2f s, fsync %.2f s, digest %.2f s",
                std::chrono::duration<double>(copied - started).count(),
                std::chrono::duration<double>(synced - copied).count(),
                std::chrono::duration<double>(digested - synced).count());
  log_line(log_level::debug, "checkpoint",
           path +
               (in.fd >= 0 ? ": the model copied file to file"
                           : ": the model written from memory") +
               line);
  return written;
}

/// The metadata that restores carried tensors' dtypes: {name: dtype}.
std::map<std::string, std::string> held_metadata(const manifest& layout) {
  json held = json::object();
  for (const auto& t : layout.tensors)
    if (t.held)
      held[t.name] = std::string{dtype_name(*t.held)};
  if (held.empty())
    return {};
  return {{held_key, held.dump()}};
}

json state_json(const checkpoint_state& s, const json& files,
                const json& digests) {
  return {
      {"round", s.round},
      {"model_version", s.model_version},
      {"optimizer_steps", s.optimizer_steps},
      {"config_digest", s.config_digest},
      {"config_yaml", s.config_yaml},
      {"resumed_from", s.resumed_from},
      {"report_rounds", json::parse(s.report_rounds.empty() ? std::string{"[]"}
                                                            : s.report_rounds)},
      {"files", files},
      {"digests", digests}};
}

/// Removes the complete checkpoints past the newest `keep`, and partial
/// folders (writes cut short).
void prune(const std::string& dir, uint32_t keep) {
  std::vector<std::string> complete;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    auto name = e.path().filename().string();
    if (name.starts_with(".round-") && name.ends_with(".partial"))
      fs::remove_all(e.path(), ec);
    else if (name.starts_with("round-"))
      complete.push_back(name);
  }
  std::sort(complete.begin(), complete.end());
  for (size_t i = 0; i + keep < complete.size(); ++i)
    fs::remove_all(fs::path{dir} / complete[i], ec);
}

/// Checks the file `name` at `path` against the digest state.json `j`
/// records for it. A checkpoint written before digests were recorded has
/// its sizes checked only (said once per file).
result<void> check_digest(const json& j, const std::string& name,
                          const std::string& path) {
  if (!j.contains("digests")) {
    log_line(log_level::warning, "checkpoint",
             path + ": state.json records no digest (written by an older "
                    "fedcaf): its size is checked, not its bytes");
    return {};
  }
  const auto& digests = j.at("digests");
  if (!digests.contains(name))
    return io_failure(path, "state.json records no digest of it");
  auto expected = digests.at(name).get<std::string>();
  auto actual = digest_of_file(path);
  if (!actual)
    return actual.err();
  if (*actual != expected)
    return io_failure(path, "its bytes are not those written (digest " +
                                actual->substr(0, 23) +
                                "..., state.json says " +
                                expected.substr(0, 23) +
                                "...): torn, overwritten or replaced");
  return {};
}

/// The checkpoint in `folder`, checked against its state.json: each
/// file's size and digest.
result<stored_checkpoint> read_folder(const fs::path& folder) {
  auto state_path = (folder / state_name).string();
  std::ifstream in{state_path};
  if (!in)
    return io_failure(state_path, "missing");
  json j;
  try {
    j = json::parse(in);
    stored_checkpoint c;
    c.folder = folder.string();
    c.state.round = j.at("round").get<uint32_t>();
    c.state.model_version = j.at("model_version").get<uint64_t>();
    c.state.optimizer_steps = j.at("optimizer_steps").get<uint64_t>();
    c.state.config_digest = j.at("config_digest").get<std::string>();
    c.state.config_yaml = j.at("config_yaml").get<std::string>();
    c.state.resumed_from = j.at("resumed_from").get<std::vector<uint32_t>>();
    c.state.report_rounds = j.at("report_rounds").dump();
    for (const auto& [name, size] : j.at("files").items()) {
      auto path = (folder / name).string();
      std::error_code ec;
      auto actual = fs::file_size(path, ec);
      if (ec || actual != size.get<uint64_t>())
        return io_failure(path, ec ? "missing"
                                   : "holds " + std::to_string(actual) +
                                         " bytes, state.json says " +
                                         std::to_string(size.get<uint64_t>()));
      if (auto ok = check_digest(j, name, path); !ok)
        return ok.err();
      if (name == optimizer_name)
        c.optimizer_path = path;
    }
    c.model_path = (folder / model_name).string();
    auto model = safetensors_file::open(c.model_path);
    if (!model)
      return model.err();
    c.layout = model->layout();
    const auto& meta = model->metadata();
    if (auto it = meta.find(held_key); it != meta.end()) {
      auto held = json::parse(it->second);
      for (auto& t : c.layout.tensors)
        if (held.contains(t.name))
          if (auto d = dtype_from_name(held[t.name].get<std::string>()))
            t.held = *d;
    }
    std::ifstream raw{c.model_path, std::ios::binary};
    uint64_t header = 0;
    raw.read(reinterpret_cast<char*>(&header), 8);
    c.model_data_offset = 8 + header;
    return c;
  } catch (const std::exception& e) {
    return io_failure(state_path, e.what());
  }
}

/// Copies `n` bytes at `offset` of `path` into `out`.
result<void> read_bytes(const std::string& path, uint64_t offset,
                        std::span<std::byte> out) {
  file in{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0)
    return io_failure(path);
  uint64_t done = 0;
  while (done < out.size()) {
    auto k = ::pread(in.fd, out.data() + done,
                     std::min<uint64_t>(out.size() - done, piece),
                     static_cast<off_t>(offset + done));
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return k == 0 ? io_failure(path, "shorter than its header says")
                    : io_failure(path);
    done += static_cast<uint64_t>(k);
  }
  return {};
}

/// Flattens `n` into "a.b.c" -> scalar text (sequences as YAML text).
void flatten(const YAML::Node& n, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n)
      flatten(kv.second,
              prefix.empty() ? kv.first.as<std::string>()
                             : prefix + "." + kv.first.as<std::string>(),
              out);
    return;
  }
  YAML::Emitter e;
  e << YAML::Flow << n;
  out[prefix] = e.c_str();
}

std::map<std::string, std::string> flat(const std::string& yaml) {
  std::map<std::string, std::string> out;
  try {
    flatten(YAML::Load(yaml), "", out);
  } catch (const YAML::Exception&) {
    out[""] = yaml;
  }
  return out;
}

} // namespace

result<void> write_checkpoint(
    const checkpoint_config& cfg, const checkpoint_state& state,
    const checkpoint_model& model,
    std::span<const std::pair<std::string, const byte_buffer*>> moments) {
  std::error_code ec;
  fs::create_directories(cfg.dir, ec);
  if (ec)
    return io_failure(cfg.dir, ec.message());
  auto name = folder_name(state.round);
  auto partial = (fs::path{cfg.dir} / ("." + name + ".partial")).string();
  auto final_path = (fs::path{cfg.dir} / name).string();
  fs::remove_all(partial, ec);
  if (!fs::create_directory(partial, ec))
    return io_failure(partial, ec ? ec.message() : "exists");
  json files = json::object();
  json digests = json::object();
  auto model_file =
      write_tensors(partial + "/" + model_name,
                    header_of(*model.layout, held_metadata(*model.layout)),
                    *model.bytes, model.file);
  if (!model_file)
    return model_file.err();
  files[model_name] = model_file->size;
  digests[model_name] = model_file->digest;
  if (!moments.empty()) {
    manifest m;
    uint64_t total = 0;
    for (const auto& [n, b] : moments) {
      m.tensors.push_back(
          make_tensor_info(n, dtype::float32, {b->size() / sizeof(float)}));
      total += b->size();
    }
    auto path = partial + "/" + optimizer_name;
    file out{
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (out.fd < 0)
      return io_failure(path);
    auto header = header_of(m, {});
    file_digest digest;
    auto ok =
        write_all(out.fd, reinterpret_cast<const std::byte*>(header.data()),
                  header.size(), path, &digest);
    for (const auto& [n, b] : moments) {
      for (uint64_t at = 0; ok && at < b->size(); at += piece) {
        auto k = std::min<uint64_t>(piece, b->size() - at);
        ok = write_all(out.fd, b->data() + at, k, path, &digest);
        b->release(at, k);
      }
    }
    if (!ok)
      return ok.err();
    if (::fsync(out.fd) != 0)
      return io_failure(path);
    files[optimizer_name] = header.size() + total;
    digests[optimizer_name] = digest.hex();
  }
  auto text = state_json(state, files, digests).dump(1);
  auto state_path = partial + "/" + state_name;
  {
    file out{::open(state_path.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (out.fd < 0)
      return io_failure(state_path);
    auto ok = write_all(out.fd, reinterpret_cast<const std::byte*>(text.data()),
                        text.size(), state_path);
    if (!ok)
      return ok.err();
    if (::fsync(out.fd) != 0)
      return io_failure(state_path);
  }
  if (auto ok = sync_path(partial, O_RDONLY | O_DIRECTORY); !ok)
    return ok.err();
  fs::remove_all(final_path, ec); // a round written again (after a resume)
  if (::rename(partial.c_str(), final_path.c_str()) != 0)
    return io_failure(final_path);
  if (auto ok = sync_path(cfg.dir, O_RDONLY | O_DIRECTORY); !ok)
    return ok.err();
  prune(cfg.dir, cfg.keep);
  return {};
}

result<stored_checkpoint> latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec))
    names.push_back(e.path().filename().string());
  if (ec)
    return io_failure(dir, ec.message());
  std::sort(names.rbegin(), names.rend());
  for (const auto& name : names)
    if (name.starts_with(".round-") && name.ends_with(".partial"))
      log_line(log_level::warning, "checkpoint",
               dir + "/" + name +
                   " is not complete (the process stopped while writing "
                   "it): not loaded");
  for (const auto& name : names) {
    if (!name.starts_with("round-"))
      continue;
    auto c = read_folder(fs::path{dir} / name);
    if (c)
      return c;
    log_line(log_level::warning, "checkpoint",
             c.err().message + ": passed over for the one before");
  }
  return error{errc::io_error,
               "checkpoint: " + dir + " holds no complete checkpoint"};
}

result<void>
read_moments(const stored_checkpoint& c,
             std::span<std::pair<std::string, byte_buffer*>> moments) {
  if (moments.empty())
    return {};
  if (c.optimizer_path.empty())
    return io_failure(c.folder, "no optimizer state (the run had none)");
  auto f = safetensors_file::open(c.optimizer_path);
  if (!f)
    return f.err();
  auto view = f->view();
  for (auto& moment : moments) {
    const auto& name = moment.first;
    auto* buffer = moment.second;
    const auto& ts = f->layout().tensors;
    auto it = std::find_if(ts.begin(), ts.end(),
                           [&](const auto& t) { return t.name == name; });
    if (it == ts.end() || it->byte_size != buffer->size())
      return io_failure(c.optimizer_path, "no moment '" + name + "' of " +
                                              std::to_string(buffer->size()) +
                                              " bytes");
    auto src = view.tensors[static_cast<size_t>(it - ts.begin())];
    std::memcpy(buffer->data(), src.data(), src.size());
  }
  return {};
}

result<void> read_model(const stored_checkpoint& c, byte_buffer& out) {
  // In pieces, a mapped model's pages given back behind them (disk mode).
  for (uint64_t at = 0; at < out.size(); at += piece) {
    auto n = std::min<uint64_t>(piece, out.size() - at);
    if (auto ok = read_bytes(c.model_path, c.model_data_offset + at,
                             out.bytes().subspan(at, n));
        !ok)
      return ok;
    out.release(at, n);
  }
  return {};
}

std::string config_digest(const std::string& yaml) {
  std::string canonical;
  for (const auto& [k, v] : flat(yaml))
    canonical += k + "=" + v + "\n";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(
                    XXH3_64bits(canonical.data(), canonical.size())));
  return hex;
}

std::vector<std::string> differing_keys(const std::string& a,
                                        const std::string& b) {
  auto x = flat(a), y = flat(b);
  std::vector<std::string> out;
  for (const auto& [k, v] : x)
    if (auto it = y.find(k); it == y.end() || it->second != v)
      out.push_back(k);
  for (const auto& [k, v] : y)
    if (!x.count(k))
      out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace fedcaf
