// The sandbox probe through the real daemon and sandbox, as `sandgate run --playbook
// sandbox-probe --setup 'echo setup-ran'` sends it: a setup that prints and leaves no file is
// what was asked for, and the run succeeds with the setup's output in its events.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/playbooks/daemon_run.h"

namespace sandgate::playbooks {
namespace {

TEST(SandboxProbeDaemonTest, SetupThatOnlyPrintsPasses) {
  v1::RunAnalysisRequest req;
  req.set_playbook("sandbox-probe");
  v1::InputFile* in = req.add_inputs();
  in->set_name("notes.txt");
  in->set_content("probe me\n");
  req.mutable_sandbox()->add_setup_commands("echo setup-ran");
  testing::DaemonRun run = testing::RunThroughDaemon(req, 301100);
  ASSERT_FALSE(run.events.empty());
  bool setup_check = false, setup_output = false;
  for (const v1::Event& e : run.events) {
    if (e.has_check() && e.check().name() == "probe.setup_output") {
      setup_check = absl::StrContains(e.check().detail(), "1 setup command(s) ran");
    }
    if (e.has_command_output() && absl::StrContains(e.command_output().data(), "setup-ran")) {
      setup_output = true;
    }
  }
  EXPECT_EQ(absl::StrJoin(run.failed_checks, "\n"), "");
  EXPECT_EQ(run.events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << run.events.back().run_finished().reason();
  EXPECT_TRUE(setup_check);
  EXPECT_TRUE(setup_output) << "the setup's output is not in the run's events";
}

}  // namespace
}  // namespace sandgate::playbooks
