#include "client/summary.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/terminal_text.h"

namespace sandgate::cli {

std::string FormatMetric(const v1::RunSummary::Metric& m, bool signed_change) {
  if (!m.text().empty()) return TerminalSafe(m.text());
  if (!m.has_value()) return "n/a";
  int decimals = static_cast<int>(std::min<uint32_t>(m.decimals(), 12));
  std::string number = signed_change ? absl::StrFormat("%+.*f", decimals, m.value())
                                     : absl::StrFormat("%.*f", decimals, m.value());
  if (m.unit().empty()) return number;
  // A percent sign sits on its number; a word-like unit ("pp", "x") is set apart.
  return absl::StrCat(number, m.unit() == "%" ? "" : " ", TerminalSafe(m.unit()));
}

std::string RenderSummary(const v1::RunSummary& s, const std::string& dir) {
  if (s.ByteSizeLong() == 0) return "";
  std::string out = "\n";
  if (!s.headline().empty()) absl::StrAppend(&out, TerminalSafe(s.headline()), "\n");
  for (const v1::RunSummary::Metric& m : s.metrics()) {
    absl::StrAppend(&out,
                    absl::StrFormat("  %-22s %s\n", TerminalSafe(m.label()), FormatMetric(m)));
  }
  if (s.flags_size() > 0) absl::StrAppend(&out, "flagged:\n");
  for (const v1::RunSummary::Flag& f : s.flags()) {
    absl::StrAppend(&out, absl::StrFormat("  %-28s %-6s %-34s %s\n", TerminalSafe(f.what()),
                                          TerminalSafe(f.period()), TerminalSafe(f.rule()),
                                          FormatMetric(f.size(), /*signed_change=*/true)));
  }
  std::vector<std::string> counts;
  for (const v1::RunSummary::Count& c : s.counts()) {
    counts.push_back(absl::StrCat(TerminalSafe(c.label()), ": ", c.value()));
  }
  if (!counts.empty()) absl::StrAppend(&out, absl::StrJoin(counts, ", "), "\n");
  if (s.files_size() > 0) absl::StrAppend(&out, "files:\n");
  for (const v1::RunSummary::File& f : s.files()) {
    std::string where = dir.empty() ? f.name() : absl::StrCat(dir, "/", f.name());
    absl::StrAppend(&out,
                    absl::StrFormat("  %-10s %s\n", TerminalSafe(f.role()), TerminalSafe(where)));
  }
  return out;
}

}  // namespace sandgate::cli
