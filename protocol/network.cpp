#include "protocol/network.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fedcaf {

namespace {

std::string where(const endpoint& at) {
  return at.host + ":" + std::to_string(at.port);
}

/// Resolves `at` to addresses (numeric or by name). Returns an error iff the
/// name does not resolve.
result<addrinfo*> resolve(const endpoint& at, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  auto port = std::to_string(at.port);
  auto rc = ::getaddrinfo(at.host.empty() ? nullptr : at.host.c_str(),
                          port.c_str(), &hints, &found);
  if (rc == EAI_AGAIN) // the resolver is down or slow: worth another try
    return error{errc::disconnected, "cannot resolve '" + at.host + "' now (" +
                                         ::gai_strerror(rc) + ")"};
  if (rc != 0)
    return error{errc::bad_config, "unknown host '" + at.host + "' (" +
                                       ::gai_strerror(rc) +
                                       "): check the host name"};
  return found;
}

struct addrinfo_list {
  addrinfo* head;
  ~addrinfo_list() { ::freeaddrinfo(head); }
};

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

} // namespace

result<endpoint> parse_endpoint(const std::string& uri) {
  auto colon = uri.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return error{errc::bad_config,
                 "server_uri '" + uri + "': expected host:port"};
  auto host = uri.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto digits = uri.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(digits) > 65535)
    return error{errc::bad_config,
                 "server_uri '" + uri + "': bad port (expected 0 to 65535)"};
  return endpoint{host, static_cast<uint16_t>(std::stoul(digits))};
}

result<listener> listen_at(const endpoint& at) {
  auto found = resolve(at, true);
  if (!found)
    return found.err();
  addrinfo_list list{*found};
  std::string why = "no address";
  for (auto* a = list.head; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      auto port = bound.ss_family == AF_INET6
                      ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                      : reinterpret_cast<sockaddr_in*>(&bound)->sin_port;
      set_nonblocking(fd);
      return listener{fd, ntohs(port)};
    }
    why = errno == EADDRINUSE
              ? "port " + std::to_string(at.port) +
                    " is already in use (another server running?)"
              : std::string{std::strerror(errno)};
    ::close(fd);
  }
  return error{errc::disconnected,
               "cannot listen on " + where(at) + ": " + why};
}

result<int> connect_to(const endpoint& at, std::chrono::milliseconds timeout) {
  auto found = resolve(at, false);
  if (!found)
    return found.err();
  addrinfo_list list{*found};
  std::string why = "no address";
  for (auto* a = list.head; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    set_nonblocking(fd);
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (rc == 0) {
        errno = ETIMEDOUT;
        rc = -1;
      } else if (rc > 0) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err == 0 ? 0 : -1;
      }
    }
    if (rc == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  return error{errc::disconnected,
               "cannot reach the server at " + where(at) + " (" + why + ")"};
}

std::optional<std::string> foreign_answer(std::span<const char> first,
                                          bool tls) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(first[i]); };
  bool fedcaf = true;
  if (tls)
    fedcaf = first.empty() || byte(0) == 22 || byte(0) == 21 ||
             byte(0) < 0x20 || byte(0) >= 0x7f;
  else
    for (size_t i = 2; i < std::min<size_t>(first.size(), 12); ++i)
      fedcaf = fedcaf && byte(i) == 0;
  if (fedcaf)
    return std::nullopt;
  std::string text;
  for (size_t i = 0; i < first.size() && text.size() < 60; ++i) {
    if (first[i] == '\r' || first[i] == '\n')
      break;
    text += byte(i) >= 0x20 && byte(i) < 0x7f ? first[i] : '?';
  }
  return "'" + text + "'";
}

std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len))
    return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    port = ntohs(in->sin6_port);
  }
  return std::string{host} + ":" + std::to_string(port);
}

} // namespace fedcaf
