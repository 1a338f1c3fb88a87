#include "actors/server_core.hpp"

#include "actors/messages.hpp"

namespace fedcaf {

namespace {

/// The terms every round announces, from the server's options.
exchange_terms exchange_terms_of(const server_options& o) {
  return {o.chunk_bytes, o.window, o.compression, o.secure_aggregation.enabled};
}

/// What the round reporter needs of the server's options.
reporter_options reporter_options_of(const server_options& o) {
  return {o.num_rounds,
          o.federated_evaluation,
          o.report_path,
          o.report_html_path,
          o.metrics,
          o.live,
          o.progress,
          o.compression,
          o.dp_noise_multiplier,
          o.dp_sample_rate,
          o.dp_delta,
          o.robust,
          o.poisoned,
          o.print_rounds};
}

} // namespace

server_core::server_core(snapshot_ptr initial, server_peers peers,
                         server_options options, run_report* report)
    : peers_(std::move(peers)), options_(std::move(options)),
      refusals_("server", options_.refusals),
      exchange_(std::move(initial), exchange_terms_of(options_)),
      rounds_(exchange_),
      registry_({options_.tokens, options_.require_certificate_name,
                 options_.num_clients}),
      report_(report), reporter_(reporter_options_of(options_), report),
      tally_(options_.max_sample_size, options_.secagg_by_samples) {
  if (options_.live)
    options_.live->set_model(exchange_.model_bytes(), options_.chunk_bytes,
                             exchange_.chunk_count());
  if (!options_.resumed_from.empty())
    reporter_.event("resumed", "",
                    "from the checkpoint of round " +
                        std::to_string(options_.resumed_from.back()));
}

void server_core::announce_to(const std::string& key) {
  auto* c = registry_.connected(key);
  const auto& id = c ? c->logical : key;
  auto f = c ? rounds_.again(id, tally_.current().by.count(id) > 0,
                             options_.async ? &c->task : nullptr)
             : std::nullopt;
  if (f)
    self_->send(c->handle, round_atom::value, std::move(*f));
}

void server_core::give_task(const std::string& id, uint32_t round) {
  auto* c = registry_.find(id);
  if (!c || stopping_)
    return;
  if (!rounds_.is_open())
    round_started_ = now();
  c->task = rounds_.task(round);
  c->model = exchange_.model();
  reporter_.expect_task(exchange_.model_bytes());
  reporter_.task_started(id, round);
  if (c->state == presence::connected)
    self_->send(c->handle, round_atom::value, c->task);
}

} // namespace fedcaf
