#include "playbooks/financial_analyst/verifier.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/statements.h"
#include "test_util.h"

namespace sandgate::playbooks::financial {
namespace {

using ::testing::ElementsAre;
using testing::FailedChecks;
using testing::FindCheck;
using testing::GoodArtifacts;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::kSampleName;
using testing::SampleCsv;

class VerifierTest : public ::testing::Test {
 protected:
  std::vector<Check> Run() { return Verify(kSampleName, csv_, artifacts_); }
  // Replaces the one occurrence of `from` in artifact `name`.
  void Replace(const std::string& name, const std::string& from, const std::string& to) {
    std::string& text = artifacts_[name];
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << name;
    text.replace(at, from.size(), to);
  }

  // Runs the verifier and expects exactly `check` to fail, with `detail` in its detail.
  void ExpectOnlyFailure(const std::string& check, const std::string& detail) {
    std::vector<Check> checks = Run();
    EXPECT_THAT(FailedChecks(checks), ElementsAre(check));
    EXPECT_THAT(FindCheck(checks, check).detail, HasSubstr(detail));
  }

  std::string csv_ = SampleCsv();
  Artifacts artifacts_ = GoodArtifacts(kSampleName, csv_);
};

TEST_F(VerifierTest, GoodArtifactsPassEveryCheck) {
  std::vector<Check> checks = Run();
  EXPECT_THAT(FailedChecks(checks), IsEmpty());
  std::vector<std::string> names;
  for (const Check& c : checks) names.push_back(c.name);
  EXPECT_THAT(
      names, ElementsAre("input.valid", "artifact.analyze_financials.py",
                         "artifact.calculated_metrics.csv", "artifact.unusual_movements.csv",
                         "artifact.investment_analysis.md", "artifact.financial_trends.svg",
                         "artifact.analysis_run.json", "analysis_run.parses", "analysis_run.keys",
                         "analysis_run.input_filename", "analysis_run.row_count",
                         "analysis_run.year_range", "analysis_run.validation_matches",
                         "analysis_run.generated_filenames", "calculated_metrics.columns",
                         "calculated_metrics.rows", "calculated_metrics.values",
                         "unusual_movements.columns", "unusual_movements.hits", "memo.headings",
                         "memo.cites_input", "chart.well_formed", "chart.panels", "chart.no_script",
                         "chart.no_external_refs"));
}

TEST_F(VerifierTest, MetricOffBy1e3) {
  // 2023 operating margin is 13120 / 181600 = 0.0722466960352423.
  std::string good = absl::StrFormat("%.17g", 13120 / 181600.0);
  Replace(kMetricsFile, good, absl::StrFormat("%.17g", 13120 / 181600.0 + 1e-3));
  std::vector<Check> checks = Run();
  EXPECT_THAT(FailedChecks(checks), ElementsAre("calculated_metrics.values"));
  std::string detail = FindCheck(checks, "calculated_metrics.values").detail;
  EXPECT_THAT(detail, HasSubstr("2023 operating_margin"));
  EXPECT_THAT(detail, HasSubstr("0.07224669604"));
  EXPECT_THAT(detail, HasSubstr("found 0.0732466960352"));
}

TEST_F(VerifierTest, SixSignificantDigitsPassFourDecimalsDoNot) {
  auto reformat = [&](std::string (*format)(double)) {
    ValidationReport report;
    Statements st = *LoadStatements(csv_, &report);
    std::string metrics =
        "year,revenue_growth,gross_margin,operating_margin,net_margin,"
        "current_ratio,quick_ratio,liabilities_to_equity,roa,roe,"
        "interest_coverage,free_cash_flow,fcf_margin,cash_conversion,"
        "receivables_growth,inventory_growth\r\n";
    for (const MetricsRow& row : ComputeMetrics(st)) {
      absl::StrAppend(&metrics, row.year);
      for (const auto& v : row.values) {
        absl::StrAppend(&metrics, ",", v ? format(*v) : "");
      }
      absl::StrAppend(&metrics, "\r\n");
    }
    artifacts_[kMetricsFile] = metrics;
    return Run();
  };
  EXPECT_THAT(FailedChecks(reformat([](double v) { return absl::StrFormat("%.6g", v); })),
              IsEmpty());
  EXPECT_THAT(FailedChecks(reformat([](double v) { return absl::StrFormat("%.5e", v); })),
              IsEmpty());
  std::vector<Check> checks = reformat([](double v) { return absl::StrFormat("%.4f", v); });
  EXPECT_THAT(FailedChecks(checks), ElementsAre("calculated_metrics.values"));
}

TEST_F(VerifierTest, EmptyAndDefinedCellsMustAgree) {
  // 2020's revenue_growth is undefined: the row starts "2020,," -- give it a value.
  Replace(kMetricsFile, "\n2020,,", "\n2020,0,");
  ExpectOnlyFailure("calculated_metrics.values", "2020 revenue_growth: expected empty, found 0");

  artifacts_ = GoodArtifacts(kSampleName, csv_);
  Replace(kMetricsFile, absl::StrFormat(",%.17g,", 9800 - 7200.0), ",,");
  ExpectOnlyFailure("calculated_metrics.values", "2020 free_cash_flow: expected 2600, found empty");

  artifacts_ = GoodArtifacts(kSampleName, csv_);
  Replace(kMetricsFile, "\n2020,,", "\n2020,NaN,");
  ExpectOnlyFailure("calculated_metrics.values", "not a number");
}

TEST_F(VerifierTest, WrongHeaderOrder) {
  Replace(kMetricsFile, "year,revenue_growth,gross_margin", "year,gross_margin,revenue_growth");
  // Swap the data columns too, so only the order is wrong.
  std::string& text = artifacts_[kMetricsFile];
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    if (cells.size() > 2) std::swap(cells[1], cells[2]);
    lines[i] = absl::StrJoin(cells, ",");
  }
  text = absl::StrJoin(lines, "\n");
  ExpectOnlyFailure("calculated_metrics.columns", "wrong order");
}

TEST_F(VerifierTest, RowsMustBeOnePerYearAscending) {
  std::string& text = artifacts_[kMetricsFile];
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  std::swap(lines[1], lines[2]);
  text = absl::StrJoin(lines, "\n");
  ExpectOnlyFailure("calculated_metrics.rows", "years are [2021, 2020, 2022");
}

TEST_F(VerifierTest, MissingHit) {
  std::string& text = artifacts_[kMovementsFile];
  size_t at = text.find("2025,accounts_receivable,receivables_outpace_revenue_10pp");
  ASSERT_NE(at, std::string::npos);
  text.erase(at, text.find('\n', at) - at + 1);
  ExpectOnlyFailure("unusual_movements.hits",
                    "missing hits: 2025/accounts_receivable/receivables_outpace_revenue_10pp");
}

TEST_F(VerifierTest, ExtraHit) {
  artifacts_[kMovementsFile] += "2021,made_up_item,yoy_move_15pct,1,2,1,made up\n";
  ExpectOnlyFailure("unusual_movements.hits", "unexpected hits: 2021/made_up_item/yoy_move_15pct");
}

TEST_F(VerifierTest, MissingHeading) {
  Replace(kMemoFile, "## Bear case\n", "## Bearish case\n");
  ExpectOnlyFailure("memo.headings", "missing headings: Bear case");
}

TEST_F(VerifierTest, HeadingsOutOfOrderAndTolerantSpelling) {
  Replace(kMemoFile, "## Bull case\n", "## 7. **Bull Case** ##\n");
  EXPECT_THAT(FailedChecks(Run()), IsEmpty());
  artifacts_[kMemoFile] += "\n## Executive view\n";  // a repeat later does not hurt
  EXPECT_THAT(FailedChecks(Run()), IsEmpty());
  Replace(kMemoFile, "## Conclusion\n", "## Diligence notes\n");
  Replace(kMemoFile, "## KPI table\n", "## Conclusion\n## KPI table\n");
  ExpectOnlyFailure("memo.headings", "out of order: Conclusion");
}

TEST_F(VerifierTest, MemoMustNameTheInput) {
  artifacts_[kMemoFile] = absl::StrReplaceAll(artifacts_[kMemoFile], {{kSampleName, "the file"}});
  EXPECT_THAT(FailedChecks(Run()), ElementsAre("memo.cites_input"));
}

TEST_F(VerifierTest, ScriptInChart) {
  Replace(kChartFile, "</svg>", "<script>fetch('x')</script></svg>");
  ExpectOnlyFailure("chart.no_script", "<script>");
}

TEST_F(VerifierTest, ExternalHrefInChart) {
  Replace(kChartFile, "</svg>", "<use xlink:href=\"https://evil.example/x.svg#a\"/></svg>");
  ExpectOnlyFailure("chart.no_external_refs", "https://evil.example/x.svg#a");
}

TEST_F(VerifierTest, MalformedChart) {
  Replace(kChartFile, "</svg>", "</g>");
  ExpectOnlyFailure("chart.well_formed", "mismatched tag");
}

TEST_F(VerifierTest, TooFewPanels) {
  // Drop the last panel.
  std::string& svg = artifacts_[kChartFile];
  size_t last = svg.rfind("<g class=\"panel\"");
  svg.erase(last, svg.find("</svg>") - last);
  ExpectOnlyFailure("chart.panels", "found 3");
}

TEST_F(VerifierTest, MissingArtifact) {
  artifacts_.erase(kMovementsFile);
  ExpectOnlyFailure("artifact.unusual_movements.csv", "missing");
  artifacts_[kMovementsFile] = "";
  EXPECT_THAT(
      FindCheck(Verify(kSampleName, csv_, artifacts_), "artifact.unusual_movements.csv").detail,
      HasSubstr("empty"));
}

TEST_F(VerifierTest, ManifestMismatches) {
  nlohmann::json m = nlohmann::json::parse(artifacts_[kManifestFile]);
  m["validation_results"]["years_ordered"] = false;
  m["row_count"] = 5;
  m["year_range"] = {2020, 2024};
  m["input_filename"] = "other.csv";
  m["generated_filenames"] = {"calculated_metrics.csv"};
  artifacts_[kManifestFile] = m.dump();
  std::vector<Check> checks = Run();
  EXPECT_THAT(FailedChecks(checks),
              ElementsAre("analysis_run.input_filename", "analysis_run.row_count",
                          "analysis_run.year_range", "analysis_run.validation_matches",
                          "analysis_run.generated_filenames"));
  EXPECT_THAT(FindCheck(checks, "analysis_run.validation_matches").detail,
              HasSubstr("years_ordered: manifest has false, the daemon found true"));

  m = nlohmann::json::parse(GoodArtifacts(kSampleName, csv_)[kManifestFile]);
  m.erase("execution_directory");
  m["validation_results"].erase("bad_cells");
  artifacts_[kManifestFile] = m.dump();
  checks = Run();
  EXPECT_THAT(FailedChecks(checks),
              ElementsAre("analysis_run.keys", "analysis_run.validation_matches"));
  EXPECT_THAT(FindCheck(checks, "analysis_run.keys").detail,
              HasSubstr("missing key execution_directory; validation_results lacks bad_cells"));

  artifacts_[kManifestFile] = "{\"input_filename\": ";
  EXPECT_THAT(FailedChecks(Run()), ElementsAre("analysis_run.parses"));
  artifacts_[kManifestFile] = "[1, 2]";
  EXPECT_THAT(FailedChecks(Run()), ElementsAre("analysis_run.parses"));
}

TEST_F(VerifierTest, FatalInputFailsAndNamesTheProblem) {
  std::string csv = absl::StrReplaceAll(csv_, {{",capital_expenditures\n", ",capex\n"}});
  ValidationReport report;
  ASSERT_FALSE(LoadStatements(csv, &report).ok());
  // What a program that did its job writes for a fatal input: the manifest only.
  nlohmann::json manifest = {{"input_filename", kSampleName},
                             {"row_count", 6},
                             {"year_range", {2020, 2025}},
                             {"validation_results", report.ToJson()},
                             {"generated_filenames", {"analysis_run.json"}},
                             {"execution_directory", "/w"}};
  std::vector<Check> checks = Verify(kSampleName, csv, {{kManifestFile, manifest.dump()}});
  Check input = FindCheck(checks, "input.valid");
  EXPECT_FALSE(input.passed);
  EXPECT_THAT(input.detail, HasSubstr("missing required column(s): capital_expenditures"));
  EXPECT_TRUE(FindCheck(checks, "analysis_run.validation_matches").passed);
  for (const Check& c : checks) {
    EXPECT_FALSE(absl::StartsWith(c.name, "calculated_metrics.")) << c.name;
  }
  // A manifest claiming the input was fine does not match.
  nlohmann::json good = nlohmann::json::parse(GoodArtifacts(kSampleName, csv_)[kManifestFile]);
  checks = Verify(kSampleName, csv, {{kManifestFile, good.dump()}});
  EXPECT_THAT(FindCheck(checks, "analysis_run.validation_matches").detail,
              HasSubstr("required_columns_present: manifest has true"));
}

TEST_F(VerifierTest, ManyBadCellsStillMatchAFullList) {
  std::string csv =
      "year,revenue,cost_of_revenue,operating_income,interest_expense,net_income,"
      "accounts_receivable,inventory,total_current_assets,total_assets,"
      "total_current_liabilities,total_liabilities,shareholders_equity,"
      "operating_cash_flow,capital_expenditures\n";
  nlohmann::json bad = nlohmann::json::array();
  for (int year = 1; year <= 1200; ++year) {
    absl::StrAppend(&csv, year, ",x,400,200,20,100,100,50,500,2000,250,1200,800,150,60\n");
    bad.push_back({{"row", year}, {"column", "revenue"}, {"value", "x"}});
  }
  ValidationReport report;
  ASSERT_FALSE(LoadStatements(csv, &report).ok());
  nlohmann::json results = report.ToJson();
  results["bad_cells"] = bad;
  nlohmann::json manifest = {{"input_filename", "many.csv"}, {"row_count", 1200},
                             {"year_range", {1, 1200}},      {"validation_results", results},
                             {"generated_filenames", {}},    {"execution_directory", "/w"}};
  std::vector<Check> checks = Verify("many.csv", csv, {{kManifestFile, manifest.dump()}});
  EXPECT_TRUE(FindCheck(checks, "analysis_run.validation_matches").passed);
  bad.erase(bad.size() - 1);
  results["bad_cells"] = bad;
  manifest["validation_results"] = results;
  checks = Verify("many.csv", csv, {{kManifestFile, manifest.dump()}});
  EXPECT_FALSE(FindCheck(checks, "analysis_run.validation_matches").passed);
}

TEST_F(VerifierTest, GarbageArtifactsNeverCrash) {
  const Artifacts good = artifacts_;
  std::mt19937 rng(20261129);
  std::vector<std::string> specials = {
      std::string(100000, '['),
      std::string(100000, '{'),
      "\xFF\xFE\x00garbage",
      "\"",
      "year\n\"unterminated",
      std::string(1 << 16, ','),
      "{\"validation_results\": 5}",
      "{\"row_count\": \"x\", \"year_range\": [1], \"validation_results\": {\"bad_cells\": "
      "[5, {\"row\": \"a\"}]}, \"generated_filenames\": [1]}",
      "<svg><!DOCTYPE x></svg>",
      "<?xml version=\"1.0\" encoding=\"x-unknown\"?><svg/>"};
  for (int iteration = 0; iteration < 300; ++iteration) {
    artifacts_ = good;
    for (const std::string& name : ArtifactNames()) {
      std::string& text = artifacts_[name];
      switch (rng() % 4) {
        case 0:
          text.resize(rng() % (text.size() + 1));  // truncated
          break;
        case 1:
          for (int k = 0; k < 20 && !text.empty(); ++k) text[rng() % text.size()] = char(rng());
          break;
        case 2:
          text = specials[rng() % specials.size()];
          break;
        default:
          break;
      }
    }
    std::vector<Check> checks = Run();
    EXPECT_GE(checks.size(), 7u);
    for (const Check& c : checks) EXPECT_FALSE(c.name.empty());
  }
}

}  // namespace
}  // namespace sandgate::playbooks::financial
