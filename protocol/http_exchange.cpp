#include "protocol/http_exchange.hpp"

#include <algorithm>
#include <cctype>

namespace fedcaf {

namespace {

const char* reason_of(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 400:
    return "Bad Request";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 408:
    return "Request Timeout";
  case 413:
    return "Content Too Large";
  case 414:
    return "URI Too Long";
  case 416:
    return "Range Not Satisfiable";
  case 421:
    return "Misdirected Request";
  case 431:
    return "Request Header Fields Too Large";
  case 505:
    return "HTTP Version Not Supported";
  default:
    return "Error";
  }
}

/// True iff `c` may be in a method or a header name (RFC 9110 tchar).
bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') ||
         std::string_view{"!#$%&'*+-.^_`|~"}.find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char);
}

/// True iff `s` holds a control byte (a target or a value never does).
bool has_control(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return out;
}

/// The line of `text` from `at` to its '\n' (a '\r' before it dropped);
/// `at` moves past it. Returns false iff no '\n' is left.
bool next_line(std::string_view text, size_t& at, std::string_view& line) {
  auto end = text.find('\n', at);
  if (end == std::string_view::npos)
    return false;
  line = text.substr(at, end - at);
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  at = end + 1;
  return true;
}

} // namespace

const std::string* http_request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name)
      return &v;
  return nullptr;
}

http_response http_text(int status, std::string text, bool close) {
  return {status,
          "text/plain; charset=utf-8",
          std::make_shared<const std::string>(std::move(text)),
          close,
          {}};
}

http_request_reader::state http_request_reader::refuse(int status,
                                                       std::string why) {
  refusal_ = http_text(status, std::move(why) + "\n", true);
  return state::refused;
}

http_request_reader::state http_request_reader::parse() {
  // Empty lines before a request are ignored (RFC 9112 2.2).
  auto skip = held_.find_first_not_of("\r\n");
  held_.erase(0, std::min(skip, held_.size()));
  std::string_view text{held_};
  // A request line starts with a method's letter: anything else (a fedcaf
  // client's binary Hello, a TLS ClientHello) is refused at once, not
  // after the line timeout, in words a misdirected client can show.
  if (!text.empty() && !std::isalpha(static_cast<unsigned char>(text[0])))
    return refuse(400, "not HTTP: this is a fedcaf server's --http port (the "
                       "live view); fedcaf clients connect to its server_uri");
  size_t at = 0;
  std::string_view line;
  if (!next_line(text, at, line))
    return text.size() > limits_.max_line_bytes
               ? refuse(414, "request line over " +
                                 std::to_string(limits_.max_line_bytes) +
                                 " bytes")
               : state::incomplete;
  if (line.size() > limits_.max_line_bytes)
    return refuse(414, "request line over " +
                           std::to_string(limits_.max_line_bytes) + " bytes");
  while (next_line(text, at, line))
    if (line.empty()) {
      head_bytes_ = at;
      return parse_head(text.substr(0, at));
    }
  if (room() == 0)
    return refuse(431, "request head over " +
                           std::to_string(limits_.max_header_bytes) + " bytes");
  return state::incomplete;
}

http_request_reader::state
http_request_reader::parse_head(std::string_view head) {
  size_t at = 0;
  std::string_view line;
  next_line(head, at, line);
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos)
    return refuse(400, "malformed request line");
  auto method = line.substr(0, sp1);
  auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = line.substr(sp2 + 1);
  if (!is_token(method) || target.empty() || target.front() != '/' ||
      has_control(target))
    return refuse(400, "malformed request line");
  if (version.rfind("HTTP/", 0) != 0)
    return refuse(400, "malformed request line");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return refuse(505, "only HTTP/1.0 and HTTP/1.1");
  request_ = {};
  request_.method = method;
  request_.target = target;
  request_.path = target.substr(0, target.find('?'));
  while (next_line(head, at, line) && !line.empty()) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return refuse(400, "malformed header line");
    auto value = trim(line.substr(colon + 1));
    if (has_control(value))
      return refuse(400, "malformed header line");
    request_.headers.emplace_back(lower(line.substr(0, colon)), value);
  }
  if (request_.method != "GET" && request_.method != "HEAD")
    return refuse(405, "only GET and HEAD");
  auto length = request_.header("content-length");
  if (request_.header("transfer-encoding") || (length && *length != "0"))
    return refuse(413, "no request body");
  auto connection = request_.header("connection");
  request_.keep_alive =
      version == "HTTP/1.1" &&
      !(connection && lower(*connection).find("close") != std::string::npos);
  return state::complete;
}

void http_request_reader::next() {
  held_.erase(0, head_bytes_);
  head_bytes_ = 0;
}

http_exchange::http_exchange(const http_limits& limits, time_point opened)
    : limits_(limits), reader_(limits),
      deadline_(opened + limits.request_timeout) {}

size_t http_exchange::read_room() const {
  if (done_ || peer_closed_ || !out_head_.empty())
    return 0;
  return reader_.room();
}

void http_exchange::received(std::string_view bytes, time_point now,
                             const responder& respond) {
  if (done_ || !out_head_.empty())
    return;
  if (bytes.empty()) {
    peer_closed_ = true;
    done_ = true; // nothing is pending: no request was whole
    return;
  }
  reader_.append(bytes.substr(0, reader_.room()));
  answer(now, respond);
}

void http_exchange::answer(time_point now, const responder& respond) {
  switch (reader_.parse()) {
  case http_request_reader::state::incomplete:
    if (peer_closed_)
      done_ = true;
    return;
  case http_request_reader::state::refused:
    refused_ = reader_.refusal().status;
    refusal_text_ = *reader_.refusal().body;
    if (!refusal_text_.empty())
      refusal_text_.pop_back(); // its newline
    start_response(reader_.refusal(), false, now);
    return;
  case http_request_reader::state::complete: {
    ++served_;
    auto r = respond(reader_.request());
    r.close = r.close || !reader_.request().keep_alive ||
              served_ >= limits_.max_requests;
    start_response(r, reader_.request().method == "HEAD", now);
    reader_.next();
    return;
  }
  }
}

void http_exchange::start_response(const http_response& r, bool head_only,
                                   time_point now) {
  auto bytes = r.body ? r.body->size() : 0;
  out_head_ = "HTTP/1.1 " + std::to_string(r.status) + " " +
              reason_of(r.status) + "\r\nContent-Type: " + r.content_type +
              "\r\nContent-Length: " + std::to_string(bytes) +
              "\r\nCache-Control: no-store\r\nX-Content-Type-Options: "
              "nosniff\r\nConnection: " +
              (r.close ? "close" : "keep-alive") + "\r\n";
  if (!r.policy.empty())
    out_head_.append("Content-Security-Policy: ")
        .append(r.policy)
        .append("\r\n");
  out_head_ += "\r\n";
  out_body_ = head_only ? nullptr : r.body;
  out_sent_ = 0;
  close_after_ = r.close;
  deadline_ = now + limits_.write_timeout;
}

std::array<std::string_view, 2> http_exchange::pending() const {
  std::string_view head{out_head_};
  std::string_view body = out_body_ ? std::string_view{*out_body_} : "";
  if (out_sent_ < head.size())
    return {head.substr(out_sent_), body};
  return {body.substr(out_sent_ - head.size()), {}};
}

void http_exchange::sent(size_t n, time_point now, const responder& respond) {
  out_sent_ += n;
  auto total = out_head_.size() + (out_body_ ? out_body_->size() : 0);
  if (out_head_.empty() || out_sent_ < total)
    return;
  out_head_.clear();
  out_body_ = nullptr;
  out_sent_ = 0;
  if (close_after_) {
    done_ = true;
    return;
  }
  deadline_ = now + limits_.request_timeout;
  if (!reader_.empty() || peer_closed_)
    answer(now, respond); // a pipelined request, or the end
}

bool http_exchange::finished(time_point now) const {
  return done_ || now >= deadline_;
}

std::string http_exchange::why_finished(time_point now) const {
  if (refused_ != 0 && done_)
    return std::to_string(refused_) + " " + reason_of(refused_) + ": " +
           refusal_text_;
  if (done_ || now < deadline_ ||
      (out_head_.empty() && reader_.empty() &&
       served_ > 0)) // kept alive, unused
    return "";
  auto ms = [](std::chrono::milliseconds d) {
    return std::to_string(d.count()) + " ms";
  };
  return out_head_.empty()
             ? "timeout: no whole request within " + ms(limits_.request_timeout)
             : "timeout: its response was not taken within " +
                   ms(limits_.write_timeout);
}

uint32_t http_connection_cap(uint64_t nofile_limit, uint64_t reserved,
                             uint32_t wanted) {
  if (nofile_limit <= reserved + 2)
    return 0;
  return static_cast<uint32_t>(
      std::min<uint64_t>(wanted, nofile_limit - reserved - 2));
}

} // namespace fedcaf
