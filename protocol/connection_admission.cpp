#include "protocol/connection_admission.hpp"

namespace fedcaf {

namespace {

/// What the refusal limit counts, for its refusal.
constexpr const char* limited_events = "refused requests or repeated Hellos";

error too_many(const std::string& what) {
  return {errc::too_many_requests, what};
}

connection_admission::verdict refused(error e) {
  using action = connection_admission::verdict::action;
  return {action::refuse, {}, std::move(e)};
}

connection_admission::verdict asked(msg::frame_kind kind) {
  using action = connection_admission::verdict::action;
  return {action::ask, kind, {}};
}

/// "a <kind> frame<what>", for a refusal.
std::string a_frame(msg::frame_kind kind, const char* what) {
  return std::string{"a "} + msg::frame_kind_name(kind) + " frame" + what;
}

} // namespace

bool ends_connection(errc code) {
  switch (code) {
  case errc::malformed_frame:
  case errc::unsupported_version:
  case errc::unexpected_message:
  case errc::bad_checksum:
  case errc::out_of_range:
  case errc::manifest_mismatch:
  case errc::not_authorized:
  case errc::poisoned_update:
    return true;
  default:
    return false;
  }
}

connection_admission::verdict connection_admission::admit(msg::frame& f,
                                                          time_point now) {
  if (stage_ == stage::closing)
    return {};
  auto kind = msg::kind_of(f);
  if (!kind)
    return refused(kind.err());
  if (*kind == msg::frame_kind::heartbeat)
    return {};
  if (msg::request_id(f) == 0)
    return refused(
        {errc::malformed_frame, a_frame(*kind, " without a request id")});
  if (stage_ != stage::welcomed) {
    if (*kind != msg::frame_kind::hello || stage_ != stage::awaiting_hello)
      return refused({errc::not_authenticated,
                      a_frame(*kind, " before the peer was welcomed")});
    return admit_hello(f, now);
  }
  return route(*kind, f, now);
}

connection_admission::verdict connection_admission::route(msg::frame_kind kind,
                                                          msg::frame& f,
                                                          time_point now) {
  using msg::frame_kind;
  switch (kind) {
  case frame_kind::hello:
    if (control_ > 0)
      return refused(too_many("Hello while a request is open"));
    return admit_hello(f, now);
  case frame_kind::fetch:
    if (fetches_.size() + materialized() >= limits_.window)
      return refused(past_window("fetches"));
    fetches_.push_back(std::move(f));
    return asked(kind);
  case frame_kind::chunk:
  case frame_kind::credit:
    if (uploads_ >= limits_.window)
      return refused(past_window("chunks"));
    ++uploads_;
    return asked(kind);
  case frame_kind::offer:
  case frame_kind::end_of_stream:
  case frame_kind::evaluation:
    if (control_ >= 2)
      return refused(
          too_many("more than 2 offers, ends or evaluations in flight"));
    ++control_;
    return asked(kind);
  case frame_kind::goodbye: // its last: the connection closes after it
    stage_ = stage::closing;
    return asked(kind);
  case frame_kind::secagg_keys:
  case frame_kind::secagg_shares:
  case frame_kind::secagg_receipt:
  case frame_kind::secagg_unmask:
    // The server answers keys, shares and receipts when their phase ends:
    // one of each at a time is all an honest client sends.
    if (control_ >= 2)
      return refused(too_many("more than 2 secure aggregation requests, "
                              "offers, ends or evaluations in flight"));
    ++control_;
    return asked(kind);
  default:
    return refused(
        {errc::unexpected_message, a_frame(kind, " is not for the server")});
  }
}

connection_admission::verdict
connection_admission::admit_hello(msg::frame& f, time_point now) {
  auto h = msg::decode<msg::hello>(f);
  if (!h)
    return refused(h.err());
  if (stage_ == stage::welcomed && h->client_id != client_id_)
    return refused(
        {errc::not_authorized,
         "welcomed as " + client_id_ + ", it said Hello as " + h->client_id});
  if (stage_ == stage::welcomed && !refusal_limit_.allow(now))
    return refused(too_many(refusal_limit_.exceeded(limited_events)));
  client_id_ = h->client_id;
  if (stage_ == stage::awaiting_hello)
    stage_ = stage::hello_pending;
  ++control_;
  return asked(msg::frame_kind::hello);
}

std::optional<msg::frame> connection_admission::next_fetch() {
  if (fetches_.empty() || materialized() >= materialized_fetches ||
      stage_ != stage::welcomed)
    return std::nullopt;
  auto f = std::move(fetches_.front());
  fetches_.pop_front();
  ++fetches_waiting_;
  return f;
}

void connection_admission::answered(msg::frame_kind kind) {
  switch (kind) {
  case msg::frame_kind::fetch:
    --fetches_waiting_;
    return;
  case msg::frame_kind::chunk:
  case msg::frame_kind::credit:
    --uploads_;
    return;
  default:
    --control_;
    return;
  }
}

void connection_admission::reply_queued(msg::frame_kind kind,
                                        uint64_t frame_number) {
  if (kind == msg::frame_kind::fetch) // in flight until the peer has it
    fetch_replies_.push_back(frame_number);
}

void connection_admission::written(uint64_t frames) {
  while (!fetch_replies_.empty() && fetch_replies_.front() <= frames)
    fetch_replies_.pop_front();
}

error connection_admission::past_window(const char* what) const {
  return too_many("more than window (" + std::to_string(limits_.window) + ") " +
                  what + " in flight");
}

std::string connection_admission::connection_timeout() const {
  return std::to_string(limits_.connection_timeout.count()) +
         " ms (connection_timeout_s)";
}

bool connection_admission::welcome(time_point now) {
  if (stage_ == stage::welcomed)
    return false;
  stage_ = stage::welcomed;
  last_beat_ = now;
  return true;
}

connection_admission::tick_verdict
connection_admission::tick(time_point now, const link_activity& activity) {
  using action = tick_verdict::action;
  auto timeout = [](std::string what) {
    return tick_verdict{action::refuse, {errc::timeout, std::move(what)}};
  };
  if (stage_ == stage::closing)
    return {now - closing_since_ > close_grace ? action::close : action::none};
  if (stage_ != stage::welcomed && now - opened_ > limits_.handshake_timeout)
    return timeout(
        std::string{activity.secure ? "no Hello" : "no TLS handshake"} +
        " within handshake_timeout_s (" +
        std::to_string(limits_.handshake_timeout.count()) + " ms)");
  if (activity.silent_for(limits_.connection_timeout, now))
    return timeout("nothing arrived for " + connection_timeout());
  if (activity.stalled_for(limits_.connection_timeout, now))
    return timeout("the peer read nothing for " + connection_timeout());
  if (stage_ == stage::welcomed && now - last_beat_ >= limits_.heartbeat) {
    last_beat_ = now;
    return {action::heartbeat};
  }
  return {};
}

std::optional<error> connection_admission::evict() const {
  if (stage_ != stage::awaiting_hello && stage_ != stage::hello_pending)
    return std::nullopt;
  return too_many("not welcomed yet when more than max_unauthenticated (" +
                  std::to_string(limits_.max_unauthenticated) +
                  ") newer connections arrived: the oldest gives way");
}

std::optional<error> connection_admission::count_refusal(time_point now) {
  if (refusal_limit_.allow(now))
    return std::nullopt;
  return too_many(refusal_limit_.exceeded(limited_events));
}

error connection_admission::refusal(const error& e) const {
  auto who = stage_ == stage::welcomed ? client_id_ + ": " : std::string{};
  return {e.code, who + e.message + " (peer " + address_ + ")"};
}

std::string connection_admission::refused_line(const error& e) const {
  return std::string{"refused: "} + to_string(e.code) + ": " + client_id_ +
         ": " + e.message + " (peer " + address_ + ")";
}

void connection_admission::start_closing(time_point now) {
  stage_ = stage::closing;
  closing_since_ = now;
}

error connection_admission::tls_only() {
  return {errc::not_authorized,
          "it accepts TLS only: set comm_configs.grpc_configs.use_ssl: true, "
          "with client_certificate, client_certificate_key and "
          "root_certificate"};
}

} // namespace fedcaf
