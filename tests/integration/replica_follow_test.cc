// Three real daemons on one PostgreSQL database (tests/fakes' throwaway server): a run
// started on replica A is followed from B and C, from seq 0 and from the middle, and every
// follower sees every event exactly once, in order, live; GetRun and ListRuns answer the
// same on all three.
//
// B and C poll the store only every minute (replica.follow_poll_ms) and send heartbeats every
// 15 s, so a follower there that keeps up with A's own follower is one woken by A's
// notifications.
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

nlohmann::json ReplicaConfig(const std::string& dsn, const std::string& id, uint32_t uid_base) {
  return {{"store", {{"type", "postgres"}, {"dsn", dsn}}},
          {"replica", {{"id", id}, {"follow_poll_ms", 60000}}},
          {"local", {{"uid_base", uid_base}, {"uid_count", 8}}}};
}

// One follower's stream: each event with the moment it arrived.
struct Followed {
  std::vector<v1::Event> events;
  std::vector<absl::Time> arrived;
  std::vector<int64_t> seqs() const {
    std::vector<int64_t> out;
    for (const v1::Event& e : events) out.push_back(e.seq());
    return out;
  }
};

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t s = from; s <= to; ++s) out.push_back(s);
  return out;
}

TEST(ReplicaFollowTest, FollowersOnOtherReplicasSeeEveryEventOnceInOrderLive) {
  auto dsn = PostgresServer::Shared().CreateDatabase();
  ASSERT_TRUE(dsn.ok()) << dsn.status();
  DaemonHarness a(ReplicaConfig(*dsn, "replica-a", 305000));
  DaemonHarness b(ReplicaConfig(*dsn, "replica-b", 305100));
  DaemonHarness c(ReplicaConfig(*dsn, "replica-c", 305200));
  a.Start();
  b.Start();
  c.Start();

  // Output for about two seconds, a line at a time: events while the followers follow.
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_sandbox()->add_setup_commands(
      "for i in $(seq 1 40); do echo line $i; sleep 0.05; done");
  v1::Run run;
  {
    auto ctx = DaemonHarness::Context();
    ASSERT_TRUE(a.Stub()->RunAnalysis(ctx.get(), req, &run).ok()) << a.Log();
  }
  ASSERT_EQ(run.replica(), "replica-a");

  constexpr int64_t kMiddle = 5;
  absl::Notification reached_middle;
  Followed on_a, on_b, on_c, on_c_middle;
  auto follow = [&](DaemonHarness& d, int64_t after, Followed* out) {
    FollowToEnd(*d.Stub(), run.id(), "", after, [&](const v1::Event& e) {
      out->events.push_back(e);
      out->arrived.push_back(absl::Now());
      if (out == &on_b && e.seq() == kMiddle) reached_middle.Notify();
    });
  };
  std::thread ta([&] { follow(a, 0, &on_a); });
  std::thread tb([&] { follow(b, 0, &on_b); });
  std::thread tc([&] { follow(c, 0, &on_c); });
  std::thread tm([&] {
    reached_middle.WaitForNotification();
    follow(c, kMiddle, &on_c_middle);
  });
  ta.join();
  tb.join();
  tc.join();
  tm.join();

  ASSERT_FALSE(on_a.events.empty()) << a.Log();
  const int64_t last = on_a.events.back().seq();
  EXPECT_EQ(on_a.events.back().type(), "run.finished");
  EXPECT_GT(last, 40) << "a line of output is an event";
  EXPECT_EQ(on_a.seqs(), Range(1, last));
  EXPECT_EQ(on_b.seqs(), Range(1, last)) << b.Log();
  EXPECT_EQ(on_c.seqs(), Range(1, last)) << c.Log();
  EXPECT_EQ(on_c_middle.seqs(), Range(kMiddle + 1, last)) << c.Log();
  // Live: each event reaches B's and C's followers soon after A's own (well inside the
  // minute's poll and the 15 s heartbeat).
  for (const Followed* remote : {&on_b, &on_c, &on_c_middle}) {
    for (size_t i = 0; i < remote->events.size(); ++i) {
      const v1::Event& e = remote->events[i];
      ASSERT_EQ(e.SerializeAsString(), on_a.events[e.seq() - 1].SerializeAsString());
      const absl::Duration lag = remote->arrived[i] - on_a.arrived[e.seq() - 1];
      EXPECT_LT(lag, absl::Seconds(2)) << "seq " << e.seq() << " of " << last;
    }
  }

  // Reads of A's run answer the same on every replica.
  auto get = [&](DaemonHarness& d) {
    auto ctx = DaemonHarness::Context();
    v1::GetRunRequest r;
    r.set_run_id(run.id());
    v1::Run got;
    grpc::Status st = d.Stub()->GetRun(ctx.get(), r, &got);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return got;
  };
  auto list = [&](DaemonHarness& d) {
    auto ctx = DaemonHarness::Context();
    v1::ListRunsResponse got;
    grpc::Status st = d.Stub()->ListRuns(ctx.get(), v1::ListRunsRequest(), &got);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return got;
  };
  const v1::Run on_owner = get(a);
  EXPECT_EQ(on_owner.last_seq(), last);
  EXPECT_EQ(on_owner.replica(), "replica-a");
  const v1::ListRunsResponse listed = list(a);
  ASSERT_EQ(listed.runs_size(), 1);
  for (DaemonHarness* d : {&b, &c}) {
    EXPECT_EQ(get(*d).SerializeAsString(), on_owner.SerializeAsString());
    EXPECT_EQ(list(*d).SerializeAsString(), listed.SerializeAsString());
  }
  EXPECT_EQ(a.Stop(SIGTERM), 0) << a.Log();
  EXPECT_EQ(b.Stop(SIGTERM), 0) << b.Log();
  EXPECT_EQ(c.Stop(SIGTERM), 0) << c.Log();
}

}  // namespace
}  // namespace sandgate::testing
