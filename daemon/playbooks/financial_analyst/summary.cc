#include "playbooks/financial_analyst/summary.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "playbooks/financial_analyst/text.h"
#include "playbooks/financial_analyst/verifier.h"
#include "playbooks/summary.h"

namespace sandgate::playbooks::financial {
namespace {

// Ratios read as percentages; these are multiples or amounts in the file's own units.
bool IsPlain(absl::string_view metric) {
  return metric == "current_ratio" || metric == "liabilities_to_equity" ||
         metric == "free_cash_flow";
}

// What each artifact is for, by the names a client can show next to the file.
const std::map<std::string, std::string>& Roles() {
  static const auto* const kRoles = new std::map<std::string, std::string>{
      {kMemoFile, "memo"},           {kChartFile, "chart"},       {kMetricsFile, "metrics"},
      {kMovementsFile, "movements"}, {kManifestFile, "manifest"}, {kScriptFile, "program"},
  };
  return *kRoles;
}

}  // namespace

const std::vector<std::string>& KeyMetrics() {
  static const auto* const kKey =
      new std::vector<std::string>{"revenue_growth", "gross_margin",  "operating_margin",
                                   "net_margin",     "current_ratio", "liabilities_to_equity",
                                   "free_cash_flow", "fcf_margin",    "receivables_growth"};
  return *kKey;
}

v1::RunSummary Summarize(absl::string_view input_filename, const std::vector<MetricsRow>& metrics,
                         const std::vector<UnusualMovement>& hits,
                         const std::vector<std::string>& present,
                         const std::vector<Check>& checks) {
  v1::RunSummary s;
  std::string input = Excerpt(input_filename, 80);
  if (metrics.empty()) {
    s.set_headline(absl::StrCat(input, ": the input failed validation; nothing was analysed"));
  } else {
    int64_t latest = metrics.back().year;
    s.set_headline(absl::StrCat(input, ": ", metrics.size(), " years, ", metrics.front().year,
                                " to ", latest, "; key metrics of ", latest));
    for (const std::string& key : KeyMetrics()) {
      *s.add_metrics() =
          SummaryNumber(key, metrics.back().Get(key), IsPlain(key) ? Unit::kPlain : Unit::kPercent);
    }
    size_t in_latest = 0;
    for (const UnusualMovement& m : hits) {
      if (m.year != latest) continue;
      ++in_latest;
      v1::RunSummary::Flag* f = s.add_flags();
      f->set_what(m.item);
      f->set_period(absl::StrCat(m.year));
      f->set_rule(m.rule);
      // Growth rules move by a percentage; the margin and receivables rules by points.
      *f->mutable_size() =
          SummaryNumber("", m.change, m.rule == kRuleYoyMove ? Unit::kPercent : Unit::kPoints);
    }
    AddCount("unusual movements", hits.size(), &s);
    AddCount(absl::StrCat("unusual movements in ", latest), in_latest, &s);
  }
  CountChecks(checks, &s);
  for (const std::string& name : ArtifactNames()) {
    if (std::find(present.begin(), present.end(), name) != present.end()) {
      AddFile(Roles().at(name), name, &s);
    }
  }
  return s;
}

}  // namespace sandgate::playbooks::financial
