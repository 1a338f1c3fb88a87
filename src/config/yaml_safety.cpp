// The yaml-cpp adapter for untrusted text: every YAML::Exception of the
// parse is caught here and becomes an error naming the source.

#include "fedcaf/config/yaml_safety.hpp"

#include <array>
#include <fstream>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace fedcaf {

namespace {

/// A YAML text larger than this is refused before it is parsed.
constexpr size_t max_yaml_bytes = 16 << 20;

/// Throws on the first anchor or alias of a YAML event stream. yaml-cpp
/// shares the node an alias names, so a few lines of nested aliases ("billion
/// laughs") become more nodes than any memory holds once walked or emitted.
class alias_refuser : public YAML::EventHandler {
public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& at, YAML::anchor_t anchor) override {
    check(at, anchor);
  }
  void OnAlias(const YAML::Mark& at, YAML::anchor_t) override { refuse(at); }
  void OnScalar(const YAML::Mark& at, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    check(at, anchor);
  }
  void OnSequenceStart(const YAML::Mark& at, const std::string&,
                       YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    check(at, anchor);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& at, const std::string&,
                  YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    check(at, anchor);
  }
  void OnMapEnd() override {}
  void OnAnchor(const YAML::Mark& at, const std::string&) override {
    refuse(at);
  }

private:
  static void check(const YAML::Mark& at, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor)
      refuse(at);
  }
  [[noreturn]] static void refuse(const YAML::Mark& at) {
    throw YAML::ParserException(
        at, "YAML anchors and aliases (&name, *name, <<: *name) are not "
            "allowed in fedcaf configs: write the values out");
  }
};

/// Parses the first document of `text`. Throws YAML::Exception iff it is not
/// YAML, is larger than max_yaml_bytes, or uses an anchor or an alias (those
/// are refused from the event stream, before any node is built).
YAML::Node load_yaml(const std::string& text) {
  if (text.size() > max_yaml_bytes)
    throw YAML::Exception(YAML::Mark::null_mark(),
                          "larger than " + std::to_string(max_yaml_bytes) +
                              " bytes (" + std::to_string(text.size()) + ")");
  std::istringstream in{text};
  YAML::Parser parser{in};
  alias_refuser refuser;
  parser.HandleNextDocument(refuser);
  return YAML::Load(text);
}

} // namespace

result<std::string> read_yaml_file(const std::string& path, const char* what) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return error{errc::bad_config, path + ": cannot open the " + what};
  std::string text;
  std::array<char, 64 << 10> block;
  while (in.read(block.data(), block.size()) || in.gcount() > 0) {
    text.append(block.data(), static_cast<size_t>(in.gcount()));
    if (text.size() > max_yaml_bytes)
      return error{errc::bad_config,
                   path + ": the " + what + " is larger than " +
                       std::to_string(max_yaml_bytes) + " bytes"};
  }
  return text;
}

result<YAML::Node> parse_yaml(const std::string& text,
                              const std::string& source) {
  try {
    return load_yaml(text);
  } catch (const YAML::Exception& e) {
    return error{errc::bad_config, source + ": " + e.what()};
  }
}

} // namespace fedcaf
