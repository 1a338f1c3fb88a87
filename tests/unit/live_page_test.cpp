// The live view's HTML: whatever a client names itself, the page, its view
// and the static page carry it as text, never as markup or script; the
// static page is self-contained (no script, nothing fetched) and states
// how the run ended with its final accuracy and the rounds drawn.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "fedcaf/live_page.hpp"

using namespace fedcaf;

namespace {

/// How many times `what` occurs in `text`.
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; ++at)
    ++n;
  return n;
}

constexpr const char* hostile =
    "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";

/// Makes `l` a run of two clients, one of them named `hostile`, two rounds
/// published.
void run_with_hostile_client(live_status& l) {
  live_run r;
  r.role = "server";
  r.aggregator = "FedAvgAggregator";
  r.scheduler = "SyncScheduler";
  r.num_rounds = 3;
  r.num_clients = 2;
  r.upload_encoding = "zfp";
  r.zfp_tolerance = 0.001;
  l.set_run(r);
  l.set_model(2000, 1000, 2);
  l.client_event(hostile, "registered", "<b>10.0.0.1</b>:1");
  l.client_event("Client2", "registered", "this process");
  for (uint32_t i = 1; i <= 2; ++i) {
    l.round_started(i, false);
    l.served("Client2", 1000, 1000, false);
    round_record rec;
    rec.round = i;
    rec.test_accuracy = 0.8 + i / 100.0;
    rec.test_loss = 0.5 / i;
    rec.train_loss = 0.6 / i;
    rec.compression_up = 3.5;
    l.round_finished(rec);
  }
  l.round_started(3, false);
  l.served("Client2", 1000, 1000, false);
  l.served(hostile, 1000, 1000, false);
  l.served(hostile, 1000, 1000, true);
}

} // namespace

TEST_CASE("live page: html_escape leaves no markup") {
  CHECK(html_escape("a<b>&\"'c") == "a&lt;b&gt;&amp;&quot;&#39;c");
  CHECK(html_escape("Client1") == "Client1");
}

TEST_CASE("live page: a client's name is text, never markup or script") {
  live_status l;
  run_with_hostile_client(l);
  l.ended("failed", "round 3: <script>alert(3)</script> gave up");
  auto s = l.snapshot();
  auto view = live_view_html(s);
  CHECK(view.find("<script") == std::string::npos);
  CHECK(view.find("<img") == std::string::npos);
  CHECK(view.find("<b>10.0.0.1") == std::string::npos);
  CHECK(view.find("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x "
                  "onerror=alert(2)&gt;&quot;&#39;&amp;") != std::string::npos);
  CHECK(view.find("&lt;script&gt;alert(3)") != std::string::npos);
  auto page = live_page_html(s);
  CHECK(count(page, "<script") == 1); // its own, from the view itself
  CHECK(page.find("<script src=\"/view.js\"></script>") != std::string::npos);
  CHECK(static_page_html(s).find("<script") == std::string::npos);
  CHECK(live_page_policy().find("script-src 'self'") != std::string::npos);
  CHECK(live_page_script().find("innerHTML") != std::string::npos);
}

TEST_CASE("live page: the phases with progress, the run's facts, the rounds "
          "drawn") {
  live_status l;
  run_with_hostile_client(l);
  auto view = live_view_html(l.snapshot());
  CHECK(view.find("data-ended=\"0\"") != std::string::npos);
  CHECK(view.find("<b id=\"round\">3</b>") != std::string::npos);
  CHECK(view.find("<b id=\"completed\">2</b>") != std::string::npos);
  CHECK(view.find("data-client=\"Client2\" data-phase=\"downloading\"") !=
        std::string::npos);
  CHECK(view.find("data-phase=\"training\"><td>&lt;script") !=
        std::string::npos);
  CHECK(view.find("width:50.0%") != std::string::npos); // 1000 of 2000
  CHECK(view.find("1.0 / 2.0 KiB") != std::string::npos);
  CHECK(view.find("upload zfp, download none (zfp tolerance 0.001)") !=
        std::string::npos);
  CHECK(view.find("up 3.50x") != std::string::npos);
  CHECK(view.find("<td id=\"secagg\">off</td>") != std::string::npos);
  CHECK(view.find("<td id=\"dp\">off</td>") != std::string::npos);
  CHECK(view.find("<svg id=\"rounds-chart\"") != std::string::npos);
  CHECK(view.find("test accuracy</text>") != std::string::npos);
  CHECK(view.find("test loss</text>") != std::string::npos);
  CHECK(view.find("<path d=\"M") != std::string::npos);
  CHECK(view.find("id=\"final\"") == std::string::npos); // still running
  CHECK(view.find("relay of") == std::string::npos);
}

TEST_CASE("live page: a relay's row says it is one, and how many clients it "
          "may sum") {
  live_status l;
  live_run r;
  r.num_rounds = 2;
  r.num_clients = 2;
  r.relays = {{"RA", 4}, {"RB", 12}};
  l.set_run(r);
  l.set_model(2000, 1000, 2);
  l.client_event("RA", "registered", "10.0.0.1:1");
  l.client_event("RB", "registered", "10.0.0.2:1");
  auto view = live_view_html(l.snapshot());
  CHECK(view.find("<td>RA <span class=\"muted small\">relay of up to 4 "
                  "clients</span></td>") != std::string::npos);
  CHECK(view.find("relay of up to 12 clients") != std::string::npos);
}

TEST_CASE("live page: the static page is whole and self-contained, with "
          "the final state") {
  live_status l;
  run_with_hostile_client(l);
  l.ended("completed");
  auto s = l.snapshot();
  auto page = static_page_html(s);
  CHECK(page.rfind("<!doctype html>", 0) == 0);
  CHECK(page.find("</html>") != std::string::npos);
  CHECK(page.find("data-ended=\"1\"") != std::string::npos);
  CHECK(page.find("<b id=\"final-status\">completed</b>") != std::string::npos);
  CHECK(page.find("<b id=\"final-accuracy\">0.8200</b>") != std::string::npos);
  CHECK(page.find("the run's final state") != std::string::npos);
  for (const char* external :
       {"http://", "https://", "<script", "<link", "<img", "@import", "url("})
    CHECK_MESSAGE(page.find(external) == std::string::npos, external);
  auto dir = std::filesystem::temp_directory_path() /
             ("live_page_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "run.html").string();
  REQUIRE(write_static_page(s, path));
  std::ifstream in{path};
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("id=\"final-accuracy\">0.8200<") != std::string::npos);
  auto bad = write_static_page(s, (dir / "no" / "such.html").string());
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("cannot write the HTML report") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}
