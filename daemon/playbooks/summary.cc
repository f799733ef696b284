#include "playbooks/summary.h"

#include <utility>

namespace sandgate::playbooks {

v1::RunSummary::Metric SummaryNumber(std::string label, std::optional<double> value, Unit unit) {
  v1::RunSummary::Metric m;
  m.set_label(std::move(label));
  switch (unit) {
    case Unit::kPlain:
      m.set_decimals(2);
      break;
    case Unit::kPercent:
      m.set_unit("%");
      m.set_decimals(1);
      break;
    case Unit::kPoints:
      m.set_unit("pp");
      m.set_decimals(1);
      break;
  }
  if (value.has_value()) m.set_value(unit == Unit::kPlain ? *value : *value * 100);
  return m;
}

v1::RunSummary::Metric SummaryText(std::string label, std::string text) {
  v1::RunSummary::Metric m;
  m.set_label(std::move(label));
  m.set_text(std::move(text));
  return m;
}

void AddCount(std::string label, uint64_t value, v1::RunSummary* summary) {
  v1::RunSummary::Count* c = summary->add_counts();
  c->set_label(std::move(label));
  c->set_value(value);
}

void CountChecks(const std::vector<Check>& checks, v1::RunSummary* summary) {
  uint64_t passed = 0;
  for (const Check& c : checks) passed += c.passed ? 1 : 0;
  AddCount("checks passed", passed, summary);
  AddCount("checks failed", checks.size() - passed, summary);
}

void AddFile(std::string role, std::string name, v1::RunSummary* summary) {
  v1::RunSummary::File* f = summary->add_files();
  f->set_role(std::move(role));
  f->set_name(std::move(name));
}

}  // namespace sandgate::playbooks
