#include "http_view.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "fedcaf/live_page.hpp"
#include "fedcaf/log.hpp"
#include "protocol/http_exchange.hpp"
#include "protocol/network.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf::cli {

namespace {

using clock_type = std::chrono::steady_clock;

/// A 200 response of `type` with `body`, served with `policy` (a literal;
/// empty: no Content-Security-Policy).
http_response ok(const char* type, std::shared_ptr<const std::string> body,
                 std::string_view policy = {}) {
  return {200, type, std::move(body), false, policy};
}

/// True iff `host` is a loopback address.
bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

/// The Host a request names, without its port.
std::string host_name(const http_request& q) {
  auto h = q.header("host");
  if (!h)
    return "";
  return h->rfind('[', 0) == 0 ? h->substr(0, h->find(']') + 1)
                               : h->substr(0, h->find(':'));
}

/// RLIMIT_NOFILE's soft limit (what open() and accept() run into).
uint64_t descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
    return UINT64_MAX / 2;
  return r.rlim_cur;
}

/// A rendering of the live status, shared by the connections that ask
/// within its age.
struct rendering {
  std::shared_ptr<const std::string> body;
  clock_type::time_point at{};
  bool ended = false; ///< of a run that had ended
};

/// At most 32 lines a second about connections; the rest are counted and
/// the count said in the next line.
class quiet_log {
public:
  void line(clock_type::time_point now, const std::string& text) {
    if (!limit_.allow(now)) {
      ++held_back_;
      return;
    }
    auto more = held_back_ ? " (and " + std::to_string(held_back_) +
                                 " lines held back before this one)"
                           : std::string{};
    held_back_ = 0;
    log_line(log_level::warning, "http", printable_line(text) + more);
  }

private:
  event_limit limit_{32, std::chrono::seconds{1}};
  uint64_t held_back_ = 0;
};

/// One connection: its socket (owned), its peer and its exchange.
struct connection {
  int fd;
  std::string peer;
  http_exchange exchange;

  connection(int f, const http_limits& limits, clock_type::time_point now)
      : fd(f), peer(peer_address(f)), exchange(limits, now) {}
  ~connection() { ::close(fd); }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
};

/// The serving loop: the listening socket, the connections (oldest
/// first), the renderings. Runs on the view's thread until the wake fd is
/// written to.
class serving_loop {
public:
  serving_loop(int listen_fd, int wake_fd, uint32_t cap, std::string host,
               bool loopback, std::shared_ptr<live_status> status,
               std::shared_ptr<http_view::page_watch> watch)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), cap_(cap),
        host_(std::move(host)), loopback_(loopback), status_(std::move(status)),
        watch_(std::move(watch)),
        script_(std::make_shared<const std::string>(live_page_script())) {}
  ~serving_loop() { ::close(listen_fd_); }
  serving_loop(const serving_loop&) = delete;
  serving_loop& operator=(const serving_loop&) = delete;

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const auto& c : conns_)
        fds.push_back({c->fd, events_of(c->exchange), 0});
      if (::poll(fds.data(), fds.size(), wait_ms(clock_type::now())) < 0 &&
          errno != EINTR)
        return;
      if (fds[0].revents)
        return;
      auto now = clock_type::now();
      for (size_t i = 0; i < conns_.size(); ++i)
        if (fds[i + 2].revents)
          serve(*conns_[i], fds[i + 2].revents, now);
      close_finished(now);
      if (fds[1].revents & POLLIN)
        accept_some(now);
      log_gave_way(now);
    }
  }

private:
  static short events_of(const http_exchange& x) {
    short e = x.read_room() > 0 ? POLLIN : 0;
    if (!x.pending()[0].empty())
      e |= POLLOUT;
    return e;
  }

  /// Milliseconds until the nearest deadline (at most a second).
  int wait_ms(clock_type::time_point now) const {
    auto next = now + std::chrono::seconds{1};
    for (const auto& c : conns_)
      next = std::min(next, c->exchange.deadline());
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now);
    return static_cast<int>(std::max<int64_t>(0, ms.count()));
  }

  void serve(connection& c, short revents, clock_type::time_point now) {
    auto respond = [this, now](const http_request& q) {
      return answer(q, now);
    };
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
      auto room = std::min(c.exchange.read_room(), sizeof buffer_);
      if (room > 0) {
        auto n = ::recv(c.fd, buffer_, room, MSG_DONTWAIT);
        if (n >= 0)
          c.exchange.received({buffer_, static_cast<size_t>(n)}, now, respond);
        else if (errno != EAGAIN && errno != EINTR)
          c.exchange.lost();
      }
    }
    write_some(c, now, respond);
  }

  /// Sends what the socket takes now, without waiting.
  void write_some(connection& c, clock_type::time_point now,
                  const http_exchange::responder& respond) {
    for (int i = 0; i < 4; ++i) { // a few pipelined responses at most
      auto out = c.exchange.pending();
      if (out[0].empty())
        return;
      iovec iov[2] = {{const_cast<char*>(out[0].data()), out[0].size()},
                      {const_cast<char*>(out[1].data()), out[1].size()}};
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = out[1].empty() ? 1 : 2;
      auto n = ::sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) {
        if (n < 0 && errno != EAGAIN && errno != EINTR)
          c.exchange.lost();
        return;
      }
      c.exchange.sent(static_cast<size_t>(n), now, respond);
    }
  }

  void close_finished(clock_type::time_point now) {
    std::erase_if(conns_, [this, now](const std::unique_ptr<connection>& c) {
      if (!c->exchange.finished(now))
        return false;
      auto why = c->exchange.why_finished(now);
      if (!why.empty())
        log_.line(now, "refused: " + why + " (peer " + c->peer + ")");
      return true;
    });
  }

  /// Accepts up to 4 waiting connections (so those open are read in
  /// between); past the cap, the oldest connection waiting for a request
  /// (else the oldest) gives way.
  void accept_some(clock_type::time_point now) {
    for (int i = 0; i < 4; ++i) {
      int fd =
          ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE)
          log_.line(now, std::string{"cannot accept: "} + std::strerror(errno));
        return;
      }
      if (conns_.size() >= cap_)
        give_way();
      conns_.push_back(std::make_unique<connection>(fd, limits_, now));
    }
  }

  void give_way() {
    auto it = std::find_if(conns_.begin(), conns_.end(),
                           [](const auto& c) { return c->exchange.waiting(); });
    if (it == conns_.end())
      it = conns_.begin();
    ++gave_way_;
    conns_.erase(it);
  }

  /// One line a second at most for the connections that gave way.
  void log_gave_way(clock_type::time_point now) {
    if (gave_way_ == 0 || now - gave_way_logged_ < std::chrono::seconds{1})
      return;
    log_line(log_level::warning, "http",
             "closed " + std::to_string(gave_way_) +
                 " connection(s), oldest waiting first, to hold at most " +
                 std::to_string(cap_));
    gave_way_ = 0;
    gave_way_logged_ = now;
  }

  /// The answer to a request whole and within the limits.
  http_response answer(const http_request& q, clock_type::time_point now) {
    if (q.header("range"))
      return http_text(416, "no ranges\n");
    if (loopback_) { // a page elsewhere that resolves its name to us: refused
      auto name = host_name(q);
      if (name != host_ && name != "[" + host_ + "]" && name != "localhost" &&
          name != "127.0.0.1" && name != "[::1]")
        return http_text(421,
                         "this live view answers to its own address only\n");
    }
    if (q.path == "/" || q.path == "/view") {
      auto& r = q.path == "/" ? page_render_ : view_render_;
      auto body = q.path == "/" ? rendered(r, now, live_page_html)
                                : rendered(r, now, live_view_html);
      watch_->served_page(r.ended);
      return ok("text/html; charset=utf-8", body, live_page_policy());
    }
    if (q.path == "/view.js")
      return ok("text/javascript; charset=utf-8", script_);
    if (q.path == "/status")
      return ok("application/json", rendered(status_render_, now, status_json));
    if (q.path == "/metrics")
      return ok("text/plain; version=0.0.4",
                rendered(metrics_render_, now, prometheus_text));
    return http_text(404, "not found\n");
  }

  /// `r`, rendered again by `render` from a snapshot of the status if it
  /// is older than 250 ms.
  template <class Render>
  std::shared_ptr<const std::string>
  rendered(rendering& r, clock_type::time_point now, Render render) {
    if (!r.body || now - r.at >= std::chrono::milliseconds{250}) {
      auto s = status_->snapshot();
      r.body = std::make_shared<const std::string>(render(s));
      r.at = now;
      r.ended = s.ended();
    }
    return r.body;
  }

  int listen_fd_;
  int wake_fd_;
  uint32_t cap_;
  std::string host_;
  bool loopback_;
  std::shared_ptr<live_status> status_;
  std::shared_ptr<http_view::page_watch> watch_;
  std::shared_ptr<const std::string> script_;
  http_limits limits_;
  std::vector<std::unique_ptr<connection>> conns_; ///< oldest first
  rendering page_render_;
  rendering view_render_;
  rendering status_render_;
  rendering metrics_render_;
  quiet_log log_;
  uint64_t gave_way_ = 0;
  clock_type::time_point gave_way_logged_{};
  char buffer_[16 << 10];
};

} // namespace

result<std::unique_ptr<http_view>>
http_view::start(const std::string& where, std::shared_ptr<live_status> status,
                 uint64_t reserved_descriptors) {
  auto at = where.find(':') == std::string::npos
                ? parse_endpoint("127.0.0.1:" + where)
                : parse_endpoint(where);
  if (!at)
    return error{errc::bad_config, "--http: " + at.err().message};
  auto limit = descriptor_limit();
  auto cap =
      http_connection_cap(limit, reserved_descriptors, wanted_connections);
  if (cap == 0)
    return error{errc::bad_config, "--http: the descriptor limit (ulimit -n " +
                                       std::to_string(limit) +
                                       ") leaves none for the live "
                                       "view after the run's " +
                                       std::to_string(reserved_descriptors) +
                                       ": raise it, or run without --http"};
  auto l = listen_at(*at);
  if (!l)
    return error{errc::io_error, "--http: " + l.err().message};
  std::unique_ptr<http_view> view{new http_view};
  view->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (view->wake_fd_ < 0) {
    ::close(l->fd);
    return error{errc::io_error,
                 std::string{"--http: eventfd: "} + std::strerror(errno)};
  }
  view->max_connections_ = cap;
  auto shown = at->host.find(':') == std::string::npos
                   ? at->host
                   : "[" + at->host + "]"; // IPv6
  view->url_ = "http://" + shown + ":" + std::to_string(l->port) + "/";
  bool loopback = is_loopback(at->host);
  if (!loopback)
    log_line(log_level::warning, "http",
             "the live view listens on " + where +
                 ", beyond this host: anyone who reaches it sees the run; "
                 "keep it to operators' networks");
  auto loop =
      std::make_unique<serving_loop>(l->fd, view->wake_fd_, cap, at->host,
                                     loopback, std::move(status), view->watch_);
  view->serving_ = std::thread{[loop = std::move(loop)] { loop->run(); }};
  return view;
}

void http_view::page_watch::served_page(bool ended) {
  last_page_ms.store(now_ms());
  if (ended)
    final_served.store(true);
}

int64_t http_view::page_watch::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             clock_type::now().time_since_epoch())
      .count();
}

void http_view::keep_for_open_pages(std::chrono::milliseconds most) {
  auto watched_since = page_watch::now_ms() - watch_->last_page_ms.load();
  if (watched_since > 3000) // no page open (it asks every second)
    return;
  auto until = clock_type::now() + most;
  while (!watch_->final_served.load() && clock_type::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
}

http_view::~http_view() {
  uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0)
    log_line(log_level::warning, "http", "cannot stop the live view's loop");
  if (serving_.joinable())
    serving_.join();
  ::close(wake_fd_);
}

} // namespace fedcaf::cli
