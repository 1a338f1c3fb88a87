#pragma once
// What the live view (--http) shows: the run's clients, the current round's
// per-client transfer progress, memory over time and accuracy per round.
// The server actor writes it as things happen; the HTTP thread renders it.
// Thread-safety: every member function locks; safe from any thread.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fedcaf/report.hpp"

namespace fedcaf {

class live_status {
public:
  /// The run's shape: what the page shows before any round.
  void set_run(std::string role, uint32_t num_rounds, std::string aggregator);
  void set_model_bytes(uint64_t model_bytes);
  /// A client's state changed: registered | lost | back | dropped.
  void client_event(const std::string& id, const std::string& state,
                    const std::string& address);
  /// Round `round` started: each client's transfer counts start from 0.
  void round_started(uint32_t round);
  /// Model bytes served to `id`, or update bytes received from it.
  void sent_to(const std::string& id, uint64_t bytes);
  void received_from(const std::string& id, uint64_t bytes);
  /// A round's record (its line was printed).
  void round_finished(const round_record& r);
  void set_refusals(uint64_t refusals);
  /// The run ended: "completed", "failed" or "interrupted".
  void ended(const std::string& status);

  /// The Prometheus text exposition (version 0.0.4) of the counters.
  std::string prometheus();
  /// Everything the page shows, as JSON.
  std::string json();

private:
  struct client_view {
    std::string state;
    std::string address;
    uint64_t bytes_down_round = 0;
    uint64_t bytes_up_round = 0;
    uint64_t bytes_down_total = 0;
    uint64_t bytes_up_total = 0;
  };
  struct memory_point {
    double t = 0;
    uint64_t rss_bytes = 0;
  };

  /// Samples the process's memory at most once a second. REQUIRES: lock.
  void sample_memory_locked();

  std::mutex mtx_;
  std::string role_ = "server";
  std::string status_ = "running";
  std::string aggregator_;
  uint32_t num_rounds_ = 0;
  uint32_t round_ = 0;
  uint64_t model_bytes_ = 0;
  uint64_t refusals_ = 0;
  std::map<std::string, client_view> clients_;
  std::vector<round_record> rounds_;
  std::vector<memory_point> memory_;
  double started_ = 0;
};

} // namespace fedcaf
