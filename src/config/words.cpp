#include "fedcaf/config/words.hpp"

#include <cstdint>

namespace fedcaf {

namespace {

constexpr config_word<model_kind> model_words[] = {
    {model_kind::cnn, "CNN"},
    {model_kind::torchscript, "torchscript"},
    {model_kind::safetensors, "safetensors"},
    {model_kind::synthetic, "synthetic"},
    {model_kind::llama, "llama"}};
constexpr config_word<trainer_kind> trainer_words[] = {
    {trainer_kind::vanilla, "VanillaTrainer"},
    {trainer_kind::dummy, "dummy"},
    {trainer_kind::python, "python"}};
constexpr config_word<model_storage> storage_words[] = {
    {model_storage::ram, "ram"}, {model_storage::disk, "disk"}};
constexpr config_word<dp_sgd_mode> dp_mode_words[] = {
    {dp_sgd_mode::none, "none"},
    {dp_sgd_mode::per_sample, "per_sample"},
    {dp_sgd_mode::ghost, "ghost"},
    {dp_sgd_mode::fused, "fused"}};
constexpr config_word<client_weighting> weighting_words[] = {
    {client_weighting::equal, "equal"},
    {client_weighting::sample_size, "sample_size"}};
constexpr config_word<staleness_kind> staleness_words[] = {
    {staleness_kind::constant, "constant"},
    {staleness_kind::polynomial, "polynomial"},
    {staleness_kind::hinge, "hinge"}};
constexpr config_word<partial_updates> partial_words[] = {
    {partial_updates::discard, "discard"}, {partial_updates::keep, "keep"}};
constexpr config_word<tensor_rule> tensor_rule_words[] = {
    {tensor_rule::average, "average"}, {tensor_rule::keep, "keep"}};
constexpr config_word<checkpoint_failure> checkpoint_failure_words[] = {
    {checkpoint_failure::stop, "stop"},
    {checkpoint_failure::go_on, "continue"}};
constexpr config_word<deadline_action> deadline_words[] = {
    {deadline_action::fail, "fail"}, {deadline_action::wait, "wait"}};
constexpr config_word<scheduler_kind> scheduler_words[] = {
    {scheduler_kind::sync, "SyncScheduler"},
    {scheduler_kind::async, "AsyncScheduler"}};
constexpr config_word<memory_mode> memory_mode_words[] = {
    {memory_mode::ram, "ram"},
    {memory_mode::window, "window"},
    {memory_mode::disk, "disk"}};

} // namespace

std::span<const config_word<model_kind>> words_of(model_kind) {
  return model_words;
}
std::span<const config_word<trainer_kind>> words_of(trainer_kind) {
  return trainer_words;
}
std::span<const config_word<model_storage>> words_of(model_storage) {
  return storage_words;
}
std::span<const config_word<dp_sgd_mode>> words_of(dp_sgd_mode) {
  return dp_mode_words;
}
std::span<const config_word<client_weighting>> words_of(client_weighting) {
  return weighting_words;
}
std::span<const config_word<staleness_kind>> words_of(staleness_kind) {
  return staleness_words;
}
std::span<const config_word<partial_updates>> words_of(partial_updates) {
  return partial_words;
}
std::span<const config_word<tensor_rule>> words_of(tensor_rule) {
  return tensor_rule_words;
}
std::span<const config_word<checkpoint_failure>> words_of(checkpoint_failure) {
  return checkpoint_failure_words;
}
std::span<const config_word<deadline_action>> words_of(deadline_action) {
  return deadline_words;
}
std::span<const config_word<scheduler_kind>> words_of(scheduler_kind) {
  return scheduler_words;
}
std::span<const config_word<memory_mode>> words_of(memory_mode) {
  return memory_mode_words;
}

std::chrono::milliseconds millis_of(double seconds) {
  return std::chrono::milliseconds{static_cast<int64_t>(seconds * 1000)};
}

} // namespace fedcaf
