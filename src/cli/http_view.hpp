#pragma once
// The live view of a run (--http HOST:PORT): /metrics in the Prometheus text
// format, /status as JSON, and / as one self-contained HTML page (no
// external resource) that polls /status. Served by cpp-httplib on a thread
// of its own, from a live_status the server actor keeps current.

#include <memory>
#include <string>
#include <thread>

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
  ~http_view();

  http_view(const http_view&) = delete;
  http_view& operator=(const http_view&) = delete;

  /// "http://HOST:PORT/".
  const std::string& url() const { return url_; }

private:
  http_view() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string url_;
};

} // namespace fedcaf::cli
