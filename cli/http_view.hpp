#pragma once
// The live view of a run (--http HOST:PORT): /metrics in the Prometheus text
// format, /status as JSON, and / as one self-contained HTML page (no
// external resource; fedcaf/live_page.hpp) whose script (/view.js) replaces
// its view from /view every second. Served on a thread of its own, by
// one poll loop over plain sockets, from a live_status the server actor
// keeps current; each connection's exchange is an http_exchange
// (protocol/http_exchange.hpp).
// It cannot hurt the run: a request line is at most 8 KiB and a request
// head 32 KiB, a request must arrive whole within 5 s and a response be
// taken within 5 s (or the connection is closed), no request body is read,
// and at most max_connections() connections are open at once (one more
// makes the oldest waiting for a request, else the oldest, give way): a cap under the
// descriptors RLIMIT_NOFILE leaves after the run's own reserve. /status
// and /metrics are rendered at most every 250 ms, shared by every
// connection. Against a page elsewhere that reaches the port: only GET and
// HEAD, no Range, a Host that names this address (against DNS rebinding).
// Thread-safety: constructed and destroyed on one thread; the serving
// thread only reads the live_status (itself thread-safe).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "fedcaf/error.hpp"
#include "fedcaf/live_status.hpp"

namespace fedcaf::cli {

class http_view {
public:
  /// The most connections it holds at once, where descriptors allow.
  static constexpr uint32_t wanted_connections = 32;

  /// Binds `where` ("PORT" binds 127.0.0.1; "HOST:PORT") and serves
  /// `status`, keeping `reserved_descriptors` of RLIMIT_NOFILE for the run
  /// (its connections, files and logs). Returns an error iff the address
  /// cannot be bound, or the limit leaves no descriptor for the view.
  static result<std::unique_ptr<http_view>>
  start(const std::string& where, std::shared_ptr<live_status> status,
        uint64_t reserved_descriptors);
  /// Stops serving and closes every connection (the loop never blocks on
  /// one: this returns within one poll).
  ~http_view();

  http_view(const http_view&) = delete;
  http_view& operator=(const http_view&) = delete;

  /// "http://HOST:PORT/".
  const std::string& url() const { return url_; }
  /// The cap on its connections open at once.
  uint32_t max_connections() const { return max_connections_; }

  /// The run has ended: if a page asked for its view in the last 3 s (a
  /// page open asks every second), waits until one has been served the
  /// ended run's view, at most `most`, so that the page keeps the final
  /// state once the process is gone. Returns at once otherwise.
  void keep_for_open_pages(std::chrono::milliseconds most);

  /// What the serving thread tells keep_for_open_pages about the pages.
  struct page_watch {
    std::atomic<int64_t> last_page_ms{INT64_MIN / 2}; ///< steady clock
    std::atomic<bool> final_served{false};
    /// A page or its view was served, rendered from an ended run iff
    /// `ended`.
    void served_page(bool ended);
    static int64_t now_ms();
  };

private:
  http_view() = default;

  int wake_fd_ = -1; ///< an eventfd: written to stop the loop
  std::thread serving_;
  std::string url_;
  uint32_t max_connections_ = 0;
  std::shared_ptr<page_watch> watch_ = std::make_shared<page_watch>();
};

} // namespace fedcaf::cli
