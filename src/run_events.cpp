#include "fedcaf/run_events.hpp"

#include <iterator>

namespace fedcaf {

namespace {

/// True iff peers can repeat `e` at will: it folds into a recent entry.
bool folds(run_event e) {
  return e == run_event::registered || e == run_event::resumed ||
         e == run_event::left || e == run_event::refused;
}

/// Logs `e` in `log` (at most `most` entries): folded into the latest
/// entry of its event and reason among the last fold_window, where it
/// folds and there is one.
void add(std::deque<run_event_entry>& log, run_event_entry e, size_t most) {
  if (folds(e.event)) {
    size_t looked = 0;
    for (auto it = log.rbegin();
         it != log.rend() && looked < run_events::fold_window; ++it, ++looked)
      if (it->event == e.event && it->reason == e.reason) {
        ++it->count;
        it->unix_s = e.unix_s;
        it->last_client = std::move(e.client);
        return;
      }
  }
  if (log.size() == most)
    log.pop_front();
  log.push_back(std::move(e));
}

/// A counter family of /metrics: the events it counts, and whether its
/// samples are by reason (else one sample, the total).
struct event_family {
  run_event event;
  const char* name;
  const char* help;
  bool by_reason;
};

constexpr event_family families[] = {
    {run_event::registered, "fedcaf_registrations_total",
     "Clients that joined the run (one that left and joins again counts "
     "again).",
     false},
    {run_event::resumed, "fedcaf_resumptions_total",
     "Sessions resumed, by how: reconnected (a new connection, after a loss "
     "or taking over) or same_connection (registered again on its "
     "connection, its transfer stalled).",
     true},
    {run_event::refused, "fedcaf_registrations_refused_total",
     "Hellos refused, by reason (the error's name).", true},
    {run_event::lost, "fedcaf_clients_lost_total",
     "Connections that ended without a goodbye, by reason (no_goodbye, or "
     "the error that closed them).",
     true},
    {run_event::left, "fedcaf_clients_left_total",
     "Clients that said goodbye, by the reason they gave.", true},
    {run_event::dropped, "fedcaf_clients_dropped_total",
     "Clients out of the run, by reason (no_resume: their grace ended; "
     "excluded_twice).",
     true},
    {run_event::rejected, "fedcaf_updates_rejected_total",
     "Updates refused, by reason (the error's name): the client left the "
     "round.",
     true},
    {run_event::excluded, "fedcaf_clients_excluded_total",
     "Clients secure aggregation excluded from a round for lying.", true},
    {run_event::round_failed, "fedcaf_rounds_failed_total",
     "Rounds that published no new model, by reason.", true},
};
static_assert(std::size(families) == run_event_count);

} // namespace

const char* to_string(run_event e) {
  static constexpr const char* names[] = {
      "registered", "resumed",  "refused",  "lost",        "left",
      "dropped",    "rejected", "excluded", "round_failed"};
  static_assert(std::size(names) == run_event_count);
  return names[static_cast<size_t>(e)];
}

std::string reason_token(std::string_view text) {
  if (text.empty())
    return "unknown";
  std::string out;
  for (unsigned char c : text.substr(0, run_events::max_reason_bytes)) {
    if (c >= 'A' && c <= 'Z')
      out += static_cast<char>(c - 'A' + 'a');
    else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
      out += static_cast<char>(c);
    else
      out += '_';
  }
  return out;
}

std::string printable_cut(std::string_view text, size_t most) {
  std::string out;
  for (unsigned char c : text.substr(0, most))
    out += c < 0x20 || c >= 0x7f ? '?' : static_cast<char>(c);
  if (text.size() > most && most >= 3)
    out.replace(most - 3, 3, "...");
  return out;
}

std::string count_event(run_event_counts& counts, run_event e,
                        std::string_view reason) {
  auto key = std::make_pair(e, reason_token(reason));
  if (!counts.count(key) && counts.size() >= run_events::max_kinds)
    key.second = "other";
  ++counts[key];
  return key.second;
}

named_event_counts by_name(const run_event_counts& counts) {
  named_event_counts out;
  for (const auto& [key, n] : counts)
    out[to_string(key.first)][key.second] = n;
  return out;
}

void run_events::note(run_event e, std::string_view reason,
                      std::string_view client, std::string_view detail,
                      double unix_s) {
  auto token = count_event(counts_, e, reason);
  run_event_entry entry{unix_s,
                        unix_s,
                        e,
                        std::move(token),
                        printable_cut(client, max_client_bytes),
                        {},
                        1,
                        printable_cut(detail, max_detail_bytes)};
  if (e == run_event::refused)
    add(refusals_, std::move(entry), max_refusals);
  else
    add(log_, std::move(entry), max_entries);
}

void append_prometheus(std::string& out, const run_event_counts& counts) {
  for (const auto& f : families) {
    out += std::string{"# HELP "} + f.name + " " + f.help + "\n# TYPE " +
           f.name + " counter\n";
    uint64_t total = 0;
    for (const auto& [key, n] : counts) {
      if (key.first != f.event)
        continue;
      total += n;
      if (f.by_reason) // a token: nothing to escape
        out += std::string{f.name} + "{reason=\"" + key.second + "\"} " +
               std::to_string(n) + "\n";
    }
    if (!f.by_reason)
      out += std::string{f.name} + " " + std::to_string(total) + "\n";
  }
}

uint64_t run_events::total(run_event e) const {
  uint64_t n = 0;
  for (const auto& [key, count] : counts_)
    n += key.first == e ? count : 0;
  return n;
}

} // namespace fedcaf
