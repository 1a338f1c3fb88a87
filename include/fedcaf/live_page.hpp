#pragma once
// The live view's HTML, rendered from a live_snapshot: one fragment (the
// run and how it ended, secure aggregation, compression and DP, each
// client's phase with its download and upload progress and the time it
// spent in each phase this round, the rounds' accuracy and loss and the
// memory drawn as inline SVG). The page at / shows it and replaces it from
// /view every second (its script, /view.js, is the page's only one, so a
// Content-Security-Policy can forbid inline script); once the process is
// gone the page keeps its last fragment and says so. --report-html writes
// the same fragment as a static page without any script. Every text that
// comes from outside (client ids, addresses, reasons) is escaped, and
// nothing is fetched from elsewhere: the pages work offline.
// Thread-safety: pure functions.

#include <string>
#include <string_view>

#include "fedcaf/error.hpp"
#include "fedcaf/live_status.hpp"

namespace fedcaf {

/// Returns `text` with & < > " ' as character references: safe as element
/// text and as a quoted attribute value.
std::string html_escape(std::string_view text);

/// The view of `s`: an HTML fragment (what /view serves).
std::string live_view_html(const live_snapshot& s);

/// The page served at /: `s`'s view, refreshed by live_page_script().
std::string live_page_html(const live_snapshot& s);

/// The live page's script (served at /view.js): fetches /view every
/// second; once that fails, keeps the last view and says the process is
/// gone.
std::string_view live_page_script();

/// The Content-Security-Policy the live pages are served with: scripts
/// from the view itself only, requests to it only, nothing else fetched.
std::string_view live_page_policy();

/// A static, self-contained page of `s` (no script, nothing fetched): what
/// --report-html writes.
std::string static_page_html(const live_snapshot& s);

/// Writes static_page_html(s) to `path` atomically. Returns an error iff
/// it cannot be written.
result<void> write_static_page(const live_snapshot& s, const std::string& path);

} // namespace fedcaf
