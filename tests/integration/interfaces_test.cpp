// One list of actor messages: the table under "### Actor messages" in
// docs/design.md must hold exactly the signatures of the typed interfaces in
// actors/interfaces.hpp, row for row. A message added to an interface and
// not to the table (or the other way round) fails here, printing the rows
// the interfaces have.

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/interfaces.hpp"

using namespace fedcaf;

namespace {

/// The name the table gives a type; a type without one does not compile,
/// so a new message type must be named here and in the table.
template <class T> struct name_of;
#define FEDCAF_NAME(type, text)                                                \
  template <> struct name_of<type> {                                           \
    static std::string get() { return text; }                                  \
  }
FEDCAF_NAME(std::string, "string");
FEDCAF_NAME(bool, "bool");
FEDCAF_NAME(double, "double");
FEDCAF_NAME(uint32_t, "uint32");
FEDCAF_NAME(uint64_t, "uint64");
FEDCAF_NAME(frame, "frame");
FEDCAF_NAME(error, "error");
FEDCAF_NAME(snapshot_ptr, "snapshot");
FEDCAF_NAME(std::vector<std::string>, "ids");
FEDCAF_NAME(evaluation_result, "evaluation_result");
FEDCAF_NAME(upload_request, "upload_request");
FEDCAF_NAME(round_result, "round_result");
FEDCAF_NAME(secagg::unmask_plan, "unmask_plan");
FEDCAF_NAME(upload_listener, "upload_listener");
FEDCAF_NAME(round_host, "round_host");
FEDCAF_NAME(aggregator_host, "aggregator_host");
FEDCAF_NAME(checkpoint_state, "checkpoint_state");
FEDCAF_NAME(relay_result, "relay_result");
FEDCAF_NAME(relay_model, "relay_model");
FEDCAF_NAME(relay_step, "relay_step");
#undef FEDCAF_NAME

template <caf::atom_value V> struct name_of<caf::atom_constant<V>> {
  static std::string get() { return caf::to_string(V) + "_atom"; }
};

template <class... Ts> std::string tuple_of(caf::detail::type_list<Ts...>) {
  std::vector<std::string> names{name_of<Ts>::get()...};
  std::string out = "(";
  for (size_t i = 0; i < names.size(); ++i)
    out += (i ? ", " : "") + names[i];
  return out + ")";
}

template <class... Ts> std::string reply_of(caf::output_tuple<Ts...>) {
  std::vector<std::string> names{name_of<Ts>::get()...};
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i ? ", " : "") + names[i];
  return out;
}

std::string reply_of(caf::output_tuple<void>) {
  return "-";
}

/// "| `interface` | `(atom, ...)` | `reply` |" for one signature.
template <class Sig> struct row_of;
template <class In, class Out> struct row_of<caf::typed_mpi<In, Out>> {
  static std::string get(const std::string& interface) {
    return "| `" + interface + "` | `" + tuple_of(In{}) + "` | `" +
           reply_of(Out{}) + "` |";
  }
};

template <class Sig> std::string row(const std::string& interface) {
  return row_of<Sig>::get(interface);
}

template <class... Sigs>
void rows_of(const std::string& interface, caf::detail::type_list<Sigs...>,
             std::set<std::string>& out) {
  (out.insert(row<Sigs>(interface)), ...);
}

template <class Handle>
void add(const std::string& interface, std::set<std::string>& out) {
  rows_of(interface, typename Handle::signatures{}, out);
}

/// The rows of the table under "### Actor messages" in docs/design.md.
std::set<std::string> documented_rows() {
  std::ifstream in{FEDCAF_SOURCE_DIR "/docs/design.md"};
  REQUIRE(in);
  std::set<std::string> rows;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("### ", 0) == 0 || line.rfind("## ", 0) == 0)
      inside = line == "### Actor messages";
    else if (inside && line.rfind("| `", 0) == 0)
      rows.insert(line);
  }
  return rows;
}

} // namespace

TEST_CASE("interfaces: design.md's actor message table is the typed "
          "interfaces, row for row") {
  std::set<std::string> typed;
  add<evaluator_actor>("evaluator_actor", typed);
  add<upload_listener>("upload_listener", typed);
  add<round_host>("round_host", typed);
  add<aggregator_host>("aggregator_host", typed);
  add<peer_frames>("peer_frames", typed);
  add<client_inbox>("client_inbox", typed);
  add<relay_courier_actor>("relay_courier_actor", typed);
  // The interfaces below extend those above; their own rows only.
  std::set<std::string> inherited;
  add<upload_listener>("scheduler_actor", inherited);
  add<scheduler_actor>("sync_scheduler_actor", inherited);
  add<peer_frames>("server_gate", inherited);
  add<peer_frames>("server_link", inherited);
  add<server_gate>("server_actor", inherited);
  add<server_link>("server_actor", inherited);
  add<round_host>("server_actor", inherited);
  add<aggregator_host>("server_actor", inherited);
  add<client_inbox>("client_actor", inherited);
  std::set<std::string> own;
  add<scheduler_actor>("scheduler_actor", own);
  add<sync_scheduler_actor>("sync_scheduler_actor", own);
  add<aggregator_actor>("aggregator_actor", own);
  add<server_gate>("server_gate", own);
  add<server_link>("server_link", own);
  add<server_actor>("server_actor", own);
  add<client_actor>("client_actor", own);
  for (const auto& r : own)
    if (!inherited.count(r))
      typed.insert(r);
  auto documented = documented_rows();
  std::ostringstream missing, extra;
  for (const auto& r : typed)
    if (!documented.count(r))
      missing << r << "\n";
  for (const auto& r : documented)
    if (!typed.count(r))
      extra << r << "\n";
  CHECK_MESSAGE(missing.str().empty(),
                "rows the interfaces have and design.md lacks:\n"
                    << missing.str());
  CHECK_MESSAGE(extra.str().empty(),
                "rows design.md has and no interface declares:\n"
                    << extra.str());
  CHECK(typed.size() > 30);
}
