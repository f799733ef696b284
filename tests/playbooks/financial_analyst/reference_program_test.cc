// Runs the reference program (daemon/playbooks/financial_analyst/reference/) on the sample and
// on the edge cases in tests/data/financial/, and holds its output to the daemon's verifier.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/financial_analyst/verifier.h"
#include "test_util.h"
#include "tests/common/temp_dir.h"

namespace sandgate::playbooks::financial {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const char kReferenceDir[] = SANDGATE_SOURCE_DIR "/daemon/playbooks/financial_analyst/reference";

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string Quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A fresh directory holding a copy of the input, removed at the end of the test.
class ReferenceProgramTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }

  // Runs `argv` (already shell-quoted) in dir_, returns its exit status; output in out_.
  int RunIn(const std::string& command) {
    std::string full = absl::StrCat("cd ", Quoted(dir_.string()), " && ", command, " > ",
                                    Quoted((dir_ / "output.txt").string()), " 2>&1");
    int status = std::system(full.c_str());
    out_ = Slurp(dir_ / "output.txt");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Copies `csv` in as `name`, runs analyze_financials.py and verifies what it wrote.
  std::vector<Check> Analyze(const std::string& name, const std::string& csv, int* exit_code) {
    std::ofstream(dir_ / name, std::ios::binary) << csv;
    *exit_code = RunIn(absl::StrCat("python3 ",
                                    Quoted(absl::StrCat(kReferenceDir, "/analyze_financials.py")),
                                    " ", Quoted(name), " --out-dir out"));
    Artifacts artifacts;
    for (const std::string& artifact : ArtifactNames()) {
      if (fs::exists(dir_ / "out" / artifact)) {
        artifacts[artifact] = Slurp(dir_ / "out" / artifact);
      }
    }
    return Verify(name, csv, artifacts);
  }

  std::string Failures(const std::vector<Check>& checks) {
    std::vector<std::string> failed;
    for (const Check& c : checks) {
      if (!c.passed) failed.push_back(absl::StrCat(c.name, ": ", c.detail));
    }
    return absl::StrJoin(failed, "\n");
  }

  sandgate::testing::ScopedTempDir tmp_{"sandgate-reference"};
  const fs::path dir_ = tmp_.path();
  std::string out_;
};

TEST_F(ReferenceProgramTest, SamplePassesEveryCheck) {
  int code = 0;
  std::vector<Check> checks = Analyze(testing::kSampleName, testing::SampleCsv(), &code);
  EXPECT_EQ(code, 0) << out_;
  EXPECT_EQ(Failures(checks), "");
  EXPECT_GE(checks.size(), 25u);

  // The second command: recompute three latest-year metrics and compare.
  fs::copy_file(dir_ / testing::kSampleName, dir_ / "out" / testing::kSampleName);
  EXPECT_EQ(RunIn(absl::StrCat("cd out && python3 ",
                               Quoted(absl::StrCat(kReferenceDir, "/recompute_metrics.py")), " ",
                               Quoted(testing::kSampleName))),
            0)
      << out_;
  EXPECT_THAT(out_, HasSubstr("match"));
}

// Past kMaxBadCells the manifest lists the first ones and counts the rest (a garbage file at
// the input limit would otherwise need a manifest far over the artifact cap), and the daemon
// accepts that as agreeing with its own validation.
TEST_F(ReferenceProgramTest, ManyBadCellsAreListedUpToTheBoundAndCounted) {
  std::string csv =
      "year,revenue,cost_of_revenue,operating_income,interest_expense,net_income,"
      "accounts_receivable,inventory,total_current_assets,total_assets,"
      "total_current_liabilities,total_liabilities,shareholders_equity,operating_cash_flow,"
      "capital_expenditures\n";
  for (int year = 1000; year < 1000 + 1500; ++year) {
    absl::StrAppend(&csv, year, ",n/a,400,200,20,100,100,50,500,2000,250,1200,800,150,60\n");
  }
  int code = 0;
  std::vector<Check> checks = Analyze("garbage.csv", csv, &code);
  EXPECT_EQ(code, 2) << out_;
  nlohmann::json manifest = nlohmann::json::parse(Slurp(dir_ / "out" / kManifestFile));
  EXPECT_EQ(manifest["validation_results"]["bad_cells"].size(), kMaxBadCells);
  EXPECT_EQ(manifest["validation_results"]["bad_cell_count"], 1500);
  for (const Check& c : checks) {
    if (c.name == "input.valid") {
      EXPECT_FALSE(c.passed);
    } else if (absl::StartsWith(c.name, "analysis_run.")) {
      EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
    }
  }
  EXPECT_LT(std::count(out_.begin(), out_.end(), '\n'), 30) << "one line per bad cell";
}

TEST_F(ReferenceProgramTest, EdgeCaseFiles) {
  fs::path data = fs::path(SANDGATE_SOURCE_DIR) / "tests" / "data" / "financial";
  if (!fs::is_directory(data)) GTEST_SKIP() << data << " does not exist yet";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(data)) {
    if (entry.path().extension() != ".csv") continue;
    ++files;
    SCOPED_TRACE(entry.path().filename().string());
    fs::remove_all(dir_ / "out");
    std::string name = entry.path().filename().string();
    std::string csv = Slurp(entry.path());
    ValidationReport report;
    bool valid = LoadStatements(csv, &report).ok();
    int code = 0;
    std::vector<Check> checks = Analyze(name, csv, &code);
    if (valid) {
      EXPECT_EQ(code, 0) << out_;
      EXPECT_EQ(Failures(checks), "");
    } else {
      // Fatal: the program exits 2 and still explains itself in analysis_run.json, which
      // agrees with the daemon's validation (unless the file is too broken to have one).
      EXPECT_EQ(code, 2) << out_;
      for (const Check& c : checks) {
        if (c.name == "input.valid") {
          EXPECT_FALSE(c.passed);
        } else if (absl::StartsWith(c.name, "analysis_run.")) {
          EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
        }
      }
    }
  }
  EXPECT_GT(files, 0);
}

}  // namespace
}  // namespace sandgate::playbooks::financial
