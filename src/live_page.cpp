#include "fedcaf/live_page.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <utility>
#include <vector>

#include "fedcaf/report.hpp"

namespace fedcaf {

namespace {

/// printf into a std::string (numbers only: text goes through html_escape).
[[gnu::format(printf, 1, 2)]] std::string format(const char* f, ...) {
  char buf[256];
  va_list args;
  va_start(args, f);
  std::vsnprintf(buf, sizeof buf, f, args);
  va_end(args);
  return buf;
}

/// The unit `b` is best said in, and its size in bytes.
std::pair<const char*, double> unit_of(uint64_t b) {
  if (b < (1u << 20))
    return {"KiB", 1024.0};
  if (b < (1u << 30))
    return {"MiB", 1024.0 * 1024};
  return {"GiB", 1024.0 * 1024 * 1024};
}

std::string human_bytes(uint64_t b) {
  auto [unit, size] = unit_of(b);
  return format("%.1f %s", static_cast<double>(b) / size, unit);
}

/// "1.5 / 4.0 MiB": both in the unit of `total`.
std::string bytes_of(uint64_t done, uint64_t total) {
  auto [unit, size] = unit_of(total);
  return format("%.1f / %.1f %s", static_cast<double>(done) / size,
                static_cast<double>(total) / size, unit);
}

std::string human_seconds(double s) {
  if (s < 60)
    return format("%.1f s", s);
  auto m = static_cast<long>(s / 60);
  return format("%ldm %02lds", m, static_cast<long>(s) % 60);
}

/// `unix_s` as "YYYY-MM-DD HH:MM:SS UTC".
std::string utc_time(double unix_s) {
  auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

constexpr const char* style = R"css(
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;max-width:1150px}
h1{font-size:1.3em;margin:0 0 .3em} h2{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse} td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #ddd}
.bar{width:80px;height:10px;background:#eee;display:inline-block;vertical-align:middle}
.bar span{display:block;height:10px;background:#3b7dd8}
svg{background:#fafafa;border:1px solid #ddd} .muted{color:#777} [hidden]{display:none!important}
.phase{font-weight:600} .phase-waiting{color:#777} .phase-downloading{color:#1f6fd1}
.phase-evaluating{color:#8a4fd1} .phase-training{color:#b86e00} .phase-uploading{color:#0f8f6f}
.phase-done{color:#2a7d2a} .phase-rejected{color:#c62828}
.end{padding:.6em 1em;margin:.6em 0;border-radius:4px} .end.ok{background:#e8f5e9} .end.bad{background:#fdecea}
#gone{background:#fff3cd;border:1px solid #e0c060;padding:.6em 1em;margin:.6em 0}
.facts td:first-child{color:#555} .small{font-size:12px} .nowrap{white-space:nowrap}
)css";

constexpr std::string_view script = R"js("use strict";
(function () {
  const view = document.getElementById("view");
  const gone = document.getElementById("gone");
  let last = Date.now();
  async function tick() {
    try {
      const r = await fetch("/view", {cache: "no-store"});
      if (!r.ok) throw new Error("HTTP " + r.status);
      const html = await r.text();
      view.innerHTML = html;
      last = Date.now();
      gone.hidden = true;
    } catch (e) {
      const ended = view.querySelector('[data-ended="1"]') !== null;
      gone.textContent = (ended ? "The run has ended, and the" : "The") +
        " fedcaf process is gone (no answer since " +
        new Date(last).toLocaleTimeString() +
        "): this page keeps its last state.";
      gone.hidden = false;
    }
  }
  setInterval(tick, 1000);
})();
)js";

// -- charts --------------------------------------------------------------

/// One line of a chart, on its own y range.
struct chart_series {
  const char* name;
  const char* color;
  std::vector<std::pair<double, double>> points;
  double y_min = 0;
  double y_max = 1;
  int digits = 2;          ///< of its axis labels
  bool right_axis = false; ///< its labels on the right (else the left)
  bool dashed = false;
};

constexpr double chart_w = 620, chart_h = 210, left_w = 52, right_w = 52,
                 top_h = 22, bottom_h = 24;

/// An inline SVG of `series` over a shared x range (`x_from` to `x_to`,
/// widened to their points), `x_label` under it.
std::string line_chart(const char* id, const std::vector<chart_series>& series,
                       const char* x_label, double x_from = INFINITY,
                       double x_to = -INFINITY) {
  std::string out = format("<svg id=\"%s\" width=\"%.0f\" height=\"%.0f\" "
                           "viewBox=\"0 0 %.0f %.0f\" role=\"img\">",
                           id, chart_w, chart_h, chart_w, chart_h);
  double x0 = INFINITY, x1 = -INFINITY;
  for (const auto& s : series)
    if (!s.points.empty()) {
      x0 = std::min(x0, x_from);
      x1 = std::max(x1, x_to);
    }
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
    }
  if (!(x0 <= x1))
    return out + "<text x=\"60\" y=\"100\" fill=\"#777\">no data yet</text>"
                 "</svg>";
  x1 = std::max(x1, x0 + 1);
  auto X = [x0, x1](double x) {
    return left_w + (chart_w - left_w - right_w) * (x - x0) / (x1 - x0);
  };
  double legend_x = left_w;
  for (const auto& s : series) {
    auto span = s.y_max - s.y_min > 0 ? s.y_max - s.y_min : 1.0;
    auto Y = [&s, span](double y) {
      return chart_h - bottom_h -
             (chart_h - bottom_h - top_h) * (y - s.y_min) / span;
    };
    std::string d;
    for (const auto& [x, y] : s.points)
      d += format("%s%.1f %.1f", d.empty() ? "M" : " L", X(x), Y(y));
    out += "<path d=\"" + d +
           format("\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>",
                  s.color, s.dashed ? " stroke-dasharray=\"5 3\"" : "");
    if (s.points.size() <= 60)
      for (const auto& [x, y] : s.points)
        out += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
                      "fill=\"%s\"/>",
                      X(x), Y(y), s.color);
    auto ax = s.right_axis ? chart_w - right_w + 4 : 2.0;
    out += format("<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" "
                  "fill=\"%s\">%.*f</text>",
                  ax, top_h + 4, s.color, s.digits, s.y_max);
    out += format("<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" "
                  "fill=\"%s\">%.*f</text>",
                  ax, chart_h - bottom_h, s.color, s.digits, s.y_min);
    out += format("<text x=\"%.0f\" y=\"14\" font-size=\"12\" fill=\"%s\">",
                  legend_x, s.color) +
           html_escape(s.name) + "</text>";
    legend_x += 14 + 7.0 * static_cast<double>(std::string_view{s.name}.size());
  }
  out += format("<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">%g</text>",
                left_w, chart_h - 6, std::round(x0 * 10) / 10);
  out += format("<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" "
                "text-anchor=\"end\">%g</text>",
                chart_w - right_w, chart_h - 6, std::round(x1 * 10) / 10);
  out += format("<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" "
                "text-anchor=\"middle\" fill=\"#777\">",
                chart_w / 2, chart_h - 6) +
         html_escape(x_label) + "</text>";
  return out + "</svg>";
}

/// Accuracy (left axis, 0 to 1) and the test and training losses (right
/// axis, from 0) per round.
std::string rounds_chart(const live_snapshot& s) {
  chart_series acc{"test accuracy", "#3b7dd8", {}, 0, 1, 2, false, false};
  chart_series loss{"test loss", "#d9822b", {}, 0, 0, 3, true, false};
  chart_series train{"train loss", "#8d8d8d", {}, 0, 0, 3, true, true};
  for (const auto& r : s.rounds) {
    auto x = static_cast<double>(r.round);
    if (r.test_accuracy && std::isfinite(*r.test_accuracy))
      acc.points.emplace_back(x, *r.test_accuracy);
    if (r.test_loss && std::isfinite(*r.test_loss))
      loss.points.emplace_back(x, *r.test_loss);
    if (r.train_loss > 0 && std::isfinite(r.train_loss))
      train.points.emplace_back(x, r.train_loss);
  }
  double top = 0;
  for (const auto* l : {&loss, &train})
    for (const auto& [x, y] : l->points)
      top = std::max(top, y);
  loss.y_max = train.y_max = top > 0 ? top * 1.1 : 1;
  std::vector<chart_series> drawn;
  for (auto* c : {&acc, &loss, &train})
    if (!c->points.empty())
      drawn.push_back(std::move(*c));
  // A relay runs as many rounds as its parent: the axis ends at the last.
  double last = s.run.num_rounds;
  for (const auto& c : drawn)
    for (const auto& [x, y] : c.points)
      last = std::max(last, x);
  return line_chart("rounds-chart", drawn, "round", 1, std::max(1.0, last));
}

std::string memory_chart(const live_snapshot& s) {
  chart_series rss{"RSS (MiB)", "#3b7dd8", {}, 0, 1, 0, false, false};
  for (const auto& [t, b] : s.memory) {
    auto mib = static_cast<double>(b) / (1 << 20);
    rss.points.emplace_back(t, mib);
    rss.y_max = std::max(rss.y_max, mib * 1.1);
  }
  return line_chart("memory-chart", {rss}, "seconds since the start", 0);
}

// -- the run ---------------------------------------------------------------

std::string summary(const live_snapshot& s) {
  size_t connected = 0;
  for (const auto& [id, c] : s.clients)
    connected += c.state == "registered" || c.state == "back" ? 1 : 0;
  auto until = s.ended() ? s.ended_unix_s : s.now_unix_s;
  std::string out =
      "<p class=\"summary\">" + std::string{s.run.async ? "step" : "round"} +
      format(" <b id=\"round\">%u</b>", s.round) +
      (s.run.num_rounds > 0 ? format(" of %u", s.run.num_rounds)
                            : std::string{" (its parent's rounds)"}) +
      format(" &middot; completed <b id=\"completed\">%u</b> &middot; "
             "status ",
             s.completed()) +
      "<b id=\"status\">" + html_escape(s.status) + "</b>" +
      (s.final_evaluation && !s.ended() ? " (clients evaluate the final model)"
                                        : "") +
      format(" &middot; %zu clients (%zu connected) &middot; "
             "model ",
             s.clients.size(), connected) +
      human_bytes(s.model_bytes) +
      format(" &middot; refusals %llu",
             static_cast<unsigned long long>(s.refusals));
  if (auto a = s.last_accuracy())
    out += format(" &middot; accuracy %.4f", *a);
  return out + " &middot; " +
         human_seconds(std::max(0.0, until - s.started_unix_s)) + "</p>";
}

/// How the run ended (nothing while it runs).
std::string ending(const live_snapshot& s) {
  if (!s.ended())
    return "";
  bool ok = s.status == "completed";
  std::string out = std::string{"<div class=\"end "} + (ok ? "ok" : "bad") +
                    "\" id=\"final\">Run <b id=\"final-status\">" +
                    html_escape(s.status) + "</b>" +
                    format(" after %u rounds, ", s.completed()) +
                    human_seconds(s.ended_unix_s - s.started_unix_s);
  if (auto a = s.last_accuracy())
    out += format(" &middot; final accuracy <b id=\"final-accuracy\">%.4f"
                  "</b>",
                  *a);
  if (!s.failure.empty())
    out += "<br>" + html_escape(s.failure);
  return out + "<br><span class=\"small muted\">ended " +
         utc_time(s.ended_unix_s) + "</span></div>";
}

std::string secagg_fact(const live_snapshot& s) {
  if (!s.run.secure_aggregation)
    return "off";
  return "on (SecAgg+), phase <b id=\"secagg-phase\">" +
         html_escape(s.secagg_phase) + "</b>";
}

std::string compression_fact(const live_snapshot& s) {
  const auto& r = s.run;
  if (r.upload_encoding == "none" && r.download_encoding == "none")
    return "off";
  std::string out = "upload " + html_escape(r.upload_encoding) + ", download " +
                    html_escape(r.download_encoding);
  if (r.upload_encoding == "zfp" || r.download_encoding == "zfp")
    out += format(" (zfp tolerance %g)", r.zfp_tolerance);
  const live_round* last = s.rounds.empty() ? nullptr : &s.rounds.back();
  std::string measured;
  if (last && last->compression_up)
    measured += format(" up %.2fx", *last->compression_up);
  if (last && last->compression_down)
    measured += format(" down %.2fx", *last->compression_down);
  if (!measured.empty())
    out += "; measured last round (model bytes / wire bytes):<b "
           "id=\"compression-ratio\">" +
           measured + "</b>";
  return out;
}

std::string dp_fact(const live_snapshot& s) {
  const auto& r = s.run;
  const live_round* last = s.rounds.empty() ? nullptr : &s.rounds.back();
  std::string out;
  if (r.dp_noise_multiplier > 0) {
    out += format("DP-FedAvg, noise multiplier %g", r.dp_noise_multiplier);
    if (last && last->dp_epsilon)
      out += format(": &epsilon; = <b id=\"dp-epsilon\">%.3f</b> at "
                    "&delta; = %g",
                    *last->dp_epsilon, r.dp_delta);
  }
  if (r.dp_sgd) {
    out += out.empty() ? "" : "; ";
    out += "DP-SGD on the clients";
    if (last && last->dp_sgd_epsilon)
      out += format(": largest &epsilon; <b id=\"dp-sgd-epsilon\">%.3f</b>",
                    *last->dp_sgd_epsilon);
  }
  return out.empty() ? "off" : out;
}

std::string facts(const live_snapshot& s) {
  auto row = [](const char* name, const char* id, const std::string& v) {
    return std::string{"<tr><td>"} + name + "</td><td id=\"" + id + "\">" + v +
           "</td></tr>";
  };
  return "<table class=\"facts\">" +
         row("secure aggregation", "secagg", secagg_fact(s)) +
         row("compression", "compression", compression_fact(s)) +
         row("differential privacy", "dp", dp_fact(s)) +
         row("evaluation", "evaluation",
             s.run.federated_evaluation ? "by the clients (federated)"
                                        : "by the server") +
         "</table>";
}

// -- clients ---------------------------------------------------------------

std::string bar(uint64_t done, uint64_t total) {
  auto p = total ? std::min(100.0, 100.0 * static_cast<double>(done) /
                                       static_cast<double>(total))
                 : 0.0;
  return format("<span class=\"bar\"><span style=\"width:%.1f%%\"></span>"
                "</span> <span class=\"small\">",
                p) +
         bytes_of(done, total) + "</span>";
}

/// How the time line names phase `p`.
const char* phase_verb(client_phase p) {
  static constexpr const char* verbs[] = {
      "wait", "download", "evaluate", "train", "upload", "done", "rejected"};
  static_assert(std::size(verbs) == client_phase_count);
  return verbs[static_cast<size_t>(p)];
}

/// The time `c` spent in each phase this round: "download 0.2 s · train
/// 4.1 s · upload 0.1 s · done at 4.5 s" (the current one so far, "...").
std::string timeline(const live_client& c, double until) {
  std::vector<std::pair<double, client_phase>> at;
  for (size_t p = 0; p < client_phase_count; ++p)
    if (c.entered_s[p] >= 0)
      at.emplace_back(c.entered_s[p], static_cast<client_phase>(p));
  std::sort(at.begin(), at.end());
  std::string out;
  for (size_t i = 0; i < at.size(); ++i) {
    auto [t, p] = at[i];
    bool current = i + 1 == at.size();
    bool terminal = p == client_phase::done || p == client_phase::rejected;
    if (p == client_phase::waiting && !current)
      continue;
    out += out.empty() ? "" : " &middot; ";
    if (terminal)
      out += format("%s at %.1f s", phase_verb(p), t);
    else
      out += format("%s %.1f s%s", phase_verb(p),
                    (current ? until - c.started_unix_s : at[i + 1].first) - t,
                    current ? "&hellip;" : "");
  }
  return out;
}

std::string client_row(const live_snapshot& s, const std::string& id,
                       const live_client& c) {
  const char* phase = to_string(c.phase);
  auto until = s.ended() ? s.ended_unix_s : s.now_unix_s;
  // A relay (server_configs.relays): one row, the sum of its clients.
  std::string relay;
  if (auto r = s.run.relays.find(id); r != s.run.relays.end())
    relay = format(" <span class=\"muted small\">relay of up to %llu "
                   "client%s</span>",
                   static_cast<unsigned long long>(r->second),
                   r->second == 1 ? "" : "s");
  return "<tr class=\"client\" data-client=\"" + html_escape(id) +
         "\" data-phase=\"" + phase + "\"><td>" + html_escape(id) + relay +
         "</td><td class=\"phase phase-" + phase + "\">" + phase +
         "</td><td class=\"nowrap\">" + bar(c.down_bytes, s.model_bytes) +
         "</td><td class=\"nowrap\">" + bar(s.up_bytes(c), s.model_bytes) +
         "</td><td class=\"small nowrap\">" + timeline(c, until) + "</td><td>" +
         html_escape(c.state) + "</td><td class=\"small\">" +
         html_escape(c.address) + "</td></tr>";
}

std::string clients_table(const live_snapshot& s) {
  std::string out =
      "<table class=\"clients\"><thead><tr><th>client</th><th>phase</th>"
      "<th>download (this round)</th><th>upload (this round)</th>"
      "<th>time in each phase</th><th>connection</th><th>address</th>"
      "</tr></thead><tbody>";
  for (const auto& [id, c] : s.clients)
    out += client_row(s, id, c);
  out += "</tbody></table>";
  if (s.clients_not_shown > 0)
    out += format("<p class=\"muted\">%llu more registrations not shown "
                  "(at most num_clients + 64 clients are)</p>",
                  static_cast<unsigned long long>(s.clients_not_shown));
  return out;
}

// -- rounds ----------------------------------------------------------------

std::string optional_cell(const std::optional<double>& v, const char* f) {
  return "<td>" + (v ? format(f, *v) : std::string{"&ndash;"}) + "</td>";
}

/// The last 30 rounds, newest first.
std::string rounds_table(const live_snapshot& s) {
  if (s.rounds.empty())
    return "";
  std::string out =
      "<table class=\"rounds small\"><thead><tr><th>round</th><th>status</th>"
      "<th>accuracy</th><th>test loss</th><th>train loss</th><th>seconds</th>"
      "<th>clients</th><th>up</th><th>down</th><th>ratio up</th>"
      "<th>ratio down</th><th>&epsilon;</th></tr></thead><tbody>";
  size_t shown = 0;
  for (auto it = s.rounds.rbegin(); it != s.rounds.rend() && shown < 30;
       ++it, ++shown) {
    const auto& r = *it;
    out +=
        format("<tr class=\"round\"><td>%u</td><td>", r.round) +
        html_escape(r.status) + "</td>" +
        optional_cell(r.test_accuracy, "%.4f") +
        optional_cell(r.test_loss, "%.4f") +
        format("<td>%.4f</td><td>%.1f</td><td>%u</td><td>", r.train_loss,
               r.wall_seconds, r.clients) +
        human_bytes(r.bytes_up) + "</td><td>" + human_bytes(r.bytes_down) +
        "</td>" + optional_cell(r.compression_up, "%.2fx") +
        optional_cell(r.compression_down, "%.2fx") +
        optional_cell(r.dp_epsilon ? r.dp_epsilon : r.dp_sgd_epsilon, "%.3f") +
        "</tr>";
  }
  out += "</tbody></table>";
  if (s.rounds.size() > shown)
    out += format("<p class=\"muted small\">the last %zu of %zu rounds "
                  "(all of them are in the chart)</p>",
                  shown, s.rounds.size());
  return out;
}

/// Who an event log entry is of: one client, or the first and the last of
/// a run of them with its count.
std::string event_clients(const run_event_entry& e) {
  if (e.count == 1)
    return html_escape(e.client);
  return html_escape(e.client) + " &hellip; " + html_escape(e.last_client) +
         format(" <span class=\"muted\">(%llu)</span>",
                static_cast<unsigned long long>(e.count));
}

/// The latest of `events` (newest first, at most `most`), as a table;
/// `who` heads the client column.
std::string events_table(const live_snapshot& s,
                         const std::vector<run_event_entry>& events,
                         const char* who, size_t most) {
  if (events.empty())
    return "<p class=\"muted\">none yet</p>";
  std::string out = std::string{"<table class=\"events\"><thead><tr>"
                                "<th>s</th><th>event</th><th>reason</th><th>"} +
                    who + "</th><th>detail</th></tr></thead><tbody>";
  size_t shown = 0;
  for (auto it = events.rbegin(); it != events.rend() && shown < most;
       ++it, ++shown)
    out += format("<tr class=\"event\" data-event=\"%s\"><td>%.1f</td><td>",
                  to_string(it->event), it->unix_s - s.started_unix_s) +
           to_string(it->event) + "</td><td>" + html_escape(it->reason) +
           "</td><td>" + event_clients(*it) + "</td><td class=\"small\">" +
           html_escape(it->detail) + "</td></tr>";
  out += "</tbody></table>";
  if (events.size() > most)
    out += format("<p class=\"muted small\">the latest %zu of %zu kept; all "
                  "in /status</p>",
                  most, events.size());
  return out;
}

/// The events of the run's clients and rounds, then the refused Hellos.
std::string events_section(const live_snapshot& s) {
  return "<h2>Events</h2>" + events_table(s, s.events, "client", 50) +
         "<h3>Refused Hellos</h3>" + events_table(s, s.refused, "peer", 10);
}

/// The memory chart's caption: the last sample's RSS, anonymous and
/// file-backed (a mapped model file is the latter).
std::string memory_split(const live_snapshot& s) {
  if (s.memory.empty())
    return "";
  return "<p class=\"small\" id=\"rss-split\">RSS " +
         human_bytes(s.memory.back().second) + ": " +
         human_bytes(s.rss_anon_bytes) + " anonymous (the process's own), " +
         human_bytes(s.rss_file_bytes) +
         " file-backed (mapped files, such as a model in disk mode)</p>";
}

std::string page(const live_snapshot& s, const char* title,
                 const std::string& foot, const char* script_tag) {
  return std::string{"<!doctype html>\n<html lang=\"en\"><head><meta "
                     "charset=\"utf-8\"><title>"} +
         title + "</title><style>" + style +
         "</style></head><body>\n<div id=\"gone\" hidden></div>\n"
         "<div id=\"view\">" +
         live_view_html(s) + "</div>\n<p class=\"muted small\">" + foot +
         "</p>\n" + script_tag + "</body></html>\n";
}

} // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text)
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  return out;
}

std::string live_view_html(const live_snapshot& s) {
  return std::string{"<div class=\"run\" data-status=\""} +
         html_escape(s.status) + "\" data-ended=\"" + (s.ended() ? "1" : "0") +
         "\"><h1>fedcaf " + html_escape(s.run.role) +
         " <span class=\"muted\">" + html_escape(s.run.aggregator) + ", " +
         html_escape(s.run.scheduler) + "</span></h1>" + summary(s) +
         ending(s) + facts(s) + "<h2>Clients</h2>" + clients_table(s) +
         "<h2>Rounds: accuracy and loss</h2>" + rounds_chart(s) +
         rounds_table(s) + events_section(s) +
         "<h2>Memory of this process</h2>" + memory_split(s) + memory_chart(s) +
         "</div>";
}

std::string live_page_html(const live_snapshot& s) {
  return page(s, "fedcaf live view",
              "Live view of fedcaf " FEDCAF_VERSION
              ", refreshed every second; <a href=\"/status\">/status</a> "
              "(JSON), <a href=\"/metrics\">/metrics</a> (Prometheus).",
              "<script src=\"/view.js\"></script>");
}

std::string_view live_page_script() {
  return script;
}

std::string_view live_page_policy() {
  return "default-src 'none'; script-src 'self'; connect-src 'self'; "
         "style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; "
         "form-action 'none'; frame-ancestors 'none'";
}

std::string static_page_html(const live_snapshot& s) {
  return page(s, "fedcaf run report",
              "Written by fedcaf " FEDCAF_VERSION " at " +
                  utc_time(s.now_unix_s) +
                  (s.ended() ? ": the run's final state."
                             : ": the run as it stood after its last round "
                               "(it was still running)."),
              "");
}

result<void> write_static_page(const live_snapshot& s,
                               const std::string& path) {
  return write_file_atomically(path, static_page_html(s), "HTML report");
}

} // namespace fedcaf
