// Two real daemons sharing one PostgreSQL database (tests/fakes' throwaway server), with a
// short lease: a run sent to A while A has room starts on A at once; a run queued on A while
// A is full runs on B (which has room), followed to its end on A; then replica A is
// SIGKILLed mid-run; B fails A's running run within the lease plus a margin, saying why; A,
// restarted, sweeps its own sandbox from the journal and rejoins.
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/openai/fake_openai_server.h"
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
          {"max_concurrent_runs", 1},  // a second run waits
          {"local", {{"uid_base", uid_base}, {"uid_count", 8}}}};
}

int64_t JournalRows(const std::string& dsn) {
  return CountRows(dsn, "SELECT count(*) FROM journal");
}

TEST(ReplicasTest, KilledReplicasRunsAreFailedAndMovedByAnotherAndItSweepsWhenBack) {
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  // A claim poll of a minute: B claims the run queued on full A at once only because A's
  // queueing notified it (sandgate_queue).
  auto config = [&](const std::string& id, uint32_t uid_base) {
    nlohmann::json c = ReplicaConfig(*dsn, id, uid_base);
    c["replica"]["claim_poll_ms"] = 60000;
    return c;
  };
  DaemonHarness a(config("replica-a", 304000));
  DaemonHarness b(config("replica-b", 304100));
  a.Start();
  b.Start();

  auto stub = a.Stub();
  v1::RunAnalysisRequest slow = SampleRequest();
  slow.mutable_sandbox()->add_setup_commands("sleep 300");
  v1::Run running, waiting;
  {
    auto ctx = DaemonHarness::Context();
    ASSERT_TRUE(stub->RunAnalysis(ctx.get(), slow, &running).ok()) << a.Log();
  }
  const absl::Time queued = absl::Now();
  {
    auto ctx = DaemonHarness::Context();
    ASSERT_TRUE(stub->RunAnalysis(ctx.get(), SampleRequest(), &waiting).ok()) << a.Log();
  }
  EXPECT_EQ(running.replica(), "replica-a");
  EXPECT_EQ(waiting.status(), v1::RUN_STATUS_QUEUED);
  ASSERT_TRUE(WaitForCommand(a, running.id())) << a.Log();
  ASSERT_GE(JournalRows(*dsn), 1) << "A's sandbox is journaled";
  // A is full, so B (with room) claims the waiting run from the shared queue and runs it. A
  // follower on A, where it was queued, sees it to its end: what A cached of the run while it
  // was A's must not hold the follower.
  std::vector<v1::Event> followed_on_a = FollowToEnd(*stub, waiting.id());
  ASSERT_FALSE(followed_on_a.empty());
  EXPECT_EQ(followed_on_a.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << a.Log() << "\n"
      << b.Log();
  EXPECT_LT(absl::Now() - queued, absl::Seconds(20)) << "woken by a notification, not the poll";

  a.Stop(SIGKILL);
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(Eventually(
      "replica B to fail A's running run",
      [&] {
        absl::StatusOr<v1::Run> r = GetRun(b, running.id());
        return r.ok() && r->status() == v1::RUN_STATUS_FAILED;
      },
      absl::Seconds(kLeaseSeconds) + kMargin))
      << b.Log();
  EXPECT_LE(absl::Now() - killed, absl::Seconds(kLeaseSeconds) + kMargin);
  v1::Run failed = *GetRun(b, running.id());
  EXPECT_TRUE(absl::StartsWith(failed.status_reason(),
                               "replica replica-a stopped renewing its lease, which ended at"))
      << failed.status_reason();
  std::vector<v1::Event> events = FollowToEnd(*b.Stub(), running.id());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().reason(), failed.status_reason());

  // The waiting run is B's, and ran there.
  std::vector<v1::Event> moved = FollowToEnd(*b.Stub(), waiting.id());
  ASSERT_FALSE(moved.empty());
  EXPECT_EQ(moved.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << moved.back().run_finished().reason() << "\n"
      << b.Log();
  EXPECT_EQ(GetRun(b, waiting.id())->replica(), "replica-b");
  EXPECT_GE(JournalRows(*dsn), 1) << "A's local sandbox is not B's to delete";

  // A comes back: its own sweep deletes its sandbox, and it serves again.
  a.Start();
  EXPECT_TRUE(Eventually("the journal to be empty", [&] { return JournalRows(*dsn) == 0; }))
      << a.Log();
  EXPECT_TRUE(absl::StrContains(a.Log(), "replica.joined")) << a.Log();
  v1::Run again;
  auto ctx = DaemonHarness::Context();
  EXPECT_TRUE(a.Stub()->RunAnalysis(ctx.get(), SampleRequest(), &again).ok()) << a.Log();
  EXPECT_EQ(again.replica(), "replica-a");
  EXPECT_EQ(a.Stop(SIGTERM), 0) << a.Log();
  EXPECT_EQ(b.Stop(SIGTERM), 0) << b.Log();
}

// A's OpenAI container is deleted by B, once, when A's lease ends: a remote resource is any
// replica's to delete.
TEST(ReplicasTest, KilledReplicasContainerIsDeletedByAnotherOnce) {
  constexpr char kKey[] = "sk-replicas-test-0123456789";
  FakeOpenAiServer fake(kKey);
  ASSERT_TRUE(fake.Start());
  ScopedTempDir key_dir("sg-replicas-key");
  ASSERT_TRUE(key_dir.ok());
  const std::string key_file = key_dir.path() + "/openai.key";
  std::ofstream(key_file) << kKey << "\n";
  chmod(key_file.c_str(), 0600);
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  auto config = [&](const std::string& id, uint32_t uid_base) {
    nlohmann::json c = ReplicaConfig(*dsn, id, uid_base);
    c["openai"] = {{"base_url", fake.base_url()},
                   {"api_key_file", key_file},
                   {"model", "fake-model"},
                   {"max_turns", 10}};
    return c;
  };
  DaemonHarness a(config("replica-a", 304400));
  DaemonHarness b(config("replica-b", 304500));
  a.Start();
  b.Start();
  fake.Scenario({{{"shell", {"sleep 30"}}, {"timeout_ms", 60000}}, {{"message", "done"}}});
  v1::RunAnalysisRequest req = SampleRequest();
  req.set_provider("openai");
  req.set_agent("openai");
  v1::Run run;
  {
    auto ctx = DaemonHarness::Context();
    ASSERT_TRUE(a.Stub()->RunAnalysis(ctx.get(), req, &run).ok()) << a.Log();
  }
  ASSERT_TRUE(WaitForCommand(a, run.id())) << a.Log();
  a.Stop(SIGKILL);
  ASSERT_EQ(fake.State()["containers"].size(), 1u);
  EXPECT_TRUE(Eventually(
      "the fake to hold no container", [&] { return fake.State()["containers"].empty(); },
      absl::Seconds(kLeaseSeconds) + kMargin))
      << b.Log();
  // The remote sweep comes first and the settling commit after it (core/replica.h): the run
  // is FAILED a moment after its container is gone.
  EXPECT_TRUE(Eventually("replica B to fail A's run", [&] {
    absl::StatusOr<v1::Run> r = GetRun(b, run.id());
    return r.ok() && r->status() == v1::RUN_STATUS_FAILED;
  })) << b.Log();
  int deletes = 0;
  const nlohmann::json state = fake.State();
  for (const auto& r : state["requests"]) {
    deletes += r.value("method", "") == "DELETE" &&
               absl::StartsWith(r.value("path", ""), "/v1/containers/") &&
               r.value("path", "").find("/files") == std::string::npos;
  }
  EXPECT_EQ(deletes, 1) << state["requests"].dump();
  EXPECT_EQ(b.Stop(SIGTERM), 0) << b.Log();
}

// The same idempotency key sent to two replicas at once makes one run: the store's unique
// key, not either replica's memory, decides.
TEST(ReplicasTest, SameIdempotencyKeyOnTwoReplicasAtOnceIsOneRun) {
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  DaemonHarness a(ReplicaConfig(*dsn, "replica-a", 304200));
  DaemonHarness b(ReplicaConfig(*dsn, "replica-b", 304300));
  a.Start();
  b.Start();
  for (int round = 0; round < 5; ++round) {
    v1::RunAnalysisRequest req = SampleRequest();
    req.set_idempotency_key(absl::StrCat("same-", round));
    v1::Run on_a, on_b;
    grpc::Status st_a, st_b;
    std::thread ta([&] {
      auto ctx = DaemonHarness::Context();
      st_a = a.Stub()->RunAnalysis(ctx.get(), req, &on_a);
    });
    std::thread tb([&] {
      auto ctx = DaemonHarness::Context();
      st_b = b.Stub()->RunAnalysis(ctx.get(), req, &on_b);
    });
    ta.join();
    tb.join();
    ASSERT_TRUE(st_a.ok()) << st_a.error_message();
    ASSERT_TRUE(st_b.ok()) << st_b.error_message();
    EXPECT_EQ(on_a.id(), on_b.id()) << "round " << round;
    // Followed on its owner: a follower on another replica is not woken by its events yet.
    DaemonHarness& owner = on_a.replica() == "replica-a" ? a : b;
    std::vector<v1::Event> events = FollowToEnd(*owner.Stub(), on_a.id());
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED);
  }
  EXPECT_EQ(a.Stop(SIGTERM), 0) << a.Log();
  EXPECT_EQ(b.Stop(SIGTERM), 0) << b.Log();
}

}  // namespace
}  // namespace sandgate::testing
