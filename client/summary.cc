#include "client/summary.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "client/terminal_text.h"
#include "nlohmann/json.hpp"

namespace sandgate::cli {
namespace {

std::vector<std::string> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else if (c != '\r') {
      cells.back() += c;
    }
  }
  return cells;
}

std::vector<std::vector<std::string>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(SplitCsvLine(line));
  }
  return rows;
}

}  // namespace

void PrintFinancialSummary(FILE* out, const std::string& dir) {
  auto metrics = ReadCsv(dir + "/calculated_metrics.csv");
  if (metrics.size() >= 2) {
    const auto& header = metrics[0];
    const auto& last = metrics.back();
    std::fprintf(out, "\nlatest year %s\n", TerminalSafe(last[0]).c_str());
    static const char* kKey[] = {"revenue_growth", "gross_margin",  "operating_margin",
                                 "net_margin",     "current_ratio", "liabilities_to_equity",
                                 "free_cash_flow", "fcf_margin",    "receivables_growth"};
    for (const char* key : kKey) {
      for (size_t i = 0; i < header.size() && i < last.size(); ++i) {
        if (header[i] != key) continue;
        double v;
        std::string shown = last[i].empty() ? "n/a" : last[i];
        bool ratio = std::string(key) != "free_cash_flow" && std::string(key) != "current_ratio" &&
                     std::string(key) != "liabilities_to_equity";
        if (!last[i].empty() && absl::SimpleAtod(last[i], &v)) {
          shown = ratio ? absl::StrFormat("%.1f%%", v * 100) : absl::StrFormat("%.2f", v);
        }
        std::fprintf(out, "  %-22s %s\n", key, TerminalSafe(shown).c_str());
      }
    }
  }
  auto flags = ReadCsv(dir + "/unusual_movements.csv");
  if (flags.size() >= 2 && metrics.size() >= 2) {
    const std::string& latest = metrics.back()[0];
    size_t in_latest = 0;
    for (size_t r = 1; r < flags.size(); ++r) in_latest += flags[r][0] == latest ? 1 : 0;
    std::fprintf(out, "\nunusual movements: %zu in all, %zu in %s\n", flags.size() - 1, in_latest,
                 TerminalSafe(latest).c_str());
    for (size_t r = 1; r < flags.size(); ++r) {
      const auto& f = flags[r];
      double change;
      if (f.size() < 6 || f[0] != latest) continue;
      // Growth rules move by a percentage; the margin and receivables rules by points.
      bool points = f[2] != "yoy_move_15pct";
      std::string shown = f[5];
      if (absl::SimpleAtod(f[5], &change)) {
        shown = points ? absl::StrFormat("%+.1f pp", change * 100)
                       : absl::StrFormat("%+.1f%%", change * 100);
      }
      std::fprintf(out, "  %-28s %-34s %s\n", TerminalSafe(f[1]).c_str(), TerminalSafe(f[2]).c_str(),
                   TerminalSafe(shown).c_str());
    }
  }
}

void PrintProbeSummary(FILE* out, const std::string& dir) {
  std::ifstream in(dir + "/checks.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!doc.is_object() || !doc.contains("facts")) return;
  const auto& f = doc["facts"];
  // checks.json is written inside the sandbox: every value is shown escaped.
  auto str = [](const nlohmann::json& v) {
    return TerminalSafe(v.is_string() ? v.get<std::string>() : v.dump());
  };
  std::fprintf(out, "\nsandbox: %s, kernel %s, python %s, node %s, cwd %s, uid %s\n", str(f["os"]).c_str(),
               str(f["kernel"]).c_str(), str(f["python"]).c_str(),
               f["node"].is_string() ? str(f["node"]).c_str() : "not available", str(f["cwd"]).c_str(),
               str(f["uid"]).c_str());
  if (doc.contains("network") && doc["network"].is_object()) {
    const auto& n = doc["network"];
    std::fprintf(out, "network (%s): %s exit %s: %s\n",
                 str(doc.value("expected_network", nlohmann::json("?"))).c_str(),
                 str(n.value("tool", nlohmann::json("?"))).c_str(),
                 str(n.value("exit_code", nlohmann::json())).c_str(),
                 str(n.value("message", nlohmann::json(""))).c_str());
  }
  if (doc.contains("checks") && doc["checks"].is_array()) {
    for (const auto& c : doc["checks"]) {
      if (!c.is_object()) continue;
      std::fprintf(out, "  %s %-16s %s\n", c.value("ok", false) ? "ok  " : "FAIL",
                   str(c.value("name", nlohmann::json(""))).c_str(),
                   str(c.value("detail", nlohmann::json(""))).c_str());
    }
  }
}

}  // namespace sandgate::cli
