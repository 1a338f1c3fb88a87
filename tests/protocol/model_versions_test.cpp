// The aggregator's published models: versions, the previous model's memory
// handed back only when nobody else reads it, and a relay's adoption of
// its parent's model (on the heap, and in an unlinked file).

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "protocol/model_versions.hpp"
#include "small_model.hpp"

using namespace fedcaf;

namespace {

/// The small model, every float32 value `v`, as version `version`.
std::shared_ptr<model_snapshot> filled(float v, uint64_t version) {
  auto s = std::make_shared<model_snapshot>();
  s->layout = testing::small_model();
  s->version = version;
  s->bytes = byte_buffer::zeroed(s->layout.total_bytes());
  auto* x = reinterpret_cast<float*>(s->bytes.data());
  for (size_t i = 0; i < s->bytes.size() / sizeof(float); ++i)
    x[i] = v;
  return s;
}

float first_value(const model_snapshot& s) {
  float x;
  std::memcpy(&x, s.bytes.data(), sizeof x);
  return x;
}

} // namespace

TEST_CASE("each publication is the next version of the current layout; the "
          "previous model's memory comes back only once nobody reads it") {
  model_versions models{filled(1, 7)};
  CHECK(models.version() == 7);
  CHECK(models.take_previous().size() == 0); // nothing published before

  model_snapshot next;
  next.bytes = std::move(filled(2, 0)->bytes);
  next.position_weights = {3, 3, 3, 3};
  auto first = models.publish(4, std::move(next));
  CHECK(first->version == 8);
  CHECK(first->round == 4);
  CHECK(first->layout == testing::small_model());
  CHECK(first->position_weights.size() == 4);
  CHECK(&models.current() == first.get());
  CHECK(first_value(models.current()) == 2);

  model_snapshot again;
  again.bytes = byte_buffer::zeroed(first->bytes.size());
  auto reader = models.publish(5, std::move(again)); // `first` still read
  CHECK(models.version() == 9);
  CHECK(models.take_previous().size() == 0); // a download holds it
  auto size = first->bytes.size();
  first.reset();
  auto recycled = models.take_previous();
  CHECK(recycled.size() == size);
  CHECK(models.take_previous().size() == 0); // given once
  CHECK(reader->version == 9);
}

TEST_CASE("a relay adopts its parent's model as a copy of its own, a new "
          "version of the same round, in an unlinked file in disk mode") {
  auto dir = std::filesystem::temp_directory_path() /
             ("fedcaf-versions-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (bool on_disk : {false, true}) {
    CAPTURE(on_disk);
    auto initial = filled(0, 0);
    initial->round = 3;
    model_versions models{initial};
    initial.reset();
    auto parent = filled(5, 41); // the parent's own version is not taken
    auto adopted =
        models.adopt(parent, on_disk ? (dir / "model").string() : "");
    REQUIRE(adopted);
    CHECK((*adopted)->version == 1);
    CHECK((*adopted)->round == 3);
    CHECK((*adopted)->bytes.data() != parent->bytes.data());
    CHECK(std::memcmp((*adopted)->bytes.data(), parent->bytes.data(),
                      parent->bytes.size()) == 0);
    CHECK((*adopted)->bytes.file_backed() == on_disk);
    CHECK(std::filesystem::is_empty(dir)); // unlinked
    CHECK(models.take_previous().size() == parent->bytes.size());

    auto other = std::make_shared<model_snapshot>();
    other->bytes = byte_buffer::zeroed(parent->bytes.size() + 4);
    auto refused = models.adopt(other, "");
    REQUIRE(!refused);
    CHECK(refused.err().code == errc::manifest_mismatch);
    CHECK(models.version() == 1); // unchanged
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a relay's download that nobody else holds becomes its adopted "
          "model as it is, without a copy, in ram and window modes") {
  auto initial = filled(0, 0);
  model_versions models{initial};
  initial.reset();
  auto parent = filled(5, 41);
  const auto* bytes = parent->bytes.data();
  auto size = parent->bytes.size();
  auto adopted = models.adopt(std::move(parent), "");
  REQUIRE(adopted);
  CHECK((*adopted)->bytes.data() == bytes);
  CHECK((*adopted)->bytes.size() == size);
  CHECK((*adopted)->version == 1);
  auto expected = filled(5, 41);
  CHECK(std::memcmp((*adopted)->bytes.data(), expected->bytes.data(), size) ==
        0);
}
