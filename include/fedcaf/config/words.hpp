#pragma once
// The config's word choices. Each is parsed once, by load_config, into one
// of these enums; the rest of the code never compares config strings. One
// table per enum (src/config/words.cpp) lists its words in the order
// messages name them: name_of gives the word back, for messages and
// reports, and parse_word reads one. Value types and constant tables only.

#include <chrono>
#include <optional>
#include <span>
#include <string_view>

namespace fedcaf {

/// client_configs.model_configs.name: CNN | torchscript | safetensors |
/// synthetic | llama.
enum class model_kind { cnn, torchscript, safetensors, synthetic, llama };
/// train_configs.trainer: VanillaTrainer (LibTorch) | dummy | python.
enum class trainer_kind { vanilla, dummy, python };
/// train_configs.storage (dummy trainer): ram | disk.
enum class model_storage { ram, disk };
/// train_configs.dp.mode: none | per_sample | ghost | fused.
enum class dp_sgd_mode { none, per_sample, ghost, fused };
/// aggregator_kwargs.client_weights_mode: equal | sample_size.
enum class client_weighting { equal, sample_size };
/// aggregator_kwargs.staleness_fn: constant | polynomial | hinge.
enum class staleness_kind { constant, polynomial, hinge };
/// aggregator_kwargs.partial_updates: discard | keep.
enum class partial_updates { discard, keep };
/// aggregator_kwargs.tensor_rules' values: average (as the tensor's kind
/// says: floats by the rule, integers rounded, bools by majority) | keep
/// (the server's value stays; clients' values are not used).
enum class tensor_rule { average, keep };
/// server_configs.checkpoint.on_error: stop | continue.
enum class checkpoint_failure { stop, go_on };
/// scheduler_kwargs.on_deadline: fail | wait.
enum class deadline_action { fail, wait };
/// server_configs.scheduler: SyncScheduler (rounds) | AsyncScheduler (each
/// update as it arrives: FedAsync, FedBuff).
enum class scheduler_kind { sync, async };
/// server_configs.memory_mode: ram | window | disk. ram: the global model
/// and a model-sized sum (about 2 x model). window: only
/// stream_configs.window chunk positions open, each averaged into the
/// global model as soon as every client delivered it (about 1 x model).
/// disk: as window, the global model in a file mapping whose pages are
/// given back after use.
enum class memory_mode { ram, window, disk };

/// A config word and the enum value it is parsed into.
template <class E> struct config_word {
  E value;
  const char* name;
};

/// The table of each enum above: every word it reads, in the order
/// messages list them.
std::span<const config_word<model_kind>> words_of(model_kind);
std::span<const config_word<trainer_kind>> words_of(trainer_kind);
std::span<const config_word<model_storage>> words_of(model_storage);
std::span<const config_word<dp_sgd_mode>> words_of(dp_sgd_mode);
std::span<const config_word<client_weighting>> words_of(client_weighting);
std::span<const config_word<staleness_kind>> words_of(staleness_kind);
std::span<const config_word<partial_updates>> words_of(partial_updates);
std::span<const config_word<tensor_rule>> words_of(tensor_rule);
std::span<const config_word<checkpoint_failure>> words_of(checkpoint_failure);
std::span<const config_word<deadline_action>> words_of(deadline_action);
std::span<const config_word<scheduler_kind>> words_of(scheduler_kind);
std::span<const config_word<memory_mode>> words_of(memory_mode);

/// An enum that has a table of config words.
template <class E>
concept config_word_enum = requires(E e) {
  words_of(e);
};

/// Returns the word `value` is written as in a config ("CNN",
/// "AsyncScheduler", ...), "?" for a value its table lacks.
template <config_word_enum E> std::string_view name_of(E value) {
  for (const auto& w : words_of(value))
    if (w.value == value)
      return w.name;
  return "?";
}

/// Returns the value the config word `word` names (case-sensitive), or
/// nullopt iff it names none.
template <config_word_enum E>
std::optional<E> parse_word(std::string_view word) {
  for (const auto& w : words_of(E{}))
    if (word == w.name)
      return w.value;
  return std::nullopt;
}

/// A config's seconds (`*_s` keys) as milliseconds, truncated.
std::chrono::milliseconds millis_of(double seconds);

} // namespace fedcaf
