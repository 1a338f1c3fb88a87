#include "actors/evaluator.hpp"

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "fedcaf/log.hpp"
#include "fedcaf/safetensors.hpp"

namespace fedcaf {

namespace {

std::string path_for_round(std::string pattern, uint32_t round) {
  auto at = pattern.find("{round}");
  if (at != std::string::npos)
    pattern.replace(at, 7, std::to_string(round));
  return pattern;
}

/// Writes the snapshot; returns an empty string or what went wrong.
std::string save(const std::string& pattern, const model_snapshot& s) {
  if (pattern.empty())
    return {};
  auto path = path_for_round(pattern, s.round);
  auto ok = write_safetensors(
      path, s.layout, s.view(),
      {{"format", "pt"},
       {"fedcaf_round", std::to_string(s.round)},
       {"fedcaf_version", std::to_string(s.version)}},
      [&s](uint64_t offset, uint64_t size) { s.bytes.release(offset, size); });
  if (!ok)
    return "saving the global model: " + to_string(ok.err());
  log_line("evaluator", "wrote the round " + std::to_string(s.round) +
                            " global model to " + path);
  return {};
}

evaluator_actor::behavior_type evaluating(evaluator_actor::pointer,
                                          std::shared_ptr<evaluator> impl,
                                          std::string save_path) {
  return {
      [impl, save_path](eval_atom, const snapshot_ptr& s) {
        evaluation_result r;
        r.save_failure = save(save_path, *s);
        if (!impl)
          return r;
        auto m = impl->evaluate(s->view());
        if (!m) { // cancelled: the run is ending, nobody waits for it
          if (m.err().code != errc::cancelled)
            log_line(log_level::error, "evaluator", to_string(m.err()));
          return r;
        }
        r.evaluated = true;
        r.loss = m->loss;
        r.accuracy = m->accuracy;
        return r;
      },
  };
}

} // namespace

evaluator_actor spawn_evaluator(caf::actor_system& sys,
                                std::shared_ptr<evaluator> impl,
                                std::string save_path) {
  // Evaluating blocks for as long as it takes: on a thread of its own,
  // unless the scheduler runs every actor itself (CAF's test coordinator).
  if (!sys.scheduler().detaches_utility_actors())
    return sys.spawn(evaluating, std::move(impl), std::move(save_path));
  return sys.spawn<caf::detached>(evaluating, std::move(impl),
                                  std::move(save_path));
}

} // namespace fedcaf
