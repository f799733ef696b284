#include "playbooks/financial_analyst/metrics.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace sandgate::playbooks::financial {
namespace {

using Value = std::optional<double>;

// a / b, undefined when either is missing, b is zero, or the result overflows.
Value Div(Value a, Value b) {
  if (!a.has_value() || !b.has_value() || *b == 0) return std::nullopt;
  double r = *a / *b;
  if (!std::isfinite(r)) return std::nullopt;
  return r;
}

Value Minus(Value a, Value b) {
  if (!a.has_value() || !b.has_value()) return std::nullopt;
  return *a - *b;
}

Value Average(Value a, Value b) {
  if (!a.has_value() || !b.has_value()) return std::nullopt;
  return (*a + *b) / 2;
}

// gross_profit when the column has a number in this row, else revenue - cost_of_revenue.
Value GrossProfit(const Statements& st, size_t r) {
  Value reported = st.Get(r, "gross_profit");
  if (reported.has_value()) return reported;
  return Minus(st.Get(r, "revenue"), st.Get(r, "cost_of_revenue"));
}

bool AtLeast(double value, double threshold) { return value >= threshold - kThresholdSlack; }

}  // namespace

const std::vector<std::string>& MetricColumns() {
  static const auto* const kColumns = new std::vector<std::string>{
      "year",
      "revenue_growth",
      "gross_margin",
      "operating_margin",
      "net_margin",
      "current_ratio",
      "quick_ratio",
      "liabilities_to_equity",
      "roa",
      "roe",
      "interest_coverage",
      "free_cash_flow",
      "fcf_margin",
      "cash_conversion",
      "receivables_growth",
      "inventory_growth",
  };
  return *kColumns;
}

const std::vector<std::string>& MovementColumns() {
  static const auto* const kColumns = new std::vector<std::string>{
      "year", "item", "rule", "previous_value", "current_value", "change", "detail"};
  return *kColumns;
}

std::optional<double> MetricsRow::Get(absl::string_view metric) const {
  const std::vector<std::string>& columns = MetricColumns();
  for (size_t i = 1; i < columns.size(); ++i) {
    if (columns[i] == metric) return i - 1 < values.size() ? values[i - 1] : std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> Growth(std::optional<double> current, std::optional<double> previous) {
  if (!previous.has_value()) return std::nullopt;
  return Div(Minus(current, previous), std::fabs(*previous));
}

std::vector<MetricsRow> ComputeMetrics(const Statements& st) {
  std::vector<MetricsRow> out;
  for (size_t r = 0; r < st.rows().size(); ++r) {
    auto get = [&](absl::string_view column) { return st.Get(r, column); };
    // The previous row's value, undefined for the first year.
    auto prev = [&](absl::string_view column) -> Value {
      return r == 0 ? std::nullopt : st.Get(r - 1, column);
    };
    Value revenue = get("revenue");
    Value ocf = get("operating_cash_flow");
    Value capex = get("capital_expenditures");
    Value fcf = capex.has_value() ? Minus(ocf, std::fabs(*capex)) : std::nullopt;
    MetricsRow row;
    row.year = st.rows()[r].year;
    row.values = {
        Growth(revenue, prev("revenue")),
        Div(GrossProfit(st, r), revenue),
        Div(get("operating_income"), revenue),
        Div(get("net_income"), revenue),
        Div(get("total_current_assets"), get("total_current_liabilities")),
        Div(Minus(get("total_current_assets"), get("inventory")), get("total_current_liabilities")),
        Div(get("total_liabilities"), get("shareholders_equity")),
        Div(get("net_income"), Average(get("total_assets"), prev("total_assets"))),
        Div(get("net_income"), Average(get("shareholders_equity"), prev("shareholders_equity"))),
        Div(get("operating_income"), get("interest_expense")),
        fcf,
        Div(fcf, revenue),
        Div(ocf, get("net_income")),
        Growth(get("accounts_receivable"), prev("accounts_receivable")),
        Growth(get("inventory"), prev("inventory")),
    };
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::string> NumericColumns(const Statements& st) {
  std::vector<std::string> out;
  for (size_t c = 0; c < st.columns().size(); ++c) {
    const std::string& name = st.columns()[c];
    if (name == "year" || st.ColumnIndex(name) != static_cast<int>(c)) continue;
    bool any_number = false;
    bool all_numbers = true;
    for (const StatementRow& row : st.rows()) {
      if (row.Value(c).has_value()) {
        any_number = true;
      } else if (row.Raw(c).find_first_not_of(" \t") != absl::string_view::npos) {
        all_numbers = false;
      }
    }
    if (any_number && all_numbers) out.push_back(name);
  }
  return out;
}

std::vector<UnusualMovement> FindUnusualMovements(const Statements& st) {
  std::vector<UnusualMovement> hits;
  std::vector<std::string> numeric = NumericColumns(st);
  std::vector<MetricsRow> metrics = ComputeMetrics(st);
  for (size_t r = 1; r < st.rows().size(); ++r) {
    int64_t year = st.rows()[r].year;
    int64_t prev_year = st.rows()[r - 1].year;
    for (const std::string& item : numeric) {
      Value p = st.Get(r - 1, item);
      Value t = st.Get(r, item);
      Value g = Growth(t, p);
      if (!g.has_value() || !AtLeast(std::fabs(*g), 0.15)) continue;
      hits.push_back(
          {year, item, kRuleYoyMove, *p, *t, *g,
           absl::StrFormat("%s moved %+.1f%% from %d to %d", item, *g * 100, prev_year, year)});
    }
    Value mp = metrics[r - 1].Get("operating_margin");
    Value mt = metrics[r].Get("operating_margin");
    if (mp.has_value() && mt.has_value() && AtLeast(std::fabs(*mt - *mp), 0.02)) {
      hits.push_back({year, "operating_margin", kRuleOperatingMargin, *mp, *mt, *mt - *mp,
                      absl::StrFormat("operating margin moved %+.1f pp from %d to %d",
                                      (*mt - *mp) * 100, prev_year, year)});
    }
    Value rev = metrics[r].Get("revenue_growth");
    Value rec = metrics[r].Get("receivables_growth");
    if (rev.has_value() && rec.has_value() && AtLeast(*rec - *rev, 0.10)) {
      hits.push_back({year, "accounts_receivable", kRuleReceivablesOutpaceRevenue, *rev, *rec,
                      *rec - *rev,
                      absl::StrFormat("receivables grew %.1f%% against revenue %.1f%% in %d",
                                      *rec * 100, *rev * 100, year)});
    }
  }
  return hits;
}

}  // namespace sandgate::playbooks::financial
