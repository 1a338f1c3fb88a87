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

#include "fedcaf/log.hpp"
#include "protocol/http_exchange.hpp"
#include "protocol/network.hpp"
#include "protocol/refusal_log.hpp"

namespace fedcaf::cli {

namespace {

using clock_type = std::chrono::steady_clock;

/// The page: polls /status every second and draws the clients, the
/// round's per-client transfers, memory over time and accuracy per round
/// with inline SVG. Nothing is fetched from anywhere else.
constexpr const char* page = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fedcaf</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em} h2{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse} td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #ddd}
.bar{width:160px;height:10px;background:#eee;display:inline-block;vertical-align:middle}
.bar span{display:block;height:10px;background:#3b7dd8}
svg{background:#fafafa;border:1px solid #ddd} .muted{color:#777}
</style></head><body>
<h1>fedcaf <span id="role"></span></h1>
<div id="summary" class="muted">connecting...</div>
<h2>Clients</h2>
<table><thead><tr><th>client</th><th>state</th><th>address</th>
<th>model down (this round)</th><th>update up (this round)</th></tr></thead>
<tbody id="clients"></tbody></table>
<h2>Accuracy per round</h2><svg id="acc" width="520" height="160"></svg>
<h2>Memory (RSS, MiB) over time (s)</h2><svg id="mem" width="520" height="160"></svg>
<script>
function esc(s){return String(s).replace(/[&<>"']/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]))}
function bar(b,total){const p=total?Math.min(100,100*b/total):0;
 return '<span class="bar"><span style="width:'+p.toFixed(1)+'%"></span></span> '+p.toFixed(0)+'%'}
function plot(id,pts,ymin,ymax,label){const s=document.getElementById(id),W=520,H=160,L=45,B=20;
 if(!pts.length){s.innerHTML='<text x="60" y="80" fill="#777">no data yet</text>';return}
 const xs=pts.map(p=>p[0]),x0=Math.min(...xs),x1=Math.max(...xs,x0+1);
 const X=x=>L+(W-L-10)*(x-x0)/(x1-x0),Y=y=>H-B-(H-B-10)*(y-ymin)/((ymax-ymin)||1);
 let d=pts.map((p,i)=>(i?'L':'M')+X(p[0]).toFixed(1)+' '+Y(p[1]).toFixed(1)).join(' ');
 s.innerHTML='<path d="'+d+'" fill="none" stroke="#3b7dd8" stroke-width="2"/>'+
  pts.map(p=>'<circle cx="'+X(p[0])+'" cy="'+Y(p[1])+'" r="2.5" fill="#3b7dd8"/>').join('')+
  '<text x="2" y="14" font-size="11">'+ymax.toFixed(label)+'</text><text x="2" y="'+(H-B)+'" font-size="11">'+ymin.toFixed(label)+'</text>'+
  '<text x="'+L+'" y="'+(H-4)+'" font-size="11">'+x0.toFixed(0)+'</text><text x="'+(W-40)+'" y="'+(H-4)+'" font-size="11">'+x1.toFixed(0)+'</text>'}
async function tick(){try{const r=await fetch('/status');const s=await r.json();
 document.getElementById('role').textContent=s.role+' - '+s.aggregator;
 const last=s.rounds.length?s.rounds[s.rounds.length-1]:null;
 document.getElementById('summary').innerHTML='round <b id="round">'+s.round+'</b> of '+s.num_rounds+
  ' &middot; status <b id="status">'+esc(s.status)+'</b> &middot; '+s.clients.length+' clients &middot; model '+
  (s.model_bytes/1048576).toFixed(1)+' MiB &middot; refusals '+s.refusals+
  (last&&last.test_accuracy!==null?' &middot; accuracy '+last.test_accuracy.toFixed(4):'');
 document.getElementById('clients').innerHTML=s.clients.map(c=>'<tr class="client"><td>'+esc(c.id)+'</td><td>'+esc(c.state)+
  '</td><td>'+esc(c.address)+'</td><td>'+bar(c.bytes_down_round,s.model_bytes)+'</td><td>'+bar(c.bytes_up_round,s.model_bytes)+'</td></tr>').join('');
 const acc=s.rounds.filter(x=>x.test_accuracy!==null).map(x=>[x.round,x.test_accuracy]);
 plot('acc',acc,0,1,2);
 const mem=s.memory.map(m=>[m[0],m[1]/1048576]);
 plot('mem',mem,0,Math.max(1,...mem.map(m=>m[1]))*1.1,0);
}catch(e){document.getElementById('summary').textContent='the run has ended or is unreachable'}}
tick();setInterval(tick,1000);
</script></body></html>
)html";

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
               bool loopback, std::shared_ptr<live_status> status)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), cap_(cap),
        host_(std::move(host)), loopback_(loopback), status_(std::move(status)),
        page_(std::make_shared<const std::string>(page)) {}
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
    if (q.path == "/")
      return {200, "text/html; charset=utf-8", page_};
    if (q.path == "/status")
      return {200, "application/json", rendered(status_render_, now, [this] {
                return status_->json();
              })};
    if (q.path == "/metrics")
      return {200, "text/plain; version=0.0.4",
              rendered(metrics_render_, now,
                       [this] { return status_->prometheus(); })};
    return http_text(404, "not found\n");
  }

  template <class Render>
  std::shared_ptr<const std::string>
  rendered(rendering& r, clock_type::time_point now, Render render) {
    if (!r.body || now - r.at >= std::chrono::milliseconds{250}) {
      r.body = std::make_shared<const std::string>(render());
      r.at = now;
    }
    return r.body;
  }

  int listen_fd_;
  int wake_fd_;
  uint32_t cap_;
  std::string host_;
  bool loopback_;
  std::shared_ptr<live_status> status_;
  std::shared_ptr<const std::string> page_;
  http_limits limits_;
  std::vector<std::unique_ptr<connection>> conns_; ///< oldest first
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
  auto loop = std::make_unique<serving_loop>(
      l->fd, view->wake_fd_, cap, at->host, loopback, std::move(status));
  view->serving_ = std::thread{[loop = std::move(loop)] { loop->run(); }};
  return view;
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
