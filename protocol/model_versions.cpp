#include "protocol/model_versions.hpp"

#include <utility>

#include "fedcaf/dummy_trainer.hpp" // anonymous_file_buffer

namespace fedcaf {

model_versions::model_versions(std::shared_ptr<model_snapshot> initial)
    : version_(initial->version), current_(std::move(initial)) {}

snapshot_ptr model_versions::publish(uint32_t round, model_snapshot next) {
  auto made = std::make_shared<model_snapshot>(std::move(next));
  made->layout = current_->layout;
  made->version = ++version_;
  made->round = round;
  previous_ = std::move(current_);
  current_ = made;
  return snapshot_ptr{std::move(made)};
}

result<snapshot_ptr>
model_versions::adopt(std::shared_ptr<model_snapshot> upstream,
                      const std::string& file_prefix, bool arriving) {
  auto size = current_->layout.total_bytes();
  if (upstream->bytes.size() != size)
    return error{errc::manifest_mismatch,
                 "the parent's model has " +
                     std::to_string(upstream->bytes.size()) + " bytes, not " +
                     std::to_string(size)};
  bool take = upstream.use_count() == 1 &&
              (file_prefix.empty() || upstream->bytes.file_backed());
  if (arriving && !take)
    return error{errc::internal, "a model still arriving is adopted only "
                                 "from its only holder, in the memory its "
                                 "memory mode keeps models in"};
  auto next = std::make_shared<model_snapshot>();
  next->layout = current_->layout;
  next->version = version_ + 1;
  next->round = current_->round;
  if (take) {
    next->bytes = std::move(upstream->bytes); // its only holder
  } else if (file_prefix.empty()) {
    next->bytes = byte_buffer::uninitialized(size);
    copy_released(upstream->bytes, next->bytes);
  } else {
    auto file = anonymous_file_buffer(
        file_prefix + ".v" + std::to_string(next->version), size);
    if (!file)
      return file.err();
    next->bytes = std::move(*file);
    copy_released(upstream->bytes, next->bytes);
  }
  ++version_;
  previous_.reset();
  current_ = next;
  return snapshot_ptr{std::move(next)};
}

byte_buffer model_versions::take_previous() {
  if (!previous_ || previous_.use_count() != 1)
    return {};
  auto bytes = std::move(previous_->bytes);
  previous_.reset();
  return bytes;
}

} // namespace fedcaf
