// The financial-analyst metrics and unusual-movement rules, exactly as the contract defines
// them (docs/financial-analyst.md, "Metrics" and "Unusual movements"). The verifier
// holds a run's calculated_metrics.csv and unusual_movements.csv to these.
//
//   std::vector<MetricsRow> metrics = ComputeMetrics(statements);
//   std::optional<double> g = metrics.back().Get("revenue_growth");  // nullopt: undefined
//   std::vector<UnusualMovement> hits = FindUnusualMovements(statements);
//
// Thread safe: pure functions over values.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_METRICS_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_METRICS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "playbooks/financial_analyst/statements.h"

namespace sandgate::playbooks::financial {

// The header of calculated_metrics.csv, in order ("year" first).
const std::vector<std::string>& MetricColumns();

// The header of unusual_movements.csv, in order.
const std::vector<std::string>& MovementColumns();

// Rule names, in the contract's order (which is also the order of hits within a year).
inline constexpr char kRuleYoyMove[] = "yoy_move_15pct";
inline constexpr char kRuleOperatingMargin[] = "operating_margin_2pp";
inline constexpr char kRuleReceivablesOutpaceRevenue[] = "receivables_outpace_revenue_10pp";

// The slack every threshold comparison gets, on unrounded values.
inline constexpr double kThresholdSlack = 1e-12;

struct MetricsRow {
  int64_t year = 0;
  // One per MetricColumns() entry after "year", in that order; nullopt when undefined (a
  // denominator that is zero or missing, or no previous year).
  std::vector<std::optional<double>> values;

  // The value of `metric` (a MetricColumns() name other than "year"); nullopt when undefined
  // or not a metric.
  std::optional<double> Get(absl::string_view metric) const;
};

// (x_t - x_p) / abs(x_p); nullopt when either is missing or x_p is zero.
std::optional<double> Growth(std::optional<double> current, std::optional<double> previous);

// One row per year, ascending (statements are already sorted).
std::vector<MetricsRow> ComputeMetrics(const Statements& statements);

struct UnusualMovement {
  int64_t year = 0;
  std::string item;
  std::string rule;
  double previous_value = 0;  // yoy: x_p; margin: margin_p; receivables: revenue_growth
  double current_value = 0;   // yoy: x_t; margin: margin_t; receivables: receivables_growth
  double change = 0;          // what the threshold is compared to
  std::string detail;
};

// The columns the yoy rule looks at: every column but "year" whose non-empty cells are all
// numbers (and which has at least one), in input order.
std::vector<std::string> NumericColumns(const Statements& statements);

// Every hit, ordered by year, then rule (contract order), then item (input column order).
std::vector<UnusualMovement> FindUnusualMovements(const Statements& statements);

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_METRICS_H_
