// Runs one request through the real daemon and sandbox (tests/integration/daemon_harness.h)
// for the playbook tests that need the whole path: a daemon with one tenant on its own uid
// range, the run started and followed to its end.
#ifndef SANDGATE_TESTS_PLAYBOOKS_DAEMON_RUN_H_
#define SANDGATE_TESTS_PLAYBOOKS_DAEMON_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::playbooks::testing {

struct DaemonRun {
  std::vector<v1::Event> events;           // every event, the last one run.finished
  std::vector<std::string> failed_checks;  // "name: detail"
  int checks = 0;
  std::string daemon_log;
};

// `uid_base` must be a range of 8 uids no other test uses at the same time.
inline DaemonRun RunThroughDaemon(const v1::RunAnalysisRequest& req, uint32_t uid_base) {
  static constexpr char kToken[] = "playbook-test-token";
  DaemonRun out;
  sandgate::testing::DaemonHarness daemon(
      {{"tenants", {{{"name", "playbooks"}, {"token_sha256", Sha256::Hex(kToken)}}}},
       {"local", {{"uid_base", uid_base}, {"uid_count", 8}}}});
  daemon.Start();
  auto stub = daemon.Stub();
  v1::Run run;
  auto ctx = sandgate::testing::DaemonHarness::Context(kToken);
  grpc::Status st = stub->RunAnalysis(ctx.get(), req, &run);
  EXPECT_TRUE(st.ok()) << st.error_message();
  if (!st.ok()) return out;
  out.events = sandgate::testing::FollowToEnd(*stub, run.id(), kToken);
  for (const v1::Event& e : out.events) {
    if (!e.has_check()) continue;
    ++out.checks;
    if (!e.check().passed()) {
      out.failed_checks.push_back(absl::StrCat(e.check().name(), ": ", e.check().detail()));
    }
  }
  out.daemon_log = daemon.Log();
  return out;
}

}  // namespace sandgate::playbooks::testing

#endif  // SANDGATE_TESTS_PLAYBOOKS_DAEMON_RUN_H_
