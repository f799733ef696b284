// The sandgate CLI against the real daemon: what a person at a terminal gets.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

struct Result {
  int exit_code;
  std::string out;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonHarness>(
        nlohmann::json{{"local", {{"uid_base", 300100}, {"uid_count", 16}}}});
    daemon_->Start();
  }
  // Runs the CLI with SANDGATE_ADDR pointing at the test daemon; stdout and stderr together.
  Result Cli(const std::string& args) {
    std::string cmd = "SANDGATE_ADDR=" + daemon_->address() + " " + SANDGATE_CLI_PATH + " " +
                      args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::unique_ptr<DaemonHarness> daemon_;
};

TEST_F(CliTest, RunShowsProgressDownloadsEverythingAndSummarises) {
  std::string out_dir = daemon_->dir() + "/results";
  Result r = Cli("run " + std::string(SANDGATE_SOURCE_DIR) +
                 "/examples/northstar_cloud_financial_statements.csv --out " + out_dir);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* expect : {"step analyze", "$ python3 analyze_financials.py", "pass calculated_metrics.values",
                             "run SUCCEEDED", "latest year 2025", "revenue_growth         13.8%",
                             "receivables_outpace_revenue_10pp", out_dir.c_str()}) {
    EXPECT_TRUE(absl::StrContains(r.out, expect)) << "no '" << expect << "' in:\n" << r.out;
  }
  for (const char* f : {"analyze_financials.py", "calculated_metrics.csv", "unusual_movements.csv",
                        "investment_analysis.md", "financial_trends.svg", "analysis_run.json",
                        "events.jsonl"}) {
    struct stat st;
    ASSERT_EQ(stat((out_dir + "/" + f).c_str(), &st), 0) << f;
    EXPECT_GT(st.st_size, 0) << f;
  }
  std::vector<std::string> lines =
      absl::StrSplit(Slurp(out_dir + "/events.jsonl"), '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  for (size_t i = 0; i < lines.size(); ++i) {
    nlohmann::json e = nlohmann::json::parse(lines[i], nullptr, false);
    ASSERT_FALSE(e.is_discarded()) << lines[i];
    EXPECT_EQ(e["seq"].get<std::string>(), std::to_string(i + 1));  // int64 is a JSON string
  }
  EXPECT_TRUE(absl::StrContains(lines.back(), "run.finished"));
}

TEST_F(CliTest, FatalInputExitsOneWithTheReason) {
  Result r = Cli("run " + std::string(SANDGATE_SOURCE_DIR) + "/tests/data/financial/duplicate_year.csv --out " +
                 daemon_->dir() + "/dup");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "FAILED")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "duplicate year 2023")) << r.out;
}

TEST_F(CliTest, RunsGetEventsAndJson) {
  Result run = Cli("run " + std::string(SANDGATE_SOURCE_DIR) +
                   "/examples/northstar_cloud_financial_statements.csv --json --out " + daemon_->dir() + "/j");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  std::vector<std::string> lines = absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  nlohmann::json final_run = nlohmann::json::parse(lines.back(), nullptr, false);
  ASSERT_FALSE(final_run.is_discarded()) << lines.back();
  std::string id = final_run["id"];
  EXPECT_EQ(final_run["status"], "RUN_STATUS_SUCCEEDED");  // proto3 JSON names

  Result runs = Cli("runs");
  EXPECT_EQ(runs.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(runs.out, id));
  Result get = Cli("get " + id);
  EXPECT_TRUE(absl::StrContains(get.out, "status     SUCCEEDED")) << get.out;
  Result events = Cli("events " + id + " --after 3");
  EXPECT_EQ(events.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(events.out, "   4 ")) << events.out;
  EXPECT_FALSE(absl::StrContains(events.out, "   3 ")) << events.out;
  Result dl = Cli("download " + id + " --out " + daemon_->dir() + "/dl");
  EXPECT_EQ(dl.exit_code, 0) << dl.out;
  EXPECT_EQ(Slurp(daemon_->dir() + "/dl/calculated_metrics.csv"),
            Slurp(daemon_->dir() + "/j/calculated_metrics.csv"));
}

TEST_F(CliTest, BadUsageAndUnknownRunsSayWhatIsWrong) {
  Result missing = Cli("run /nonexistent.csv");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(missing.out, "cannot read /nonexistent.csv")) << missing.out;
  Result unknown = Cli("get run-doesnotexist");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(unknown.out, "NOT_FOUND")) << unknown.out;
  Result flag = Cli("runs --bogus");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(flag.out, "unknown option --bogus")) << flag.out;
}

TEST_F(CliTest, SessionCommandsDriveAKeptSandbox) {
  Result created = Cli("session create --idle 300 --env GREETING=hi");
  ASSERT_EQ(created.exit_code, 0) << created.out;
  std::string id(absl::StripAsciiWhitespace(created.out));
  ASSERT_TRUE(absl::StartsWith(id, "s")) << id;
  Result echo = Cli("session exec " + id + " 'echo $GREETING; echo warn >&2'");
  EXPECT_EQ(echo.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(echo.out, "hi\n")) << echo.out;
  EXPECT_TRUE(absl::StrContains(echo.out, "warn")) << echo.out;
  EXPECT_EQ(Cli("session exec " + id + " -- sh -c 'exit 7'").exit_code, 7) << "the command's own status";
  Result up = Cli("session upload " + id + " " + std::string(SANDGATE_SOURCE_DIR) +
                  "/examples/northstar_cloud_financial_statements.csv in.csv");
  EXPECT_EQ(up.exit_code, 0) << up.out;
  Result run = Cli("run --session " + id + " " + std::string(SANDGATE_SOURCE_DIR) +
                   "/examples/northstar_cloud_financial_statements.csv --out " + daemon_->dir() + "/s");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  Result ls = Cli("session ls " + id);
  EXPECT_TRUE(absl::StrContains(ls.out, "in.csv")) << ls.out;
  EXPECT_TRUE(absl::StrContains(ls.out, "calculated_metrics.csv")) << ls.out;
  Result down = Cli("session download " + id + " in.csv --out " + daemon_->dir() + "/back.csv");
  EXPECT_EQ(down.exit_code, 0) << down.out;
  EXPECT_EQ(Slurp(daemon_->dir() + "/back.csv"),
            Slurp(std::string(SANDGATE_SOURCE_DIR) + "/examples/northstar_cloud_financial_statements.csv"));
  Result mixed = Cli("run --session " + id + " --env X=1 in.csv");
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(mixed.out, "--env does not apply with --session")) << mixed.out;
  EXPECT_TRUE(absl::StrContains(Cli("session close " + id).out, "status     CLOSED"));
  Result gone = Cli("session exec " + id + " true");
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(gone.out, "FAILED_PRECONDITION")) << gone.out;
}

TEST_F(CliTest, EventsFollowRidesOutADaemonRestart) {
  daemon_->Stop(SIGTERM);
  daemon_ = std::make_unique<DaemonHarness>(nlohmann::json{
      {"local", {{"uid_base", 300100}, {"uid_count", 16}}}, {"max_concurrent_runs", 1}});
  daemon_->Start();
  auto stub = daemon_->Stub();
  v1::RunAnalysisRequest slow = SampleRequest();
  slow.mutable_sandbox()->add_setup_commands("sleep 60");
  v1::Run busy, waiting;
  ASSERT_TRUE(stub->RunAnalysis(DaemonHarness::Context().get(), slow, &busy).ok());
  ASSERT_TRUE(stub->RunAnalysis(DaemonHarness::Context().get(), SampleRequest(), &waiting).ok());
  ASSERT_EQ(waiting.status(), v1::RUN_STATUS_QUEUED);
  Result followed;
  std::thread follower([&] { followed = Cli("events " + waiting.id() + " --follow"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the follower is connected
  ASSERT_EQ(daemon_->Stop(SIGTERM), 0);  // drains: the waiting run stays queued
  daemon_->Start();
  follower.join();
  EXPECT_EQ(followed.exit_code, 0) << followed.out;
  for (const char* expect : {"stays queued", "reconnecting", "queued again", "run SUCCEEDED"}) {
    EXPECT_TRUE(absl::StrContains(followed.out, expect)) << "no '" << expect << "' in:\n" << followed.out;
  }
}

}  // namespace
}  // namespace sandgate::testing
