#pragma once
// The live view's HTTP/1.1 exchange with one browser or scraper, as a plain
// object: bytes in, bytes out, the time passed in. Bounded in bytes (the
// request line, the header block; no request body is read) and in time (a
// request must arrive whole within request_timeout of the connection's
// opening or of the previous response's end; a response must be taken whole
// within write_timeout), so a peer that sends too much, too slowly, or never
// reads holds a fixed amount of memory for a bounded time. No socket: the
// live view (cli/http_view.cpp) reads and writes them.
// Thread-safety: none; owned by the live view's serving thread.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fedcaf {

/// The bounds on one connection (docs/operations.md, "Live view").
struct http_limits {
  size_t max_line_bytes = 8 << 10;    ///< the request line
  size_t max_header_bytes = 32 << 10; ///< the request line and its headers
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds write_timeout{5000};
  uint32_t max_requests = 100; ///< on one kept-alive connection
};

/// A request as read: method, target, headers (names in lower case).
struct http_request {
  std::string method;
  std::string target; ///< as sent
  std::string path;   ///< the target without its query
  bool keep_alive = true;
  std::vector<std::pair<std::string, std::string>> headers;

  /// Returns the value of header `name` (lower case), or nullptr iff absent.
  const std::string* header(std::string_view name) const;
};

/// A response. The body is shared, so that many connections sending the
/// same page or status hold one copy.
struct http_response {
  int status = 200;
  std::string content_type = "text/plain";
  std::shared_ptr<const std::string> body;
  bool close = false; ///< close the connection once it is sent
  /// Its Content-Security-Policy header (text that outlives the response,
  /// a literal); empty: none.
  std::string_view policy;
};

/// A response of `status` whose body is `text` (text/plain), closing iff
/// `close`.
http_response http_text(int status, std::string text, bool close = false);

/// Reads one request at a time from what a connection received, never
/// holding more than max_header_bytes.
class http_request_reader {
public:
  enum class state { incomplete, complete, refused };

  explicit http_request_reader(const http_limits& limits) : limits_(limits) {}

  /// How many more bytes it takes now: 0 once it holds max_header_bytes.
  size_t room() const { return limits_.max_header_bytes - held_.size(); }
  /// Appends `bytes`. REQUIRES: bytes.size() <= room().
  void append(std::string_view bytes) { held_.append(bytes); }
  /// True iff it holds no byte of a next request.
  bool empty() const { return held_.empty(); }

  /// Parses what it holds: complete (request() is the request), refused
  /// (refusal() answers it: 400, 405, 413, 414, 431 or 505; the connection
  /// is to be closed after it), or incomplete.
  state parse();
  const http_request& request() const { return request_; }
  const http_response& refusal() const { return refusal_; }
  /// Drops the request parse() found complete; keeps what followed it.
  void next();

private:
  state refuse(int status, std::string why);
  state parse_head(std::string_view head);

  http_limits limits_;
  std::string held_;
  size_t head_bytes_ = 0; ///< of the complete request, its terminator included
  http_request request_;
  http_response refusal_;
};

/// One connection's exchange: requests read (bounded), each answered by a
/// responder, responses written in order, deadlines kept.
///
///   reading --(a request whole)--> writing --(response taken)--> reading
///      |  \--(refused)--> writing (closing) --> finished               |
///      \--(request_timeout, peer gone)--> finished <--(write_timeout,
///                                 max_requests, a response that closes)
class http_exchange {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using responder = std::function<http_response(const http_request&)>;

  http_exchange(const http_limits& limits, time_point opened);

  /// Bytes it takes from the socket now: 0 while a response is pending.
  size_t read_room() const;
  /// `bytes` arrived at `now` (empty: the peer closed its side). Answers a
  /// request that is now whole with `respond`.
  void received(std::string_view bytes, time_point now,
                const responder& respond);
  /// The connection broke (a socket error): it is finished.
  void lost() { done_ = true; }
  /// The bytes to send now (the response's head, then its body); both
  /// empty iff nothing is pending.
  std::array<std::string_view, 2> pending() const;
  /// `n` bytes of pending() were taken by the socket at `now`. Answers a
  /// pipelined request that follows with `respond`.
  void sent(size_t n, time_point now, const responder& respond);

  /// True iff the connection is to be closed: done, or past its deadline.
  bool finished(time_point now) const;
  /// Why it finished, for the log: a refusal ("414 URI Too Long: ..."), a
  /// timeout ("timeout: ..."), or "" while it has not, or when it ended
  /// cleanly (answered, or kept alive and then unused).
  std::string why_finished(time_point now) const;
  /// When it will be finished unless bytes move as they should.
  time_point deadline() const { return deadline_; }
  /// True iff it waits for a request (no response pending): such a
  /// connection is closed first when the view is full.
  bool waiting() const { return out_head_.empty(); }
  /// The status of the refusal that ends it (400, 405, 413, 414, 431,
  /// 505), 0 if none.
  int refused_status() const { return refused_; }

private:
  void answer(time_point now, const responder& respond);
  void start_response(const http_response& r, bool head_only, time_point now);

  http_limits limits_;
  http_request_reader reader_;
  std::string out_head_;
  std::shared_ptr<const std::string> out_body_;
  size_t out_sent_ = 0;
  bool close_after_ = false;
  bool peer_closed_ = false;
  bool done_ = false;
  uint32_t served_ = 0;
  int refused_ = 0;
  std::string refusal_text_;
  time_point deadline_;
};

/// How many connections the live view may hold at once: at most
/// `wanted`, and never more than the descriptors `nofile_limit`
/// (RLIMIT_NOFILE) leaves after `reserved` (the fedcaf port's connections,
/// files and logs) and the view's own listening socket and one connection
/// accepted past the cap. Returns 0 iff none are left.
uint32_t http_connection_cap(uint64_t nofile_limit, uint64_t reserved,
                             uint32_t wanted);

} // namespace fedcaf
