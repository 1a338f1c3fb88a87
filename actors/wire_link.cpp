#include "actors/wire_link.hpp"

#include <sys/socket.h>

#include <algorithm>

#include "fedcaf/log.hpp"

namespace fedcaf {

namespace {

/// Bytes asked of the socket per read.
constexpr size_t read_bytes = 128 << 10;

/// The socket's write buffer takes small frames while it holds less.
constexpr size_t coalesce_bytes = 256 << 10;

} // namespace

wire_link::wire_link(caf::io::broker* self, caf::io::connection_handle hdl,
                     std::shared_ptr<tls_context> tls,
                     const std::string& peer_host, uint64_t max_frame_bytes)
    : self_(self), hdl_(hdl), reader_(max_frame_bytes) {
  if (tls) {
    tls_ = std::make_unique<tls_session>(std::move(tls), peer_host);
    // The scribe's write buffer stays the same object for its lifetime.
    tls_->set_output(&self_->wr_buf(hdl_));
  }
  last_input_ = last_output_ = self_->clock().now();
}

result<void> wire_link::start() {
  self_->configure_read(hdl_, caf::io::receive_policy::at_most(read_bytes));
  self_->ack_writes(hdl_, true);
  return tls_ ? advance_handshake() : result<void>{};
}

uint64_t wire_link::send(frame&& f) {
  if (closed_)
    return frames_sent_;
  if (pending_.empty() && !output_pending())
    last_output_ = self_->clock().now(); // the stall clock starts now
  pending_.push_back(std::move(f));
  pump();
  return ++frames_sent_;
}

uint64_t wire_link::send_last(frame&& f) {
  pending_.clear();
  return send(std::move(f));
}

void wire_link::send_plain(const frame& f) {
  if (closed_)
    return;
  auto& buf = self_->wr_buf(hdl_);
  buf.insert(buf.end(), f.begin(), f.end());
  note_queued(f.size());
}

void wire_link::close() {
  if (closed_)
    return;
  closed_ = true;
  if (tls_ && secure_) { // TLS's clean end; the socket writes it first
    tls_->close_notify();
    account_ciphertext();
  }
  if (tls_)
    tls_->set_output(nullptr);
  self_->close(hdl_);
}

void wire_link::abort() {
  if (closed_)
    return;
  closed_ = true;
  pending_.clear();
  // CAF 0.17's default multiplexer names a connection by its socket.
  auto fd = static_cast<int>(hdl_.id());
  ::linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::shutdown(fd, SHUT_RDWR);
  self_->close(hdl_);
}

void wire_link::transferred(uint64_t remaining) {
  written_ = queued_ >= remaining ? queued_ - remaining : 0;
  last_output_ = self_->clock().now();
  while (!frame_ends_.empty() && frame_ends_.front() <= written_) {
    frame_ends_.pop_front();
    ++frames_written_;
  }
  pump();
}

result<void> wire_link::advance_handshake() {
  auto done = tls_->handshake();
  account_ciphertext();
  if (!done)
    return done.err();
  if (*done) {
    secure_ = true;
    pump();
  }
  return {};
}

void wire_link::pump() {
  if (closed_ || (tls_ && !secure_))
    return;
  auto& buf = self_->wr_buf(hdl_);
  while (!pending_.empty()) {
    auto& f = pending_.front();
    largest_frame_ = std::max<uint64_t>(largest_frame_, f.size());
    auto room = std::max<uint64_t>(coalesce_bytes, largest_frame_);
    if (!buf.empty() && buf.size() + f.size() > room)
      break;
    if (tls_) {
      if (auto ok = tls_->write(f); !ok)
        log_line(log_level::error, "gateway", to_string(ok.err()));
      account_ciphertext();
    } else if (buf.empty()) {
      auto n = f.size();
      buf.swap(f); // no copy: the socket writes the frame's own buffer
      note_queued(n);
    } else {
      buf.insert(buf.end(), f.begin(), f.end());
      note_queued(f.size());
    }
    frame_ends_.push_back(queued_);
    pending_.pop_front();
  }
}

void wire_link::account_ciphertext() {
  auto out = tls_->bytes_out();
  if (out != tls_accounted_)
    note_queued(out - tls_accounted_);
  tls_accounted_ = out;
}

void wire_link::note_queued(uint64_t n) {
  queued_ += n;
  self_->flush(hdl_);
}

} // namespace fedcaf
