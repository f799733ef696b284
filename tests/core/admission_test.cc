#include "core/admission.h"

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/sqlite_admission_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_notifier.h"
#include "tests/fakes/forwarding_admission_store.h"

namespace sandgate::core {
namespace {

std::vector<std::string> Ids(const std::vector<AdmissionQueue::Ticket>& tickets) {
  std::vector<std::string> ids;
  for (const auto& t : tickets) ids.push_back(t.run_id);
  return ids;
}

// Queues `ticket`; the ticket when it was admitted as it was queued (the caller starts it).
std::vector<AdmissionQueue::Ticket> Queue(AdmissionQueue& q, const AdmissionQueue::Ticket& ticket) {
  absl::StatusOr<bool> now = q.Enqueue(ticket);
  EXPECT_TRUE(now.ok()) << now.status();
  if (now.ok() && *now) return {ticket};
  return {};
}

// One daemon's own queue (no shared store) admits by the same rules, on a store of its own
// in memory: a run queued with room to spare starts at once, the rest wait in fair order.
TEST(AdmissionTest, RoundRobinAcrossTenantsSoOneQueueCannotStarveAnother) {
  SandboxBudget budget(100);
  AdmissionQueue q(/*max_running=*/1, /*max_queued=*/100, &budget);
  std::vector<AdmissionQueue::Ticket> admitted = Queue(q, {"a1", "a", 0, true});
  EXPECT_EQ(Ids(admitted), std::vector<std::string>{"a1"}) << "room: it starts as it is queued";
  for (int i = 2; i <= 4; ++i)
    EXPECT_TRUE(Queue(q, {"a" + std::to_string(i), "a", 0, true}).empty());
  EXPECT_TRUE(Queue(q, {"b1", "b", 0, true}).empty());
  EXPECT_TRUE(Queue(q, {"c1", "c", 0, true}).empty());
  EXPECT_TRUE(q.Admit().empty()) << "max_running 1";
  EXPECT_EQ(q.Order(), (std::vector<std::string>{"b1", "c1", "a2", "a3", "a4"}));
  EXPECT_EQ(q.waiting(), 5u);
  std::vector<std::string> order;
  while (!admitted.empty()) {
    ASSERT_EQ(admitted.size(), 1u);
    order.push_back(admitted[0].run_id);
    q.Done(admitted[0]);
    admitted = q.Admit();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "c1", "a2", "a3", "a4"}));
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(q.running(), 0u);
}

TEST(AdmissionTest, TenantQuotaAndGlobalLimitBothHold) {
  SandboxBudget budget(100);
  AdmissionQueue q(/*max_running=*/3, 100, &budget);
  std::vector<AdmissionQueue::Ticket> first;
  for (const char* id : {"a1", "a2", "a3"}) {
    for (const auto& t : Queue(q, {id, "a", /*limit=*/1, true})) first.push_back(t);
  }
  for (const char* id : {"b1", "b2", "b3"}) {
    for (const auto& t : Queue(q, {id, "b", 0, true})) first.push_back(t);
  }
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"a1", "b1", "b2"}));
  EXPECT_EQ(q.running(), 3u);
  EXPECT_TRUE(q.Admit().empty());
  q.Done(first[1]);  // b1 ends: a is at its quota, so b3 goes
  EXPECT_EQ(Ids(q.Admit()), (std::vector<std::string>{"b3"}));
  q.Done(first[0]);  // a1 ends
  EXPECT_EQ(Ids(q.Admit()), (std::vector<std::string>{"a2"}));
}

TEST(AdmissionTest, TheSandboxBudgetHoldsRunsThatNeedASandbox) {
  SandboxBudget budget(1);
  AdmissionQueue q(10, 100, &budget);
  ASSERT_TRUE(budget.TryTake());  // a kept session holds the only sandbox
  EXPECT_TRUE(Queue(q, {"r1", "a", 0, /*needs_sandbox=*/true}).empty());
  EXPECT_EQ(Ids(Queue(q, {"r2", "b", 0, /*needs_sandbox=*/false})), std::vector<std::string>{"r2"})
      << "a run in a kept session needs no new sandbox";
  EXPECT_TRUE(q.Admit().empty());
  int released = 0;
  budget.set_on_release([&] { ++released; });
  budget.Give();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(Ids(q.Admit()), (std::vector<std::string>{"r1"}));
  EXPECT_FALSE(budget.TryTake());
}

TEST(AdmissionTest, TheQueueIsBoundedAndNamesTheLimit) {
  SandboxBudget budget(1);
  AdmissionQueue q(1, /*max_queued=*/2, &budget);
  ASSERT_TRUE(*q.Enqueue({"r1", "a", 0, true})) << "it runs: it does not wait";
  ASSERT_FALSE(*q.Enqueue({"r2", "a", 0, true}));
  ASSERT_FALSE(*q.Enqueue({"r3", "a", 0, true}));
  absl::Status full = q.Enqueue({"r4", "a", 0, true}).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(full.message(), "max_queued_runs 2")) << full;
  EXPECT_TRUE(q.Remove("r3"));
  EXPECT_FALSE(q.Remove("r3"));
  EXPECT_FALSE(q.Remove("r1")) << "running, not waiting";
  EXPECT_FALSE(*q.Enqueue({"r4", "a", 0, true}));
}

// Two replicas' queues on one shared store: the tenant's quota counts both, each replica's
// own limit and sandbox budget stay its own, a run queued where there is room is admitted
// there at once, and either claims the other's waiting runs.
TEST(AdmissionTest, SharedQueuesOfTwoReplicasHoldTheTenantsQuotaTogether) {
  testing::ScopedTempDir dir("sg-admission");
  testing::FakeClock clock;
  auto store_a = *store::SqliteAdmissionStore::Open(dir.path() + "/state.db");
  auto store_b = *store::SqliteAdmissionStore::Open(dir.path() + "/state.db");
  SandboxBudget budget_a(4), budget_b(0);
  AdmissionQueue a(/*max_running=*/1, 100, &budget_a, {store_a.get(), "a", &clock});
  AdmissionQueue b(/*max_running=*/4, 100, &budget_b, {store_b.get(), "b", &clock});
  EXPECT_TRUE(*a.Enqueue({"t1", "t", /*tenant_limit=*/2, true})) << "a has room: t1 starts on a";
  EXPECT_TRUE(a.ClaimedHere("t1"));
  EXPECT_EQ(a.running(), 1u);
  EXPECT_EQ(budget_a.used(), 1u);
  EXPECT_FALSE(*a.Enqueue({"t2", "t", 2, true})) << "a's own limit is 1";
  EXPECT_FALSE(*a.Enqueue({"k1", "u", 0, /*needs_sandbox=*/false}, /*only_here=*/true));
  EXPECT_TRUE(*b.Enqueue({"t3", "t", 2, /*needs_sandbox=*/false}))
      << "b has room for a run without a sandbox; t2 ahead of it needs one";
  EXPECT_EQ(b.waiting(), 2u) << "one queue";
  EXPECT_EQ(Ids(b.Admit()), (std::vector<std::string>{}))
      << "t's 2 slots are held, b has no sandbox and k1's session is a's";
  a.Done({"t1", "t", 2, true});
  EXPECT_EQ(budget_a.used(), 0u);
  EXPECT_EQ(Ids(a.Admit()), (std::vector<std::string>{"k1"})) << "u is after t, a's limit is 1";
  a.Done({"k1", "u", 0, false});
  EXPECT_EQ(Ids(a.Admit()), (std::vector<std::string>{"t2"}));
  EXPECT_TRUE(a.ClaimedHere("t2"));
  EXPECT_FALSE(a.ClaimedHere("t3"));
  EXPECT_FALSE(*b.Enqueue({"t4", "t", 2, false})) << "t2 and t3 hold t's 2 slots";
  b.Done({"t3", "t", 2, false});
  EXPECT_EQ(Ids(b.Admit()), (std::vector<std::string>{"t4"}));
  a.Done({"t2", "t", 2, true});
  EXPECT_EQ(budget_a.used(), 0u);
  EXPECT_EQ(a.Order(), (std::vector<std::string>{}));
}

// A replica that may not take work (its lease lost: ReplicaMember::CanTakeWork) claims
// nothing, neither a run it queues with room to spare nor a waiting one; once it may again,
// it claims as before.
TEST(AdmissionTest, ASharedQueueClaimsNothingWhileItsReplicaMayNotTakeWork) {
  testing::ScopedTempDir dir("sg-admission");
  testing::FakeClock clock;
  auto store = *store::SqliteAdmissionStore::Open(dir.path() + "/state.db");
  SandboxBudget budget(4);
  AdmissionQueue a(/*max_running=*/2, 100, &budget, {store.get(), "a", &clock});
  std::atomic<bool> may{false};
  a.SetClaimGate([&may]() -> absl::Status {
    return may.load() ? absl::OkStatus() : absl::UnavailableError("replica a lost its lease");
  });
  EXPECT_FALSE(*a.Enqueue({"r1", "t", 0, true})) << "room, but no lease: it waits";
  EXPECT_EQ(Ids(a.Admit()), (std::vector<std::string>{}));
  EXPECT_EQ(a.running(), 0u);
  EXPECT_EQ(budget.used(), 0u) << "no sandbox taken for a claim not made";
  EXPECT_EQ(a.waiting(), 1u);
  may = true;
  EXPECT_EQ(Ids(a.Admit()), (std::vector<std::string>{"r1"}));
  EXPECT_TRUE(*a.Enqueue({"r2", "t", 0, true})) << "claimed as it is queued again";
  a.Done({"r1", "t", 0, true});
  a.Done({"r2", "t", 0, true});
}

// Releases that fail the first `times` times, as while the database restarts.
class ReleaseBlinks : public testing::ForwardingAdmissionStore {
 public:
  ReleaseBlinks(store::AdmissionStore* inner, int times)
      : ForwardingAdmissionStore(inner), left_(times) {}
  absl::Status Release(const std::string& run_id) override {
    ++tries;
    if (left_.fetch_sub(1) > 0) return absl::UnavailableError("postgres: connection refused");
    return inner()->Release(run_id);
  }
  std::atomic<int> tries{0};

 private:
  std::atomic<int> left_;
};

// Issue 21 item 3: a release that met a store error was logged and dropped, leaving the
// tenant's slot taken for good (a concurrent_runs: 1 tenant could run nothing more). It is
// retried on the clock until it lands, and frees the slot once.
TEST(AdmissionTest, AReleaseThatMeetsAStoreErrorIsRetriedAndFreesTheSlotOnce) {
  testing::ScopedTempDir dir("sg-admission");
  testing::FakeClock clock;
  auto inner = *store::SqliteAdmissionStore::Open(dir.path() + "/state.db");
  ReleaseBlinks store(inner.get(), 2);
  SandboxBudget budget(4);
  AdmissionQueue a(/*max_running=*/4, 100, &budget, {&store, "a", &clock});
  ASSERT_TRUE(*a.Enqueue({"r1", "t", /*tenant_limit=*/1, true}));
  ASSERT_FALSE(*a.Enqueue({"r2", "t", 1, true})) << "t's one slot is r1's";
  std::thread done([&] { a.Done({"r1", "t", 1, true}); });
  for (int i = 0; i < 2 && clock.BlockUntilSettled(1); ++i) clock.Advance(kReleaseRetryMost);
  done.join();
  EXPECT_EQ(store.tries.load(), 3) << "two refused, the third landed";
  EXPECT_EQ(Ids(a.Admit()), (std::vector<std::string>{"r2"})) << "t's slot is free";
  EXPECT_FALSE(*a.Enqueue({"r3", "t", 1, true})) << "r2 holds t's one slot: freed once, not twice";
  a.Done({"r2", "t", 1, true});
  EXPECT_EQ(Ids(a.Admit()), (std::vector<std::string>{"r3"}));
  a.Done({"r3", "t", 1, true});
}

// The claim loop's wake-ups: a notification on the queue's channel ends the wait at once
// (the clock not moved); without one, the poll ends it at its interval and not 1 ns before.
TEST(AdmissionTest, ClaimWakeupsComeAtOnceOnANotificationAndAtThePollWithout) {
  testing::FakeClock clock;
  testing::FakeNotifier notifier;
  ClaimWakeups wakeups(&clock, &notifier, absl::Seconds(1), "replica-a");
  ASSERT_TRUE(wakeups.Start().ok());
  std::atomic<int> wakes{0};
  std::thread loop([&] {
    while (wakeups.Wait()) ++wakes;
  });
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  ASSERT_TRUE(notifier.Notify(store::kQueueChannel, "").ok());
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_EQ(wakes.load(), 1) << "at once: the clock did not move";
  ASSERT_TRUE(notifier.Notify(store::kQueueChannel, store::ClaimedFrom("replica-a")).ok());
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_EQ(wakes.load(), 2) << "a claim of a run replica-a queued: it lets go at once";
  ASSERT_TRUE(notifier.Notify(store::kQueueChannel, store::ClaimedFrom("replica-b")).ok());
  ASSERT_TRUE(notifier.Notify(store::kEventsChannel, "run-1 3").ok());
  clock.Advance(absl::Seconds(1) - absl::Nanoseconds(1));
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_EQ(wakes.load(), 2) << "another replica's claim, another channel; the poll is not due";
  clock.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  EXPECT_EQ(wakes.load(), 3) << "the poll, for a lost notification";
  wakeups.Stop();
  loop.join();
}

}  // namespace
}  // namespace sandgate::core
