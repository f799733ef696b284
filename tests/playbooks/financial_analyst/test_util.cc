#include "test_util.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/financial_analyst/verifier.h"

namespace sandgate::playbooks::financial::testing {

std::string ReadSourceFile(const std::string& path) {
  std::ifstream in(absl::StrCat(SANDGATE_SOURCE_DIR, "/", path), std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string SampleCsv() { return ReadSourceFile(absl::StrCat("tests/data/", kSampleName)); }

namespace {

std::string Cell(const std::optional<double>& v) {
  return v.has_value() ? absl::StrFormat("%.17g", *v) : "";
}

}  // namespace

Artifacts GoodArtifacts(const std::string& input_name, const std::string& csv) {
  ValidationReport report;
  absl::StatusOr<Statements> st = LoadStatements(csv, &report);
  EXPECT_TRUE(st.ok()) << st.status();
  Artifacts a;
  a[kScriptFile] = "print('analysis')\n";

  std::string metrics = absl::StrCat(absl::StrJoin(MetricColumns(), ","), "\n");
  for (const MetricsRow& row : ComputeMetrics(*st)) {
    std::vector<std::string> cells = {absl::StrCat(row.year)};
    for (const auto& v : row.values) cells.push_back(Cell(v));
    absl::StrAppend(&metrics, absl::StrJoin(cells, ","), "\n");
  }
  a[kMetricsFile] = metrics;

  std::string hits = absl::StrCat(absl::StrJoin(MovementColumns(), ","), "\n");
  for (const UnusualMovement& m : FindUnusualMovements(*st)) {
    absl::StrAppend(&hits, m.year, ",", m.item, ",", m.rule, ",", Cell(m.previous_value), ",",
                    Cell(m.current_value), ",", Cell(m.change), ",\"", m.detail, "\"\n");
  }
  a[kMovementsFile] = hits;

  std::string memo = absl::StrCat("# Analysis of ", input_name, "\n");
  for (const std::string& h : MemoHeadings()) {
    absl::StrAppend(&memo, "\n## ", h, "\n\n- **Fact:** see ", input_name, ".\n");
  }
  a[kMemoFile] = memo;

  std::string svg =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" "
      "width=\"800\" height=\"600\">\n<title>Trends</title>\n"
      "<defs><linearGradient id=\"g1\"/></defs>\n";
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&svg, "<g class=\"panel\" transform=\"translate(", (i % 2) * 400, ",",
                    (i / 2) * 300, ")\">\n  <text class=\"panel-title\" x=\"10\" y=\"20\">Panel ",
                    i + 1,
                    "</text>\n  <rect width=\"380\" height=\"260\" fill=\"url(#g1)\"/>\n"
                    "  <text x=\"190\" y=\"290\">Fiscal year</text>\n</g>\n");
  }
  absl::StrAppend(&svg, "</svg>\n");
  a[kChartFile] = svg;

  nlohmann::json manifest = {
      {"input_filename", input_name},
      {"row_count", report.row_count},
      {"year_range", {report.year_range->first, report.year_range->second}},
      {"validation_results", report.ToJson()},
      {"generated_filenames", ArtifactNames()},
      {"execution_directory", "/workspace"},
  };
  a[kManifestFile] = manifest.dump(2);
  return a;
}

std::vector<std::string> FailedChecks(const std::vector<Check>& checks) {
  std::vector<std::string> failed;
  for (const Check& c : checks) {
    if (!c.passed) failed.push_back(c.name);
  }
  return failed;
}

Check FindCheck(const std::vector<Check>& checks, const std::string& name) {
  for (const Check& c : checks) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no check named " << name;
  return Check();
}

}  // namespace sandgate::playbooks::financial::testing
