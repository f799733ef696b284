// The sandbox probe through the real daemon and sandbox, as `sandgate run --playbook
// sandbox-probe --setup 'echo setup-ran'` sends it: a setup that prints and leaves no file is
// what was asked for, and the run succeeds with the setup's output in its events.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::playbooks {
namespace {

constexpr char kToken[] = "probe-token";

TEST(SandboxProbeDaemonTest, SetupThatOnlyPrintsPasses) {
  testing::DaemonHarness daemon(
      {{"tenants", {{{"name", "probe"}, {"token_sha256", Sha256::Hex(kToken)}}}},
       {"local", {{"uid_base", 301100}, {"uid_count", 8}}}});
  daemon.Start();
  auto stub = daemon.Stub();
  v1::RunAnalysisRequest req;
  req.set_playbook("sandbox-probe");
  v1::InputFile* in = req.add_inputs();
  in->set_name("notes.txt");
  in->set_content("probe me\n");
  req.mutable_sandbox()->add_setup_commands("echo setup-ran");
  v1::Run run;
  auto ctx = testing::DaemonHarness::Context(kToken);
  grpc::Status st = stub->RunAnalysis(ctx.get(), req, &run);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<v1::Event> events = testing::FollowToEnd(*stub, run.id(), kToken);
  ASSERT_FALSE(events.empty());
  std::vector<std::string> failed;
  bool setup_check = false, setup_output = false;
  for (const v1::Event& e : events) {
    if (e.has_check()) {
      if (!e.check().passed()) {
        failed.push_back(absl::StrCat(e.check().name(), ": ", e.check().detail()));
      }
      if (e.check().name() == "probe.setup_output") {
        setup_check = absl::StrContains(e.check().detail(), "1 setup command(s) ran");
      }
    }
    if (e.has_command_output() && absl::StrContains(e.command_output().data(), "setup-ran")) {
      setup_output = true;
    }
  }
  EXPECT_EQ(absl::StrJoin(failed, "\n"), "");
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << events.back().run_finished().reason();
  EXPECT_TRUE(setup_check);
  EXPECT_TRUE(setup_output) << "the setup's output is not in the run's events";
}

}  // namespace
}  // namespace sandgate::playbooks
