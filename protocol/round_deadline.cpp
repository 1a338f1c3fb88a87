#include "protocol/round_deadline.hpp"

#include <sstream>

namespace fedcaf {

std::string join_ids(const std::set<std::string>& ids) {
  std::string out;
  for (const auto& id : ids)
    out += (out.empty() ? "" : ", ") + id;
  return out;
}

deadline_cut cut_at_deadline(const std::set<std::string>& participants,
                             const std::set<std::string>& offered,
                             const std::set<std::string>& closed,
                             uint32_t min_clients, bool wait) {
  deadline_cut cut;
  uint32_t delivered = 0;
  for (const auto& id : participants)
    if (closed.count(id))
      ++delivered;
    else if (offered.count(id))
      cut.uploading.insert(id);
    else
      cut.not_offered.insert(id);
  if (wait && delivered < min_clients &&
      !(cut.uploading.empty() && cut.not_offered.empty())) {
    cut.wait = true;
    cut.uploading.clear();
    cut.not_offered.clear();
  }
  return cut;
}

std::string waiting_for_min_clients(uint32_t round, size_t delivered,
                                    uint32_t min_clients) {
  return "round " + std::to_string(round) + ": the deadline passed with " +
         std::to_string(delivered) + " updates delivered, min_clients is " +
         std::to_string(min_clients) + "; waiting for min_clients";
}

std::string uploads_cut_at_deadline(uint32_t round,
                                    const std::set<std::string>& ids) {
  return "round " + std::to_string(round) +
         ": the deadline passed before the uploads of " + join_ids(ids) +
         " were complete";
}

namespace {

/// "2.5" for 2500 ms.
std::string seconds_of(std::chrono::milliseconds t) {
  std::ostringstream out;
  out << static_cast<double>(t.count()) / 1000.0;
  return out.str();
}

} // namespace

error not_offered_by_deadline(const std::string& id, const std::string& from,
                              uint32_t round) {
  return {errc::timeout,
          id + " from " + from + ": no update offered by round " +
              std::to_string(round) + "'s deadline; it sits the round out"};
}

error upload_past_deadline(std::chrono::milliseconds deadline) {
  return {errc::timeout, "the round deadline (" + seconds_of(deadline) +
                             " s, scheduler_kwargs.round_deadline_s) passed "
                             "before its upload was complete"};
}

registration_verdict
registration_deadline_passed(const std::set<std::string>& registered,
                             const std::vector<std::string>& expected,
                             uint32_t num_clients, uint32_t min_clients,
                             std::chrono::milliseconds after) {
  std::set<std::string> absent;
  for (const auto& id : expected)
    if (!registered.count(id))
      absent.insert(id);
  auto missing = num_clients > registered.size()
                     ? num_clients - static_cast<uint32_t>(registered.size())
                     : 0u;
  std::string never =
      !absent.empty() ? join_ids(absent)
                      : std::to_string(missing) +
                            " client(s) (the server knows client ids only from "
                            "use_authenticator's tokens)";
  registration_verdict v;
  v.start = registered.size() >= min_clients && !registered.empty();
  v.message =
      "the registration deadline (" + seconds_of(after) +
      " s, scheduler_kwargs.registration_deadline_s) passed with " +
      std::to_string(registered.size()) + " of " + std::to_string(num_clients) +
      " clients registered (" +
      (registered.empty() ? "none" : join_ids(registered)) +
      "); never came: " + never + "; min_clients is " +
      std::to_string(min_clients) +
      (v.start ? ": the run goes on without them" : ": the run cannot start");
  return v;
}

} // namespace fedcaf
