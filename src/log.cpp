#include "fedcaf/log.hpp"

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>

namespace fedcaf {

namespace {

/// The longest message written as it is; a longer one is cut there.
constexpr size_t max_message = 1024;

/// `text` as one printable line: control bytes (a peer's newline or
/// terminal escape) and bytes past ASCII (an 8-bit CSI, a right-to-left
/// override) become \xNN, and a text past max_message is cut, so that what
/// a peer sends can neither forge log lines, restyle the terminal, nor
/// flood the log.
void append_printable(std::string& out, std::string_view text) {
  auto start = out.size();
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() - start >= max_message) {
      out += "... (" + std::to_string(text.size() - i) + " more bytes)";
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
}

/// The terminal's width in columns (80 if it does not say).
size_t terminal_columns() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return 80;
}

/// Writes log lines to stderr; on a terminal, keeps the status line below
/// them: each log line erases it, is written, and draws it again.
class console_sink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  explicit console_sink(bool terminal) : terminal_(terminal) {}

  bool terminal() const { return terminal_; }

  void status(std::string_view text) {
    if (!terminal_)
      return;
    std::lock_guard<std::mutex> guard{mutex_};
    // One column short of the width: a full line would wrap on some
    // terminals, and "\r" could no longer return to its start.
    auto width = terminal_columns();
    status_.assign(text.substr(0, width > 1 ? width - 1 : 0));
    std::string out = "\r\x1b[K" + status_;
    write(out);
  }

  void print(std::string_view text) {
    std::lock_guard<std::mutex> guard{mutex_};
    if (terminal_ && !status_.empty())
      write("\r\x1b[K");
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (terminal_ && !status_.empty())
      write(status_);
  }

protected:
  void sink_it_(const spdlog::details::log_msg& m) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(m, formatted);
    std::string out;
    if (terminal_ && !status_.empty())
      out = "\r\x1b[K";
    out.append(formatted.data(), formatted.size());
    if (terminal_)
      out += status_;
    write(out);
  }

  void flush_() override { std::fflush(stderr); }

private:
  static void write(const std::string& out) {
    std::fwrite(out.data(), 1, out.size(), stderr);
    std::fflush(stderr);
  }

  const bool terminal_;
  std::string status_; ///< guarded by mutex_
};

struct log_state {
  log_state()
      : console(std::make_shared<console_sink>(isatty(STDERR_FILENO) == 1)),
        logger("fedcaf", console) {
    // %L: the level's letter (D, I, W, E).
    logger.set_pattern("%H:%M:%S.%e %L %v");
    logger.set_level(spdlog::level::info);
    logger.flush_on(spdlog::level::trace);
  }
  std::shared_ptr<console_sink> console;
  spdlog::logger logger;
};

log_state& state() {
  static log_state s;
  return s;
}

spdlog::level::level_enum to_spdlog(log_level level) {
  switch (level) {
  case log_level::debug:
    return spdlog::level::debug;
  case log_level::info:
    return spdlog::level::info;
  case log_level::warning:
    return spdlog::level::warn;
  case log_level::error:
    return spdlog::level::err;
  case log_level::off:
    break;
  }
  return spdlog::level::off;
}

/// "who: message", each part printable.
std::string format_line(std::string_view who, std::string_view message) {
  std::string line;
  line.reserve(who.size() + std::min(message.size(), max_message) + 24);
  append_printable(line, who);
  line += ": ";
  append_printable(line, message);
  return line;
}

} // namespace

void log_line(log_level level, std::string_view who, std::string_view message) {
  auto& s = state();
  auto lvl = to_spdlog(level);
  if (!s.logger.should_log(lvl))
    return;
  auto line = format_line(who, message);
  s.logger.log(lvl, spdlog::string_view_t{line.data(), line.size()});
}

void log_to_file_only(log_level level, std::string_view who,
                      std::string_view message) {
  auto& s = state();
  auto lvl = to_spdlog(level);
  if (!s.logger.should_log(lvl) || s.logger.sinks().size() < 2)
    return;
  auto line = format_line(who, message);
  spdlog::details::log_msg m{s.logger.name(), lvl,
                             spdlog::string_view_t{line.data(), line.size()}};
  for (const auto& sink : s.logger.sinks())
    if (sink != s.console && sink->should_log(lvl)) {
      sink->log(m);
      sink->flush();
    }
}

std::optional<log_level> parse_log_level(std::string_view name) {
  if (name == "debug")
    return log_level::debug;
  if (name == "info")
    return log_level::info;
  if (name == "warning" || name == "warn")
    return log_level::warning;
  if (name == "error")
    return log_level::error;
  if (name == "off")
    return log_level::off;
  return std::nullopt;
}

void set_log_level(log_level level) {
  state().logger.set_level(to_spdlog(level));
}

log_level current_log_level() {
  switch (state().logger.level()) {
  case spdlog::level::trace:
  case spdlog::level::debug:
    return log_level::debug;
  case spdlog::level::info:
    return log_level::info;
  case spdlog::level::warn:
    return log_level::warning;
  case spdlog::level::err:
  case spdlog::level::critical:
    return log_level::error;
  default:
    return log_level::off;
  }
}

result<void> log_to_file(const std::string& path) {
  // A FIFO without a reader would block the start for ever.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode))
    return error{errc::io_error,
                 "cannot write the log file " + path + ": it is a FIFO"};
  // spdlog would create missing directories: a mistyped path is refused
  // instead.
  if (auto* f = std::fopen(path.c_str(), "a"))
    std::fclose(f);
  else
    return error{errc::io_error, "cannot write the log file " + path + ": " +
                                     std::strerror(errno)};
  try {
    auto file =
        std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
    file->set_pattern("%Y-%m-%d %H:%M:%S.%e %L %v");
    state().logger.sinks().push_back(std::move(file));
    return {};
  } catch (const spdlog::spdlog_ex& e) {
    return error{errc::io_error,
                 "cannot write the log file " + path + ": " + e.what()};
  }
}

std::string printable_line(std::string_view text) {
  std::string out;
  append_printable(out, text);
  return out;
}

bool log_on_terminal() {
  return state().console->terminal();
}

void log_status(std::string_view text) {
  state().console->status(text);
}

void print_line(std::string_view text) {
  state().console->print(text);
}

} // namespace fedcaf
