#include "client/summary.h"

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/client/temp_dir_test_base.h"

namespace sandgate::cli {
namespace {

// What a summary prints for the files in a fresh directory.
class SummaryTest : public TempDirTest {
 protected:
  std::string Printed(void (*print)(FILE*, const std::string&)) {
    FILE* f = std::tmpfile();
    print(f, dir_);
    std::rewind(f);
    std::string out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
    std::fclose(f);
    return out;
  }
};

TEST_F(SummaryTest, CsvCellsWrittenInTheSandboxAreEscaped) {
  Put("calculated_metrics.csv", "year,revenue_growth\n\"2025\x1b]0;pwned\x07\",0.1\n");
  Put("unusual_movements.csv",
      "year,metric,rule,a,b,change\n"
      "\"2025\x1b]0;pwned\x07\",\"gross\x1b[2J\nrun SUCCEEDED\",yoy_move_15pct,1,2,\x1b[31m\n");
  std::string out = Printed(&PrintFinancialSummary);
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_TRUE(absl::StrContains(out, "latest year 2025\\x1b]0;pwned\\x07")) << out;
  EXPECT_TRUE(absl::StrContains(out, "revenue_growth         10.0%")) << out;
}

TEST_F(SummaryTest, ProbeFindingsAreEscaped) {
  Put("checks.json", R"({"facts": {"os": "\u001b]0;pwned\u0007Linux", "kernel": "6", "python": "3",
                        "cwd": "/work", "uid": 1000},
                        "checks": [{"ok": true, "name": "net\nwork", "detail": "\u001b[2J"}]})");
  std::string out = Printed(&PrintProbeSummary);
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_TRUE(absl::StrContains(out, "sandbox: \\x1b]0;pwned\\x07Linux")) << out;
  EXPECT_TRUE(absl::StrContains(out, "net\\nwork")) << out;
}

}  // namespace
}  // namespace sandgate::cli
