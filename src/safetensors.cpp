// The nlohmann-json and mmap adapter for safetensors: JSON exceptions and
// system-call failures become errors naming the file.

#include "fedcaf/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "fedcaf/carried.hpp"

namespace fedcaf {

namespace {

using json = nlohmann::json;

constexpr uint64_t max_header_bytes = 100u << 20; // as the reference reader

error file_error(const std::string& path, const std::string& what) {
  return {errc::io_error, path + ": " + what};
}

/// Closes a file descriptor on scope exit.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0)
      ::close(fd);
  }
};

struct parsed_header {
  manifest layout;
  std::map<std::string, std::string> metadata;
};

/// Returns the elements of a JSON array of non-negative integers; nothing
/// iff `j` is not one (a negative or fractional number included).
std::optional<std::vector<uint64_t>> unsigned_list(const json& j) {
  if (!j.is_array())
    return std::nullopt;
  std::vector<uint64_t> out;
  for (const auto& x : j) {
    if (!x.is_number_unsigned())
      return std::nullopt;
    out.push_back(x.get<uint64_t>());
  }
  return out;
}

/// Returns the bytes of a tensor of `shape` with elements of `element_bytes`;
/// nothing iff that overflows 64 bits.
std::optional<uint64_t> shape_bytes(const std::vector<uint64_t>& shape,
                                    uint64_t element_bytes) {
  if (std::find(shape.begin(), shape.end(), uint64_t{0}) != shape.end())
    return 0;
  uint64_t bytes = element_bytes;
  for (auto d : shape)
    if (__builtin_mul_overflow(bytes, d, &bytes))
      return std::nullopt;
  return bytes;
}

result<parsed_header> parse_header(const std::string& path,
                                   std::string_view text, uint64_t data_bytes) {
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    return file_error(path, std::string{"header is not JSON: "} + e.what());
  } catch (const std::bad_alloc&) {
    return error{errc::out_of_memory, path + ": parsing its header (" +
                                          std::to_string(text.size()) +
                                          " bytes)"};
  }
  if (!header.is_object())
    return file_error(path, "header is not a JSON object");
  if (header.size() > max_model_tensors + 1) // + __metadata__
    return file_error(path, "its header names " +
                                std::to_string(header.size()) +
                                " entries, more than max_model_tensors (" +
                                std::to_string(max_model_tensors) + ")");
  struct entry {
    uint64_t begin, end;
    tensor_info info;
  };
  std::vector<entry> entries;
  parsed_header out;
  try {
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        for (const auto& [k, v] : value.items())
          out.metadata[k] = v.get<std::string>();
        continue;
      }
      auto type = dtype_from_name(value.at("dtype").get<std::string>());
      if (!type)
        return file_error(path, "tensor '" + name + "': " + type.err().message);
      auto shape = unsigned_list(value.at("shape"));
      auto offsets = unsigned_list(value.at("data_offsets"));
      if (!shape)
        return file_error(path, "tensor '" + name +
                                    "': shape is not a list of whole numbers");
      if (!offsets || offsets->size() != 2 || (*offsets)[0] > (*offsets)[1])
        return file_error(path, "tensor '" + name + "': bad data_offsets");
      if ((*offsets)[1] > data_bytes)
        return file_error(path, "tensor '" + name + "': data_offsets end at " +
                                    std::to_string((*offsets)[1]) +
                                    ", past the " + std::to_string(data_bytes) +
                                    " data bytes of the file");
      auto bytes = shape_bytes(*shape, dtype_bytes(*type));
      if (!bytes)
        return file_error(path, "tensor '" + name +
                                    "': its shape overflows 64 bits of bytes");
      if (*bytes != (*offsets)[1] - (*offsets)[0])
        return file_error(
            path, "tensor '" + name +
                      "': " + std::to_string((*offsets)[1] - (*offsets)[0]) +
                      " bytes for a shape of " + std::to_string(*bytes));
      entries.push_back({(*offsets)[0], (*offsets)[1],
                         make_tensor_info(name, *type, std::move(*shape))});
    }
  } catch (const json::exception& e) {
    return file_error(path, std::string{"malformed header: "} + e.what());
  } catch (const std::bad_alloc&) {
    return error{errc::out_of_memory, path + ": reading its header (" +
                                          std::to_string(text.size()) +
                                          " bytes)"};
  }
  std::sort(entries.begin(), entries.end(),
            [](const entry& a, const entry& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  for (auto& e : entries) {
    if (e.begin != expected)
      return file_error(path, "tensor '" + e.info.name +
                                  "' does not follow the previous one");
    expected = e.end;
    out.layout.tensors.push_back(std::move(e.info));
  }
  if (expected != data_bytes)
    return file_error(path, "tensors cover " + std::to_string(expected) +
                                " of " + std::to_string(data_bytes) +
                                " data bytes");
  return out;
}

} // namespace

result<safetensors_file> safetensors_file::open(const std::string& path) {
  fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0)
    return file_error(path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0)
    return file_error(path, std::strerror(errno));
  auto size = static_cast<uint64_t>(st.st_size);
  if (size < 8)
    return file_error(path, "too short for a safetensors file");
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.fd, 0);
  if (map == MAP_FAILED)
    return file_error(path, std::string{"mmap: "} + std::strerror(errno));
  safetensors_file file;
  file.map_ = static_cast<const std::byte*>(map);
  file.map_bytes_ = size;
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.map_, 8); // little-endian, as x86-64
  if (header_bytes > max_header_bytes || 8 + header_bytes > size)
    return file_error(path, "header length " + std::to_string(header_bytes) +
                                " does not fit the file");
  std::string_view text{reinterpret_cast<const char*>(file.map_ + 8),
                        header_bytes};
  auto parsed = parse_header(path, text, size - 8 - header_bytes);
  if (!parsed)
    return parsed.err();
  file.layout_ = std::move(parsed->layout);
  file.metadata_ = std::move(parsed->metadata);
  file.data_offset_ = 8 + header_bytes;
  ::madvise(map, size, MADV_SEQUENTIAL);
  return file;
}

safetensors_file::safetensors_file(safetensors_file&& other) noexcept
    : layout_(std::move(other.layout_)), metadata_(std::move(other.metadata_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      data_offset_(other.data_offset_) {}

safetensors_file&
safetensors_file::operator=(safetensors_file&& other) noexcept {
  std::swap(layout_, other.layout_);
  std::swap(metadata_, other.metadata_);
  std::swap(map_, other.map_);
  std::swap(map_bytes_, other.map_bytes_);
  std::swap(data_offset_, other.data_offset_);
  return *this;
}

safetensors_file::~safetensors_file() {
  if (map_ != nullptr)
    ::munmap(const_cast<std::byte*>(map_), map_bytes_);
}

const_model_view safetensors_file::view() const {
  return split_contiguous(
      layout_, std::span<const std::byte>{map_ + data_offset_,
                                          map_bytes_ - data_offset_});
}

namespace {

result<void> write_all(int fd, const std::byte* p, size_t n,
                       const std::string& path) {
  while (n > 0) {
    auto k = ::write(fd, p, std::min<size_t>(n, 1u << 30));
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return file_error(path, std::string{"write: "} + std::strerror(errno));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return {};
}

std::string header_text(const manifest& layout,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : layout.tensors) { // carried ones as the model holds
    auto bytes = held_bytes(t);
    header[t.name] = {
        {"dtype", std::string{dtype_name(t.held.value_or(t.type))}},
        {"shape", t.shape},
        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  auto text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' '); // data starts 8-aligned
  return text;
}

} // namespace

result<void>
write_safetensors(const std::string& path, const manifest& layout,
                  const const_model_view& model,
                  const std::map<std::string, std::string>& metadata,
                  const written_fn& written) {
  FEDCAF_REQUIRE(model.tensors.size() == layout.tensors.size(), errc::internal,
                 model.tensors.size(), layout.tensors.size());
  auto tmp = path + ".tmp";
  fd_guard fd{
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (fd.fd < 0)
    return file_error(tmp, std::strerror(errno));
  auto text = header_text(layout, metadata);
  uint64_t length = text.size();
  auto ok =
      write_all(fd.fd, reinterpret_cast<const std::byte*>(&length), 8, tmp);
  if (ok)
    ok = write_all(fd.fd, reinterpret_cast<const std::byte*>(text.data()),
                   text.size(), tmp);
  constexpr uint64_t piece = 64u << 20;
  uint64_t offset = 0;
  std::vector<std::byte> narrowed;
  for (size_t i = 0; ok && i < model.tensors.size(); ++i) {
    auto t = model.tensors[i];
    if (const auto& info = layout.tensors[i]; info.held) {
      // Integer and bool tensors (small): rounded back, in one piece.
      narrowed.resize(held_bytes(info));
      narrow(info, t, narrowed);
      ok = write_all(fd.fd, narrowed.data(), narrowed.size(), tmp);
      if (ok && written)
        written(offset, t.size());
      offset += t.size();
      continue;
    }
    for (uint64_t at = 0; ok && at < t.size(); at += piece) {
      auto n = std::min<uint64_t>(piece, t.size() - at);
      ok = write_all(fd.fd, t.data() + at, n, tmp);
      if (ok && written)
        written(offset + at, n);
    }
    offset += t.size();
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return ok;
  }
  if (::fsync(fd.fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = file_error(path, std::strerror(errno));
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

} // namespace fedcaf
