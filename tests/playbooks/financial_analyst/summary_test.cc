// The financial analyst's run summary: the daemon's recomputation of the sample, never the
// numbers in the sandbox's files.
#include "playbooks/financial_analyst/summary.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/playbook.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/financial_analyst/verifier.h"
#include "test_util.h"

namespace sandgate::playbooks::financial {
namespace {

using ::testing::ElementsAre;
using testing::GoodArtifacts;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::kSampleName;
using testing::SampleCsv;

std::map<std::string, const v1::RunSummary::Metric*> ByLabel(const v1::RunSummary& s) {
  std::map<std::string, const v1::RunSummary::Metric*> out;
  for (const auto& m : s.metrics()) out[m.label()] = &m;
  return out;
}

std::map<std::string, uint64_t> Counts(const v1::RunSummary& s) {
  std::map<std::string, uint64_t> out;
  for (const auto& c : s.counts()) out[c.label()] = c.value();
  return out;
}

v1::RunSummary SummaryOf(const Artifacts& artifacts) {
  FinancialAnalystPlaybook playbook;
  return playbook.Verify({{kSampleName, SampleCsv()}}, {}, artifacts).summary;
}

TEST(FinancialSummaryTest, HoldsTheVerifiersNumbersForTheSample) {
  std::string csv = SampleCsv();
  v1::RunSummary s = SummaryOf(GoodArtifacts(kSampleName, csv));
  EXPECT_EQ(s.headline(),
            std::string(kSampleName) + ": 6 years, 2020 to 2025; key metrics of 2025");

  // The latest year's metrics, each the daemon's own value in the unit it is shown in.
  ValidationReport report;
  absl::StatusOr<Statements> st = LoadStatements(csv, &report);
  ASSERT_TRUE(st.ok());
  MetricsRow latest = ComputeMetrics(*st).back();
  auto metrics = ByLabel(s);
  ASSERT_EQ(metrics.size(), KeyMetrics().size());
  for (const std::string& key : KeyMetrics()) {
    ASSERT_TRUE(metrics.count(key)) << key;
    ASSERT_TRUE(metrics[key]->has_value()) << key;
    bool plain = metrics[key]->unit().empty();
    EXPECT_DOUBLE_EQ(metrics[key]->value(), *latest.Get(key) * (plain ? 1 : 100)) << key;
  }
  // And by hand from the sample's 2025 and 2024 rows, so that a wrong metric would show.
  EXPECT_NEAR(metrics["revenue_growth"]->value(), 100.0 * (238700 - 209800) / 209800, 1e-9);
  EXPECT_EQ(metrics["revenue_growth"]->unit(), "%");
  EXPECT_NEAR(metrics["gross_margin"]->value(), 100.0 * 164703 / 238700, 1e-9);
  EXPECT_NEAR(metrics["receivables_growth"]->value(), 100.0 * (38900 - 27400) / 27400, 1e-9);
  EXPECT_EQ(metrics["free_cash_flow"]->unit(), "");

  // 2025's unusual movements, as FindUnusualMovements has them.
  std::vector<UnusualMovement> hits = FindUnusualMovements(*st);
  std::vector<std::string> want, got;
  size_t in_latest = 0;
  for (const UnusualMovement& m : hits) {
    if (m.year == 2025) {
      ++in_latest;
      want.push_back(m.item + "/" + m.rule);
    }
  }
  for (const auto& f : s.flags()) {
    EXPECT_EQ(f.period(), "2025");
    got.push_back(f.what() + "/" + f.rule());
  }
  EXPECT_EQ(got, want);
  EXPECT_THAT(got, ::testing::Contains("operating_margin/operating_margin_2pp"));
  for (const auto& f : s.flags()) {
    if (f.rule() != kRuleOperatingMargin) continue;
    EXPECT_EQ(f.size().unit(), "pp");
    EXPECT_NEAR(f.size().value(), 100.0 * (19703.0 / 238700 - 22409.0 / 209800), 1e-9);
  }

  auto counts = Counts(s);
  EXPECT_EQ(counts["unusual movements"], hits.size());
  EXPECT_EQ(counts["unusual movements in 2025"], in_latest);
  EXPECT_EQ(counts["checks failed"], 0u);
  EXPECT_GT(counts["checks passed"], 10u);

  std::vector<std::string> files;
  for (const auto& f : s.files()) files.push_back(f.role() + "=" + f.name());
  EXPECT_THAT(files, ElementsAre("program=analyze_financials.py", "metrics=calculated_metrics.csv",
                                 "movements=unusual_movements.csv", "memo=investment_analysis.md",
                                 "chart=financial_trends.svg", "manifest=analysis_run.json"));
}

TEST(FinancialSummaryTest, ShowsTheDaemonsFiguresNotTheSandboxs) {
  Artifacts artifacts = GoodArtifacts(kSampleName, SampleCsv());
  v1::RunSummary honest = SummaryOf(artifacts);
  // A sandbox that wrote its own numbers and no movements: the checks fail, the summary
  // still shows what the daemon computed.
  artifacts[kMetricsFile] = "year,revenue_growth\n2025,9.99\n";
  artifacts[kMovementsFile] = "year,item,rule\n";
  artifacts.erase(kChartFile);
  v1::RunSummary s = SummaryOf(artifacts);
  ASSERT_EQ(s.metrics_size(), honest.metrics_size());
  for (int i = 0; i < s.metrics_size(); ++i) {
    EXPECT_EQ(s.metrics(i).SerializeAsString(), honest.metrics(i).SerializeAsString());
  }
  EXPECT_EQ(s.flags_size(), honest.flags_size());
  EXPECT_GT(Counts(s)["checks failed"], 0u);
  for (const auto& f : s.files()) EXPECT_NE(f.name(), kChartFile) << "a missing file is not shown";
}

TEST(FinancialSummaryTest, AnInputThatFailsValidationHasCountsButNoFigures) {
  FinancialAnalystPlaybook playbook;
  v1::RunSummary s = playbook.Verify({{"bad.csv", "year,revenue\n2020,x\n"}}, {}, {}).summary;
  EXPECT_THAT(s.headline(), HasSubstr("bad.csv: the input failed validation"));
  EXPECT_THAT(s.metrics(), IsEmpty());
  EXPECT_THAT(s.flags(), IsEmpty());
  EXPECT_GT(Counts(s)["checks failed"], 0u);
  EXPECT_THAT(s.files(), IsEmpty());

  s = playbook.Verify({}, {}, {}).summary;
  EXPECT_EQ(Counts(s)["checks failed"], 1u);
}

}  // namespace
}  // namespace sandgate::playbooks::financial
