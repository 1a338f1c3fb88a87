#pragma once
// The live view of a run (--http HOST:PORT): /metrics in the Prometheus text
// format, /status as JSON, and / as one self-contained HTML page (no
// external resource) that polls /status. Served by cpp-httplib on a thread
// of its own, from a live_status the server actor keeps current.
// Against a peer or a web page that reaches the port: only GET and HEAD,
// no request body past 1 KiB, no Range, a Host that names this address
// (against DNS rebinding), keep-alive bounded, and a stop that never waits
// for a slow connection. cpp-httplib still buffers a request line or a
// header block whole: bind it where only operators reach it (the default,
// 127.0.0.1; another address is logged with a warning).

#include <future>
#include <memory>
#include <string>

#include "fedcaf/error.hpp"
#include "fedcaf/live_status.hpp"

namespace httplib {
class Server;
}

namespace fedcaf::cli {

class http_view {
public:
  /// Binds `where` ("PORT" binds 127.0.0.1; "HOST:PORT") and serves
  /// `status`. Returns an error iff the address cannot be bound.
  static result<std::unique_ptr<http_view>>
  start(const std::string& where, std::shared_ptr<live_status> status);
  /// Stops serving; waits at most a second for connections in progress
  /// (a slow client cannot hold the process), then leaves the serving
  /// thread to end with the process.
  ~http_view();

  http_view(const http_view&) = delete;
  http_view& operator=(const http_view&) = delete;

  /// "http://HOST:PORT/".
  const std::string& url() const { return url_; }

private:
  http_view() = default;

  /// Shared with the serving thread, which may outlive the view (see the
  /// destructor).
  std::shared_ptr<httplib::Server> server_;
  std::future<void> served_; ///< ready when the serving thread has ended
  std::string url_;
};

} // namespace fedcaf::cli
