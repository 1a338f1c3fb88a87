// The aggregator's published models: versions, the previous model's memory
// handed back only when nobody else reads it, and a relay's adoption of
// its parent's model (on the heap, and in an unlinked file).

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "fedcaf/dummy_trainer.hpp" // anonymous_file_buffer
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

TEST_CASE("each publication is the next version of the current layout, the "
          "previous model's memory comes back only once nobody reads it") {
  model_versions models{filled(1, 7)};
  CHECK(models.version() == 7);
  CHECK(models.take_previous().size() == 0); // nothing published before

  model_snapshot next;
  next.bytes = std::move(filled(2, 0)->bytes);
  auto first = models.publish(4, std::move(next));
  CHECK(first->version == 8);
  CHECK(first->round == 4);
  CHECK(first->layout == testing::small_model());
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
    std::weak_ptr<model_snapshot> before = initial;
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
    // The model before (a relay's last sum) is nobody's to download: gone.
    CHECK(before.expired());
    CHECK(models.take_previous().size() == 0);

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

TEST_CASE("a relay's download still arriving is adopted only by taking its "
          "bytes: from its only holder, on the heap, or in a file in disk "
          "mode") {
  auto dir = std::filesystem::temp_directory_path() /
             ("fedcaf-arriving-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto size = testing::small_model().total_bytes();
  auto arriving = [&](bool in_file) {
    auto s = std::make_shared<model_snapshot>();
    s->layout = testing::small_model();
    if (in_file) {
      auto file = anonymous_file_buffer((dir / "download").string(), size);
      REQUIRE(file);
      s->bytes = std::move(*file);
    } else {
      s->bytes = byte_buffer::zeroed(size);
    }
    return s;
  };
  model_versions models{filled(0, 0)};
  // Disk mode: the download's file becomes the model, as it is.
  auto in_file = arriving(true);
  const auto* at = in_file->bytes.data();
  auto taken = models.adopt(std::move(in_file), (dir / "model").string(), true);
  REQUIRE(taken);
  CHECK((*taken)->bytes.data() == at);
  CHECK((*taken)->bytes.file_backed());
  // Bytes written after the adoption are the model's (the download goes on
  // into the memory the relay serves from).
  std::memset(const_cast<std::byte*>(at), 0x3f, 4);
  CHECK(std::memcmp((*taken)->bytes.data(), at, 4) == 0);
  // A heap download in disk mode would have to be copied: refused, as is
  // one somebody else holds; the model in place stays.
  auto on_heap = models.adopt(arriving(false), (dir / "model").string(), true);
  REQUIRE_FALSE(on_heap);
  CHECK(on_heap.err().code == errc::internal);
  auto shared = arriving(false);
  auto held = shared;
  auto refused = models.adopt(shared, "", true);
  REQUIRE_FALSE(refused);
  CHECK(models.version() == 1);
  CHECK(models.current().bytes.data() == at);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a shared buffer's memory lives until its last owner goes, on the "
          "heap and in a file") {
  // A relay's download is written by its upstream half while its
  // children's side owns the model: the side may forget it (its run
  // ended) while the download still writes (ASan would see a write to
  // freed memory here).
  auto dir = std::filesystem::temp_directory_path() /
             ("fedcaf-shared-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  constexpr size_t size = 1 << 20;
  for (bool in_file : {false, true}) {
    CAPTURE(in_file);
    byte_buffer first;
    if (in_file) {
      auto file = anonymous_file_buffer((dir / "shared").string(), size);
      REQUIRE(file);
      first = std::move(*file);
    } else {
      first = byte_buffer::zeroed(size);
    }
    auto second = first.share();
    CHECK(second.data() == first.data());
    CHECK(second.size() == size);
    CHECK(second.file_backed() == in_file);
    auto third = second.share(); // shared again: one memory, three owners
    CHECK(third.data() == first.data());
    first = byte_buffer{}; // the side forgets the model
    std::memset(second.data(), 0x5a, size);
    second.release(0, size);
    second = byte_buffer{};
    CHECK(std::to_integer<int>(third.data()[size - 1]) == 0x5a);
  }
  std::filesystem::remove_all(dir);
}
