// Fencing between two real daemons on one PostgreSQL database (docs/replicas.md "Fencing"):
// replica A is frozen (SIGSTOP) past its lease with a run going; B takes it over and fails
// the run; A, resumed (SIGCONT), has its late writes refused, so the run stays FAILED with
// B's reason and no event follows B's run.finished; A ends its work, sweeps its own host,
// rejoins at a new epoch without a restart and takes new work.
#include <signal.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/daemon_harness.h"
#include "tests/integration/replica_calls.h"

namespace sandgate::testing {
namespace {

constexpr double kLeaseSeconds = 2;
// The lease's end is noticed at once; the rest is the cleanup and this test's polling.
constexpr absl::Duration kMargin = absl::Seconds(5);

nlohmann::json ReplicaConfig(const std::string& dsn, const std::string& id, uint32_t uid_base) {
  return {{"store", {{"type", "postgres"}, {"dsn", dsn}}},
          {"replica", {{"id", id}, {"lease_seconds", kLeaseSeconds}, {"renew_seconds", 0.5}}},
          {"local", {{"uid_base", uid_base}, {"uid_count", 8}}}};
}

int Occurrences(const std::string& log, const std::string& what) {
  int n = 0;
  for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
  return n;
}

TEST(ReplicaFencingTest, FrozenReplicasLateWritesAreRefusedAndItRejoins) {
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  DaemonHarness a(ReplicaConfig(*dsn, "replica-a", 304600));
  DaemonHarness b(ReplicaConfig(*dsn, "replica-b", 304700));
  a.Start();
  b.Start();

  v1::RunAnalysisRequest slow = SampleRequest();
  slow.mutable_sandbox()->add_setup_commands("sleep 300");
  v1::Run running;
  {
    auto ctx = DaemonHarness::Context();
    ASSERT_TRUE(a.Stub()->RunAnalysis(ctx.get(), slow, &running).ok()) << a.Log();
  }
  ASSERT_TRUE(WaitForCommand(a, running.id())) << a.Log();
  ASSERT_GE(CountRows(*dsn, "SELECT count(*) FROM journal"), 1) << "A's sandbox is journaled";

  ASSERT_EQ(kill(a.pid(), SIGSTOP), 0);
  const bool failed = Eventually(
      "replica B to fail A's running run",
      [&] {
        absl::StatusOr<v1::Run> r = GetRun(b, running.id());
        return r.ok() && r->status() == v1::RUN_STATUS_FAILED;
      },
      absl::Seconds(kLeaseSeconds) + kMargin);
  // B's run.finished is stored (its stream ends there) before A runs again.
  std::vector<v1::Event> by_b =
      failed ? FollowToEnd(*b.Stub(), running.id()) : std::vector<v1::Event>{};
  const int64_t seq_at_failure = CountRows(
      *dsn, absl::StrCat("SELECT max(seq) FROM events WHERE run_id = '", running.id(), "'"));
  ASSERT_EQ(kill(a.pid(), SIGCONT), 0);
  ASSERT_TRUE(failed) << b.Log();
  ASSERT_FALSE(by_b.empty());
  EXPECT_EQ(by_b.back().seq(), seq_at_failure);
  const std::string reason = GetRun(b, running.id())->status_reason();
  ASSERT_TRUE(absl::StartsWith(reason, "replica replica-a stopped renewing its lease")) << reason;

  // Resumed, A finds itself taken over, ends its run (whose writes are refused), sweeps its
  // host and joins again.
  ASSERT_TRUE(Eventually(
      "replica A to rejoin", [&] { return absl::StrContains(a.Log(), "replica.rejoined"); },
      absl::Seconds(kLeaseSeconds) + kMargin))
      << a.Log();
  const std::string log = a.Log();
  EXPECT_TRUE(
      absl::StrContains(log, "refused: replica replica-a was taken over by replica replica-b"))
      << "a late write refused, saying why\n"
      << log;
  EXPECT_TRUE(absl::StrContains(log, "\"epoch\":2")) << log;
  v1::Run after = *GetRun(a, running.id());
  EXPECT_EQ(after.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(after.status_reason(), reason) << "B's failure stays";
  EXPECT_EQ(CountRows(*dsn, absl::StrCat("SELECT max(seq) FROM events WHERE run_id = '",
                                         running.id(), "'")),
            seq_at_failure)
      << "no event of A's after B's run.finished";
  std::vector<v1::Event> events = FollowToEnd(*a.Stub(), running.id());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().reason(), reason);

  // A's sandbox was deleted on A's host only, once: by the run's own close or A's sweep.
  EXPECT_TRUE(Eventually("the journal to be empty", [&] {
    return CountRows(*dsn, "SELECT count(*) FROM journal") == 0;
  })) << a.Log();
  EXPECT_EQ(Occurrences(b.Log(), "sweep.removed"), 0) << "B deletes none of A's local sandbox";
  EXPECT_EQ(Occurrences(a.Log(), "sweep.failed"), 0) << a.Log();

  // A takes new work again, as its own.
  v1::Run again;
  {
    auto ctx = DaemonHarness::Context();
    ASSERT_TRUE(a.Stub()->RunAnalysis(ctx.get(), SampleRequest(), &again).ok()) << a.Log();
  }
  EXPECT_EQ(again.replica(), "replica-a");
  std::vector<v1::Event> fresh = FollowToEnd(*a.Stub(), again.id());
  ASSERT_FALSE(fresh.empty());
  EXPECT_EQ(fresh.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << fresh.back().run_finished().reason() << "\n"
      << a.Log();
  EXPECT_EQ(a.Stop(SIGTERM), 0) << a.Log();
  EXPECT_EQ(b.Stop(SIGTERM), 0) << b.Log();
}

}  // namespace
}  // namespace sandgate::testing
