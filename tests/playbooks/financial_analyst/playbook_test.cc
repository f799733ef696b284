#include "playbooks/financial_analyst/playbook.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/reference_files.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/financial_analyst/verifier.h"
#include "playbooks/playbook.h"
#include "test_util.h"

namespace sandgate::playbooks {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace fin = financial;

// A header of the required columns and rows of ones: the least input the playbook takes.
std::string Csv(const std::vector<std::string>& years = {"2020"}) {
  std::string csv = absl::StrCat(absl::StrJoin(fin::RequiredColumns(), ","), "\n");
  for (const std::string& year : years) {
    absl::StrAppend(&csv, year);
    for (size_t i = 1; i < fin::RequiredColumns().size(); ++i) absl::StrAppend(&csv, ",1");
    absl::StrAppend(&csv, "\n");
  }
  return csv;
}
const std::string kCsv = Csv();

absl::Status Validate(const std::vector<InputFile>& inputs) {
  return FinancialAnalystPlaybook().ValidateInputs(inputs);
}

TEST(FinancialAnalystPlaybookTest, NameAndArtifacts) {
  FinancialAnalystPlaybook p;
  EXPECT_EQ(p.name(), "financial-analyst");
  EXPECT_THAT(p.ExpectedArtifacts(), ElementsAre("analyze_financials.py", "calculated_metrics.csv",
                                                 "unusual_movements.csv", "investment_analysis.md",
                                                 "financial_trends.svg", "analysis_run.json"));
}

TEST(FinancialAnalystPlaybookTest, AcceptsOnePlainCsv) {
  EXPECT_TRUE(Validate({{"statements.csv", kCsv}}).ok());
  EXPECT_TRUE(Validate({{"Q4 Results.CSV", kCsv}}).ok());
  EXPECT_TRUE(Validate({{"données.csv", kCsv}}).ok());
}

TEST(FinancialAnalystPlaybookTest, RejectsBadInputsNamingFileAndProblem) {
  struct Case {
    std::vector<InputFile> inputs;
    std::string message;
  };
  std::vector<Case> cases = {
      {{}, "exactly one CSV file, got 0"},
      {{{"a.csv", kCsv}, {"b.csv", kCsv}}, "exactly one CSV file, got 2"},
      {{{"", kCsv}}, "file name is empty"},
      {{{"dir/a.csv", kCsv}}, "\"dir/a.csv\": the name must be a plain file name"},
      {{{".hidden.csv", kCsv}}, "\".hidden.csv\": the name must not start with '.'"},
      {{{"-x.csv", kCsv}}, "must not start with '-'"},
      {{{"a.txt", kCsv}}, "\"a.txt\": the name must end in .csv"},
      {{{".csv", kCsv}}, "must not start with '.'"},
      {{{std::string(252, 'a') + ".csv", kCsv}}, "256 bytes, more than 255"},
      {{{"a\nb.csv", kCsv}}, "control character"},
      {{{"\xC3(.csv", kCsv}}, "the name is not valid UTF-8"},
      {{{"a.csv", ""}}, "\"a.csv\": the file is empty"},
      {{{"a.csv", "year\n\xFF\xFE\n"}}, "\"a.csv\": the file is not valid UTF-8"},
      {{{"a.csv", "\xED\xA0\x80"}}, "not valid UTF-8"},  // a surrogate
      {{{"a.csv", std::string((64u << 20) + 1, 'x')}}, "more than the limit"},
  };
  for (const Case& c : cases) {
    absl::Status s = Validate(c.inputs);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
  // Blank lines are not records: a valid file padded to exactly the limit is taken.
  EXPECT_TRUE(Validate({{"a.csv", kCsv + std::string((64u << 20) - kCsv.size(), '\n')}}).ok());
}

// An input the verifier would fail whatever the agent did is refused before any sandbox or
// model call, naming the column, the row and value, or the year.
TEST(FinancialAnalystPlaybookTest, RejectsFatalInputsNamingTheProblem) {
  std::string no_revenue = kCsv;
  no_revenue.replace(no_revenue.find("revenue,"), 8, "sales,");
  std::string text_cell = kCsv;
  text_cell.replace(text_cell.rfind(",1\n"), 3, ",n/a\n");
  struct Case {
    std::string csv;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {no_revenue, "missing required column(s): revenue"},
           {text_cell,
            "data row 1 (CSV line 2), column capital_expenditures: not a finite number \"n/a\""},
           {Csv({"2021", "2021"}), "duplicate year 2021"},
           {absl::StrJoin(fin::RequiredColumns(), ",") + "\n", "no data rows"},
       }) {
    absl::Status s = Validate({{"a.csv", c.csv}});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr("\"a.csv\": "));
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

// Past kMaxDataRows the metrics file could not be promised under the artifact cap: refused
// before any sandbox exists, naming the limit and the line (blank lines and the header do not
// count).
TEST(FinancialAnalystPlaybookTest, RejectsMoreRowsThanTheLimit) {
  std::vector<std::string> years;
  for (size_t i = 0; i < fin::kMaxDataRows; ++i) years.push_back(absl::StrCat(i));
  std::string csv = Csv(years);
  csv.insert(csv.find('\n') + 1, "\n");
  EXPECT_TRUE(Validate({{"a.csv", csv}}).ok());
  absl::StrAppend(&csv, "\n", "x,1\n");
  absl::Status s = Validate({{"a.csv", csv}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("more than 100000 data rows (CSV line 100004): the "
                                     "financial-analyst playbook's row limit"));
}

TEST(FinancialAnalystPlaybookTest, ReferencePlanPlacesEmbeddedProgramsAndRunsThem) {
  ReferencePlan plan = FinancialAnalystPlaybook().Reference({{"in.csv", kCsv}}, "/workspace", {});
  ASSERT_EQ(plan.files.size(), 2u);
  EXPECT_EQ(plan.files[0].path, "analyze_financials.py");
  EXPECT_EQ(plan.files[1].path, "recompute_metrics.py");
  EXPECT_TRUE(financial::kAnalyzeFinancialsEmbedded);
  EXPECT_TRUE(financial::kRecomputeMetricsEmbedded);
  // The embedded bytes are the source tree's, byte for byte (the build regenerates them).
  EXPECT_EQ(plan.files[0].content,
            financial::testing::ReadSourceFile(
                "daemon/playbooks/financial_analyst/reference/analyze_financials.py"));
  EXPECT_EQ(plan.files[1].content,
            financial::testing::ReadSourceFile(
                "daemon/playbooks/financial_analyst/reference/recompute_metrics.py"));
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].name, "analyze");
  EXPECT_THAT(plan.steps[0].argv,
              ElementsAre("python3", "analyze_financials.py", "in.csv", "--out-dir", "."));
  EXPECT_EQ(plan.steps[1].name, "recompute");
  EXPECT_THAT(plan.steps[1].argv, ElementsAre("python3", "recompute_metrics.py", "in.csv"));
}

TEST(FinancialAnalystPlaybookTest, InstructionsCarryTheContract) {
  std::string text = FinancialAnalystPlaybook().Instructions({{"acme.csv", kCsv}}, "/work/dir", {});
  EXPECT_THAT(text, HasSubstr("/work/dir"));
  EXPECT_THAT(text, HasSubstr("acme.csv"));
  EXPECT_THAT(text, testing::Not(HasSubstr("{{")));
  for (const std::string& name : financial::ArtifactNames()) EXPECT_THAT(text, HasSubstr(name));
  EXPECT_THAT(text, HasSubstr(absl::StrJoin(financial::MetricColumns(), ",")));
  EXPECT_THAT(text, HasSubstr(absl::StrJoin(financial::MovementColumns(), ",")));
  for (const char* rule : {financial::kRuleYoyMove, financial::kRuleOperatingMargin,
                           financial::kRuleReceivablesOutpaceRevenue}) {
    EXPECT_THAT(text, HasSubstr(rule));
  }
  for (const std::string& h : financial::MemoHeadings()) EXPECT_THAT(text, HasSubstr("## " + h));
  for (const char* phrase : {"skeptical", "with code", "second, separate command",
                             "Do not stop until all six files exist", "max(1, 1e-6"}) {
    EXPECT_THAT(text, HasSubstr(phrase));
  }
}

TEST(FinancialAnalystPlaybookTest, VerifyDelegatesToTheVerifier) {
  std::string csv = financial::testing::SampleCsv();
  FinancialAnalystPlaybook p;
  std::vector<Check> checks =
      p.Verify({{"s.csv", csv}}, {}, financial::testing::GoodArtifacts("s.csv", csv)).checks;
  EXPECT_THAT(financial::testing::FailedChecks(checks), IsEmpty());
  checks = p.Verify({}, {}, {}).checks;
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].passed);
}

TEST(RegistryTest, FindsPlaybooksByName) {
  auto found = FindPlaybook("financial-analyst");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)->name(), "financial-analyst");
  EXPECT_THAT(PlaybookNames(), testing::Contains("financial-analyst"));
  auto missing = FindPlaybook("stock-picker");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("stock-picker"));
  EXPECT_THAT(missing.status().message(), HasSubstr("known playbooks: financial-analyst"));
}

}  // namespace
}  // namespace sandgate::playbooks
