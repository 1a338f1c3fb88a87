#include <doctest/doctest.h>

#include "fedcaf/manifest.hpp"
#include "fedcaf/report.hpp"

using namespace fedcaf;

TEST_CASE("clients' figures are averaged weighted by their samples") {
  figures_sum sum;
  CHECK(sum.empty());
  sum.add(1000, {{"accuracy", 0.9}, {"loss", 0.3}});
  sum.add(3000, {{"accuracy", 0.5}});
  sum.add(0, {{"note", 4.0}}); // a figure only 0-sample clients gave
  sum.add(0, {{"note", 2.0}});
  auto m = sum.mean();
  CHECK(m.clients == 4);
  CHECK(m.samples == 4000);
  REQUIRE(m.find("accuracy"));
  CHECK(*m.find("accuracy") == doctest::Approx((900.0 + 1500.0) / 4000));
  CHECK(*m.find("loss") == doctest::Approx(0.3)); // only its reporter
  CHECK(*m.find("note") == doctest::Approx(3.0));
  CHECK_FALSE(m.find("perplexity"));
}

TEST_CASE("one client's lying figure moves a mean only within the others'") {
  figures_sum honest, lied;
  for (auto* sum : {&honest, &lied}) {
    sum->add(1000, {{"accuracy", 0.86}});
    sum->add(1000, {{"accuracy", 0.87}});
    sum->add(1000, {{"accuracy", 0.88}});
  }
  honest.add(1000, {{"accuracy", 0.85}});
  lied.add(uint64_t{1} << 40, {{"accuracy", 0.99}}); // however heavy
  // Without the highest and the lowest: the middle two, 0.87 and 0.865.
  CHECK(*honest.mean().find("accuracy") == doctest::Approx(0.865));
  CHECK(*lied.mean().find("accuracy") == doctest::Approx(0.875));
  figures_sum low; // the lowest left out too: a liar cannot pull it down
  low.add(1, {{"loss", 0.3}});
  low.add(1, {{"loss", 0.31}});
  low.add(1, {{"loss", 0.0}});
  CHECK(*low.mean().find("loss") == doctest::Approx(0.3));
}

TEST_CASE("a round's report and line carry the clients' evaluation") {
  round_record r;
  r.round = 2;
  figures_sum sum;
  sum.add(5000, {{"accuracy", 0.875}, {"loss", 0.25}});
  r.client_metrics = sum.mean();
  r.test_accuracy = 0.875; // no test_loss: the line must not need one
  auto line = progress_line(r, 3);
  CHECK(line.find("accuracy 0.8750") != std::string::npos);
  CHECK(line.find("clients' eval: 1 clients, weight 5000") !=
        std::string::npos);
  run_report report;
  report.rounds.push_back(r);
  auto json = to_json(report);
  CHECK(json.find("\"client_metrics\"") != std::string::npos);
  CHECK(json.find("\"samples\": 5000") != std::string::npos);
  // One reporter: its accuracy is the round's, unchecked; said so.
  CHECK(json.find("\"trimmed\": false") != std::string::npos);
  CHECK(line.find("(untrimmed: fewer than 3 reporters)") != std::string::npos);
  sum.add(5000, {{"accuracy", 0.8}});
  sum.add(5000, {{"accuracy", 0.9}});
  r.client_metrics = sum.mean();
  report.rounds[0] = r;
  CHECK(to_json(report).find("\"trimmed\": true") != std::string::npos);
  CHECK(progress_line(r, 3).find("untrimmed") == std::string::npos);
}

TEST_CASE("layouts are compared tensor by tensor, naming the difference") {
  manifest ours, theirs;
  ours.tensors.push_back(make_tensor_info("w", dtype::float32, {2, 3}));
  theirs.tensors.push_back(make_tensor_info("w", dtype::float32, {3, 2}));
  auto r = compare_layouts(ours, theirs, "the server's");
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::manifest_mismatch);
  CHECK(r.err().message.find("'w' is F32 [3, 2] there and F32 [2, 3] here") !=
        std::string::npos);
  theirs.tensors[0] = ours.tensors[0];
  CHECK(compare_layouts(ours, theirs, "x"));
  theirs.tensors.push_back(make_tensor_info("b", dtype::bfloat16, {3}));
  auto missing = compare_layouts(ours, theirs, "x");
  REQUIRE_FALSE(missing);
  CHECK(missing.err().message.find("'b' is missing here") != std::string::npos);
}

TEST_CASE("a report's JSON survives any text") {
  round_record r;
  r.round = 1;
  run_report report;
  report.node = "n\xff";
  report.rounds.push_back(r);
  CHECK(to_json(report).find("\"node\"") != std::string::npos);
}
