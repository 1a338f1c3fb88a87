// The configuration reference as Markdown: one table per section, each
// after its parent's.

#include "fedcaf/config/reference.hpp"

#include <map>
#include <set>
#include <vector>

#include "fedcaf/config/help.hpp"

namespace fedcaf {

namespace {

/// The section a key sits in: its path up to the last dot ("" at the top).
std::string section_of(const std::string& path) {
  auto dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

/// `text` fit for a table cell: a '|' would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += '\\';
    out += c;
  }
  return out;
}

/// The type column: the reader's type, or what becomes of a key not read.
std::string type_of(const schema_key& k) {
  switch (k.use) {
  case key_use::ignored:
    return "ignored (APPFL's, unused)";
  case key_use::accepted:
    return "accepted unread (the user's own)";
  case key_use::refused:
    return "refused";
  case key_use::read:
    break;
  }
  return k.type;
}

/// Writes the table of each section, depth first from `section`.
class writer {
public:
  explicit writer(const config_schema& schema) {
    for (const auto& k : schema.keys())
      sections_[section_of(k.path)].push_back(&k);
  }

  std::string write() {
    write_from("");
    for (const auto& [name, keys] : sections_) // any a parent did not name
      write_from(name);
    return out_;
  }

private:
  void write_from(const std::string& name) {
    auto at = sections_.find(name);
    if (at == sections_.end() || !written_.insert(name).second)
      return;
    write_table(name, at->second);
    for (const auto* k : at->second)
      if (k->use == key_use::read && k->type == "section")
        write_from(k->path);
  }

  void write_table(const std::string& name,
                   const std::vector<const schema_key*>& keys) {
    out_ += out_.empty() ? "" : "\n";
    out_ += "## " + (name.empty() ? std::string{"Top level"} : name) + "\n\n";
    out_ += "| key | type | default | what it does |\n|---|---|---|---|\n";
    for (const auto* k : keys) {
      auto shown_default =
          k->default_yaml.empty() ? "" : "`" + k->default_yaml + "`";
      out_ += "| `" + cell(k->path) + "` | " + cell(type_of(*k)) + " | " +
              cell(shown_default) + " | " + cell(help_of(k->path)) + " |\n";
    }
  }

  std::map<std::string, std::vector<const schema_key*>> sections_;
  std::set<std::string> written_;
  std::string out_;
};

} // namespace

std::string config_reference_markdown(const config_schema& schema) {
  return writer{schema}.write();
}

} // namespace fedcaf
