// The AdmissionStore contract, run on every implementation, each with several store
// instances on one database as replicas have: claims go round robin across tenants; however
// many claimers race, no tenant passes its concurrent_runs quota; runs_per_minute and
// live_sessions are counted exactly, at the minute's edge and under concurrency.
#include "store/admission_store.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "store/postgres_admission_store.h"
#include "store/postgres_replica_store.h"
#include "store/postgres_store.h"
#include "store/sqlite_admission_store.h"
#include "store/sqlite_replica_store.h"
#include "store/sqlite_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/postgres_server.h"
#include "tests/store/old_state_file.h"
#include "tests/store/test_database.h"

namespace sandgate::store {
namespace {

constexpr absl::Duration kNs = absl::Nanoseconds(1);
const absl::Time kT0 = absl::FromUnixSeconds(1800000000);

// A database for one test; Connect() may be called several times: each is another replica.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::unique_ptr<AdmissionStore> Connect() = 0;
  // The run records (the daemon's Store) on the same database: a queue connected after this
  // finds them (AdmissionStore::Claim).
  virtual std::unique_ptr<Store> Records() = 0;
  // The lease table on the same database: a queue connected after this frees a replica's
  // slots in the commit that settles its takeover (Store::SettleTakeover).
  virtual std::unique_ptr<ReplicaStore> Leases() = 0;
};

class SqliteBackend : public Backend {
 public:
  std::unique_ptr<AdmissionStore> Connect() override {
    auto s = SqliteAdmissionStore::Open(dir_.path() + "/state.db");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<Store> Records() override {
    auto s = SqliteStore::Open(dir_.path() + "/state.db");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<ReplicaStore> Leases() override {
    auto s = SqliteReplicaStore::Open(dir_.path() + "/state.db");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

 private:
  testing::ScopedTempDir dir_{"sg-admission"};
};

// One database on the binary's shared throwaway server; each Connect a pool of its own.
class PostgresBackend : public Backend {
 public:
  std::unique_ptr<AdmissionStore> Connect() override {
    PostgresDatabase* pool = db_.NewPool(4);
    if (pool == nullptr) return nullptr;
    auto s = PostgresAdmissionStore::Create(pool);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<Store> Records() override { return db_.OpenStore(); }
  std::unique_ptr<ReplicaStore> Leases() override {
    PostgresDatabase* pool = db_.NewPool(2);
    if (pool == nullptr) return nullptr;
    auto s = PostgresReplicaStore::Create(pool);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

 private:
  testing::TestDatabase db_;  // its pools outlive the stores (fixture order)
};

QueuedRun Waiter(const std::string& id, const std::string& tenant, uint32_t limit = 0,
                 bool needs_sandbox = true, const std::string& only_replica = "") {
  QueuedRun r;
  r.run_id = id;
  r.tenant = tenant;
  r.tenant_limit = limit;
  r.needs_sandbox = needs_sandbox;
  r.only_replica = only_replica;
  r.enqueued_by = "a";
  r.enqueued_at = kT0;
  return r;
}

// The id claimed, "" for none.
std::string ClaimId(AdmissionStore& s, const std::string& replica, bool sandbox_room = true) {
  absl::StatusOr<std::optional<QueuedRun>> c = s.Claim(replica, sandbox_room);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() && c->has_value() ? (*c)->run_id : "";
}

using BackendFactory = std::unique_ptr<Backend> (*)();

class AdmissionStoreContract : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    backend_ = GetParam()();
    a_ = backend_->Connect();
    b_ = backend_->Connect();
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<AdmissionStore> a_, b_;  // replica "a"'s and replica "b"'s connections
};

TEST_P(AdmissionStoreContract, ClaimsGoRoundRobinAcrossTenantsWhicheverReplicaClaims) {
  for (const char* id : {"a1", "a2", "a3"}) ASSERT_TRUE(a_->Enqueue(Waiter(id, "ta"), 0, {}).ok());
  ASSERT_TRUE(b_->Enqueue(Waiter("b1", "tb"), 0, {}).ok());
  ASSERT_TRUE(a_->Enqueue(Waiter("c1", "tc"), 0, {}).ok());
  absl::StatusOr<WaitingRuns> waiting = b_->Waiting();
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->runs.size(), 5u);
  EXPECT_EQ(waiting->last_tenant, "");
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) order.push_back(ClaimId(i % 2 ? *b_ : *a_, i % 2 ? "b" : "a"));
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "c1", "a2", "a3", ""}));
  EXPECT_EQ(*a_->WaitingCount(), 0u);
  EXPECT_EQ(b_->Waiting()->last_tenant, "ta");
}

// Issue 21: the claimer wrote its name into the run's record a few store round trips after
// its claim; a claimer that died in between left a QUEUED run that no takeover found (listed
// under its queuer, out of the queue), and a cancel polled until the record moved. The claim
// makes the record the claimer's in its own transaction.
TEST_P(AdmissionStoreContract, AClaimMakesTheRunsRecordTheClaimersInItsTransaction) {
  std::unique_ptr<Store> records = backend_->Records();
  ASSERT_NE(records, nullptr);
  std::unique_ptr<AdmissionStore> a = backend_->Connect();
  std::unique_ptr<AdmissionStore> b = backend_->Connect();
  for (const char* id : {"r1", "r2"}) {
    v1::Run run;
    run.set_id(id);
    run.set_tenant("ta");
    run.set_status(v1::RUN_STATUS_QUEUED);
    run.set_replica("a");
    ASSERT_TRUE(records->CreateRun(run, "").ok());
    ASSERT_TRUE(a->Enqueue(Waiter(id, "ta"), 0, {}).ok());
  }
  EXPECT_EQ(ClaimId(*b, "b"), "r1");
  EXPECT_EQ(records->GetRun("r1")->replica(), "b");
  std::vector<v1::Run> bs = *records->ListUnfinishedRunsOf("b");
  ASSERT_EQ(bs.size(), 1u) << "found under its claimer by the owner column";
  EXPECT_EQ(bs[0].id(), "r1");
  EXPECT_EQ(records->GetRun("r2")->replica(), "a") << "still waiting: its queuer's";
}

// Issue 21 item 3: the finish stored the final record, then released the slot in a second
// transaction; a store error between the two left the slot taken. The write of the final
// record frees it in the same transaction, once.
TEST_P(AdmissionStoreContract, TheFinalRecordFreesItsRunsSlotInTheSameTransaction) {
  std::unique_ptr<Store> records = backend_->Records();
  ASSERT_NE(records, nullptr);
  std::unique_ptr<AdmissionStore> a = backend_->Connect();
  v1::Run run;
  run.set_id("r1");
  run.set_tenant("ta");
  run.set_status(v1::RUN_STATUS_QUEUED);
  ASSERT_TRUE(records->CreateRun(run, "").ok());
  for (const char* id : {"r1", "r2", "r3"}) {
    ASSERT_TRUE(a->Enqueue(Waiter(id, "ta", /*limit=*/1), 0, {}).ok());
  }
  EXPECT_EQ(ClaimId(*a, "a"), "r1");
  run.set_status(v1::RUN_STATUS_RUNNING);
  ASSERT_TRUE(records->PutRun(run).ok());
  EXPECT_EQ(ClaimId(*a, "a"), "") << "r1 runs: ta's one slot is taken";
  run.set_status(v1::RUN_STATUS_FAILED);
  ASSERT_TRUE(records->PutRun(run).ok());
  EXPECT_EQ(ClaimId(*a, "a"), "r2") << "the final record freed the slot";
  ASSERT_TRUE(a->Release("r1").ok()) << "nothing left to free";
  ASSERT_TRUE(records->PutRun(run).ok()) << "written again: final already";
  EXPECT_EQ(ClaimId(*a, "a"), "") << "freed once: r2 holds the slot";
}

// Issue 21 ("a takeover commits once"): the commit that settles a lost replica's takeover
// (its failed runs with their run.finished, its cleanup marked done) frees its run slots and
// session slots, and puts the runs it had claimed but not started back in their place;
// refused (the claim is another's), it changes nothing. Before, the slots were a transaction
// of their own, made before the runs were failed.
TEST_P(AdmissionStoreContract, ATakeoversCommitFreesTheLostReplicasSlotsOrNothing) {
  std::unique_ptr<Store> records = backend_->Records();
  std::unique_ptr<ReplicaStore> leases = backend_->Leases();
  ASSERT_NE(records, nullptr);
  ASSERT_NE(leases, nullptr);
  std::unique_ptr<AdmissionStore> q = backend_->Connect();
  Lease a;
  a.replica_id = "a";
  a.expires_at = kT0 + absl::Seconds(1);
  ASSERT_TRUE(leases->Join(a, kT0).ok());
  v1::Run started;
  started.set_id("started");
  started.set_tenant("ta");
  started.set_status(v1::RUN_STATUS_RUNNING);
  started.set_replica("a");
  ASSERT_TRUE(records->CreateRun(started, "").ok());
  ASSERT_TRUE(q->Enqueue(Waiter("started", "ta", 2), 0, {}).ok());
  ASSERT_TRUE(q->Enqueue(Waiter("unstarted", "ta", 2), 0, {}).ok());
  ASSERT_TRUE(q->Enqueue(Waiter("kept", "ta", 2, /*needs_sandbox=*/false, "a"), 0, {}).ok());
  ASSERT_EQ(ClaimId(*q, "a"), "started");
  ASSERT_EQ(ClaimId(*q, "a"), "unstarted");
  ASSERT_TRUE(*q->TakeSessionSlot("ta", "s-a", "a", 1));
  ASSERT_TRUE(*leases->ClaimTakeover("a", "b", a.expires_at, a.expires_at + absl::Minutes(1)));
  v1::Run failed = started;
  failed.set_status(v1::RUN_STATUS_FAILED);
  v1::Event finished;
  finished.set_run_id("started");
  finished.set_seq(1);
  finished.set_type("run.finished");

  absl::Status refused = records->SettleTakeover({finished}, {failed}, {}, "a", "c");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << "c holds no claim";
  EXPECT_EQ(records->GetRun("started")->status(), v1::RUN_STATUS_RUNNING) << "nothing stored";
  EXPECT_EQ(*records->LastSeq("started"), 0);
  EXPECT_EQ((*q->Find("started"))->claimed_by, "a") << "nothing freed";
  EXPECT_EQ(ClaimId(*q, "b"), "") << "a's two runs hold ta's two slots";

  ASSERT_TRUE(records->SettleTakeover({finished}, {failed}, {}, "a", "b").ok());
  EXPECT_EQ(records->GetRun("started")->status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(*records->LastSeq("started"), 1);
  EXPECT_FALSE(q->Find("started")->has_value()) << "its slot went with its final record";
  EXPECT_FALSE(q->Find("kept")->has_value()) << "only a could start it";
  std::optional<QueuedRun> unstarted = *q->Find("unstarted");
  ASSERT_TRUE(unstarted.has_value());
  EXPECT_EQ(unstarted->claimed_by, "") << "a had not started it: it waits again";
  EXPECT_TRUE((*leases->ListLeases())[0].cleaned);
  EXPECT_EQ(ClaimId(*q, "b"), "unstarted") << "a's slots are free";
  EXPECT_TRUE(*q->TakeSessionSlot("ta", "s-b", "b", 1)) << "and its session's";
  EXPECT_EQ(records->SettleTakeover({}, {}, {}, "a", "b").code(),
            absl::StatusCode::kFailedPrecondition)
      << "done once";
}

TEST_P(AdmissionStoreContract, QuotaCountsClaimsOfEveryReplicaAndReleaseFreesTheSlot) {
  for (const char* id : {"a1", "a2", "a3"})
    ASSERT_TRUE(a_->Enqueue(Waiter(id, "ta", 2), 0, {}).ok());
  EXPECT_EQ(ClaimId(*a_, "a"), "a1");
  EXPECT_EQ(ClaimId(*b_, "b"), "a2");
  EXPECT_EQ(ClaimId(*b_, "b"), "") << "2 running in the gateway: the quota is reached";
  EXPECT_EQ(ClaimId(*a_, "a"), "");
  ASSERT_TRUE(a_->Release("a1").ok());
  ASSERT_TRUE(a_->Release("a1").ok()) << "twice is once";
  EXPECT_EQ(ClaimId(*b_, "b"), "a3");
  EXPECT_EQ(ClaimId(*b_, "b"), "");
}

TEST_P(AdmissionStoreContract, SandboxRoomAndKeptSessionOwnerDecideWhatAReplicaMayClaim) {
  ASSERT_TRUE(a_->Enqueue(Waiter("own", "ta"), 0, {}).ok());
  ASSERT_TRUE(a_->Enqueue(Waiter("kept", "tb", 0, /*needs_sandbox=*/false, "a"), 0, {}).ok());
  EXPECT_EQ(ClaimId(*b_, "b", /*sandbox_room=*/false), "") << "b has no sandbox, a has the session";
  EXPECT_EQ(ClaimId(*b_, "b", /*sandbox_room=*/true), "own");
  EXPECT_EQ(ClaimId(*b_, "b", /*sandbox_room=*/true), "");
  EXPECT_EQ(ClaimId(*a_, "a", /*sandbox_room=*/false), "kept");
}

TEST_P(AdmissionStoreContract, OnlyAWaitingRunIsRemovedAndTheQueueIsBounded) {
  ASSERT_TRUE(a_->Enqueue(Waiter("r1", "ta"), 2, {}).ok());
  ASSERT_TRUE(a_->Enqueue(Waiter("r2", "ta"), 2, {}).ok());
  absl::Status full = b_->Enqueue(Waiter("r3", "tb"), 2, {}).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("max_queued_runs 2"), absl::string_view::npos) << full;
  EXPECT_TRUE(b_->Enqueue(Waiter("r2", "ta"), 2, {}).ok()) << "queued again: keeps its place";
  EXPECT_EQ(*a_->WaitingCount(), 2u);
  EXPECT_EQ(ClaimId(*b_, "b"), "r1");
  EXPECT_FALSE(*a_->Remove("r1")) << "claimed: not waiting";
  EXPECT_TRUE(*a_->Remove("r2"));
  EXPECT_FALSE(*a_->Remove("r2"));
  EXPECT_EQ(ClaimId(*a_, "a"), "");
}

TEST_P(AdmissionStoreContract, ReleasingAReplicaFreesItsSlotsAndDropsRunsOnlyItCouldStart) {
  for (const char* id : {"a1", "a2", "a3"})
    ASSERT_TRUE(a_->Enqueue(Waiter(id, "ta", 2), 0, {}).ok());
  ASSERT_TRUE(a_->Enqueue(Waiter("kept", "tb", 0, false, "a"), 0, {}).ok());
  EXPECT_EQ(ClaimId(*a_, "a"), "a1");
  EXPECT_EQ(ClaimId(*a_, "a"), "kept");
  EXPECT_EQ(ClaimId(*a_, "a"), "a2");
  ASSERT_TRUE(*a_->TakeSessionSlot("ta", "s1", "a", 1));
  EXPECT_EQ(ClaimId(*b_, "b"), "");
  ASSERT_TRUE(b_->ReleaseReplica("a").ok());
  EXPECT_EQ(ClaimId(*b_, "b"), "a3");
  EXPECT_TRUE(*b_->TakeSessionSlot("ta", "s2", "b", 1)) << "a's session slot went with it";
}

// A run queued on a replica with room is claimed for it in the queueing transaction: no other
// replica's claim can take it first; over the tenant's gateway-wide quota it waits.
TEST_P(AdmissionStoreContract, EnqueueWithRoomClaimsForTheQueuerWithinItsTenantsQuota) {
  const RoomHere room{/*run_slot=*/true, /*sandbox=*/true};
  EXPECT_TRUE(*a_->Enqueue(Waiter("r1", "ta", 1), 0, room)) << "a has room: r1 is a's";
  EXPECT_EQ(ClaimId(*b_, "b"), "") << "claimed already: nothing for b";
  EXPECT_EQ(*b_->WaitingCount(), 0u);
  EXPECT_FALSE(*a_->Enqueue(Waiter("r2", "ta", 1), 0, room)) << "ta's quota of 1 is r1's";
  EXPECT_FALSE(*a_->Enqueue(Waiter("r3", "tb"), 0, RoomHere{})) << "no room: it waits";
  EXPECT_EQ(*b_->WaitingCount(), 2u);
  EXPECT_FALSE(*a_->Enqueue(Waiter("r3", "tb"), 0, room)) << "queued already: keeps its place";
  ASSERT_TRUE(a_->Release("r1").ok());
  EXPECT_EQ(ClaimId(*b_, "b"), "r3") << "ta was claimed last: tb is next";
  EXPECT_EQ(ClaimId(*b_, "b"), "r2") << "r1's slot is free again";
}

// The claim at queueing takes the run only when it is next in fair order for that replica: a
// run of another tenant ahead of it that the replica could start keeps its place; one it could
// not start (it needs a sandbox the replica has not) does not hold the new run back.
TEST_P(AdmissionStoreContract, EnqueueWithRoomDoesNotJumpTheQueue) {
  ASSERT_TRUE(a_->Enqueue(Waiter("b1", "tb"), 0, RoomHere{}).ok());
  EXPECT_FALSE(*a_->Enqueue(Waiter("c1", "tc"), 0, RoomHere{true, true}))
      << "b1 (tb, before tc) is ahead of it and a could start it";
  EXPECT_EQ(ClaimId(*a_, "a"), "b1");
  EXPECT_EQ(ClaimId(*a_, "a"), "c1");
  ASSERT_TRUE(a_->Enqueue(Waiter("a1", "ta"), 0, RoomHere{}).ok());  // tc claimed last: ta next
  EXPECT_TRUE(*a_->Enqueue(Waiter("k1", "tb", 0, /*needs_sandbox=*/false), 0,
                           RoomHere{true, /*sandbox=*/false}))
      << "a1 needs a sandbox a has not: k1 is next for a";
  EXPECT_EQ(ClaimId(*b_, "b"), "a1");
}

// However the queueing and other replicas' claims interleave, a run queued with room is the
// queuer's, never another's.
TEST_P(AdmissionStoreContract, AConcurrentClaimNeverTakesARunQueuedWithRoom) {
  constexpr int kRuns = 30;
  std::atomic<bool> done{false};
  std::atomic<int> taken_by_b{0};
  std::thread claimer([&] {
    while (!done.load()) {
      absl::StatusOr<std::optional<QueuedRun>> c = b_->Claim("b", true);
      ASSERT_TRUE(c.ok()) << c.status();
      if (c->has_value()) ++taken_by_b;
    }
  });
  int here = 0;
  for (int i = 0; i < kRuns; ++i) {
    const std::string id = "r" + std::to_string(i);
    absl::StatusOr<bool> claimed = a_->Enqueue(Waiter(id, "ta"), 0, RoomHere{true, true});
    ASSERT_TRUE(claimed.ok()) << claimed.status();
    here += *claimed;
    ASSERT_TRUE(a_->Release(id).ok());
  }
  done.store(true);
  claimer.join();
  EXPECT_EQ(here, kRuns);
  EXPECT_EQ(taken_by_b.load(), 0);
}

TEST_P(AdmissionStoreContract, RacingClaimersOfSeveralReplicasNeverPassATenantsQuota) {
  constexpr int kTenants = 3, kRunsEach = 30, kLimit = 2;
  std::vector<std::unique_ptr<AdmissionStore>> replicas;
  for (int i = 0; i < 3; ++i) replicas.push_back(backend_->Connect());
  for (int r = 0; r < kRunsEach; ++r) {
    for (int t = 0; t < kTenants; ++t) {
      const std::string tenant = "t" + std::to_string(t);
      ASSERT_TRUE(
          a_->Enqueue(Waiter(tenant + "-" + std::to_string(r), tenant, kLimit), 0, {}).ok());
    }
  }
  absl::Mutex mu;
  std::map<std::string, int> running, most;
  std::set<std::string> claimed;
  int duplicates = 0;
  std::atomic<int> done{0};
  // A store that loses a slot (counts a claim twice) would stall the queue: give up then.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  std::vector<std::thread> claimers;
  for (size_t i = 0; i < replicas.size() * 3; ++i) {
    AdmissionStore* s = replicas[i % replicas.size()].get();
    const std::string replica = "r" + std::to_string(i % replicas.size());
    claimers.emplace_back([&, s, replica] {
      while (done.load() < kTenants * kRunsEach && absl::Now() < give_up) {
        absl::StatusOr<std::optional<QueuedRun>> c = s->Claim(replica, true);
        ASSERT_TRUE(c.ok()) << c.status();
        if (!c->has_value()) {
          // Nothing this claimer may take yet: nine claimers spinning on two cores would
          // starve the ones holding a slot (SQLite's writers wait at most its 5 s busy
          // timeout), so an empty claim lets the others run first.
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          continue;
        }
        const QueuedRun run = **c;
        {
          absl::MutexLock lock(&mu);
          int& n = ++running[run.tenant];
          most[run.tenant] = std::max(most[run.tenant], n);
          if (!claimed.insert(run.run_id).second) ++duplicates;
        }
        std::this_thread::yield();  // the run "runs"; others claim meanwhile
        {
          absl::MutexLock lock(&mu);
          --running[run.tenant];
        }
        ASSERT_TRUE(s->Release(run.run_id).ok());
        ++done;
      }
    });
  }
  for (std::thread& t : claimers) t.join();
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(done.load(), kTenants * kRunsEach) << "every run claimed and released";
  EXPECT_EQ(claimed.size(), static_cast<size_t>(kTenants * kRunsEach));
  for (const auto& [tenant, n] : most) EXPECT_LE(n, kLimit) << tenant;
  EXPECT_EQ(most.size(), static_cast<size_t>(kTenants));
}

TEST_P(AdmissionStoreContract, RunsPerMinuteCountsEveryReplicasStartsExactlyToTheMinute) {
  EXPECT_EQ(*a_->CountStart("ta", 2, kT0), std::nullopt);
  EXPECT_EQ(*b_->CountStart("ta", 2, kT0 + absl::Seconds(10)), std::nullopt);
  EXPECT_EQ(*b_->CountStart("tb", 2, kT0 + absl::Seconds(10)), std::nullopt) << "another tenant";
  EXPECT_EQ(*a_->CountStart("ta", 2, kT0 + absl::Minutes(1) - kNs),
            std::optional<absl::Time>(kT0 + absl::Minutes(1)))
      << "1 ns before the first start leaves the window";
  EXPECT_EQ(*b_->CountStart("ta", 2, kT0 + absl::Minutes(1)), std::nullopt) << "at it";
  EXPECT_EQ(*a_->CountStart("ta", 2, kT0 + absl::Minutes(1)),
            std::optional<absl::Time>(kT0 + absl::Seconds(70)));
}

TEST_P(AdmissionStoreContract, RacingStartsAndSessionsOfSeveralReplicasPassNoQuota) {
  constexpr int kLimit = 5;
  std::vector<std::unique_ptr<AdmissionStore>> replicas;
  for (int i = 0; i < 3; ++i) replicas.push_back(backend_->Connect());
  std::atomic<int> starts{0}, sessions{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 12; ++i) {
    AdmissionStore* s = replicas[i % replicas.size()].get();
    threads.emplace_back([&, s, i] {
      for (int k = 0; k < 3; ++k) {
        absl::StatusOr<std::optional<absl::Time>> c = s->CountStart("ta", kLimit, kT0);
        ASSERT_TRUE(c.ok()) << c.status();
        if (!c->has_value()) ++starts;
        const std::string id = "s" + std::to_string(i) + "-" + std::to_string(k);
        absl::StatusOr<bool> slot = s->TakeSessionSlot("ta", id, "r", kLimit);
        ASSERT_TRUE(slot.ok()) << slot.status();
        if (*slot) ++sessions;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(starts.load(), kLimit);
  EXPECT_EQ(sessions.load(), kLimit);
}

TEST_P(AdmissionStoreContract, AClosedSessionFreesItsSlot) {
  ASSERT_TRUE(*a_->TakeSessionSlot("ta", "s1", "a", 1));
  EXPECT_FALSE(*b_->TakeSessionSlot("ta", "s2", "b", 1));
  EXPECT_TRUE(*b_->TakeSessionSlot("tb", "s3", "b", 1)) << "another tenant";
  ASSERT_TRUE(a_->ReleaseSessionSlot("s1").ok());
  EXPECT_TRUE(*b_->TakeSessionSlot("ta", "s2", "b", 1));
}

// A state file made by an older version, whose queue table lacks the pin column (or has one:
// pins are gone, the column is ignored): it opens, twice, and its waiting rows are claimed.
TEST(SqliteAdmissionStoreTest, AnOlderFilesWaitingRunsAreClaimed) {
  testing::ScopedTempDir dir{"sg-admission-old"};
  const std::string path = dir.path() + "/state.db";
  ASSERT_EQ(
      WriteOldStateFile(path,
                        "CREATE TABLE admission_queue (run_id TEXT PRIMARY KEY, tenant TEXT NOT "
                        "NULL, needs_sandbox INTEGER NOT NULL, only_replica TEXT NOT NULL, "
                        "enqueued_by TEXT NOT NULL, enqueued_at INTEGER NOT NULL, seq INTEGER NOT "
                        "NULL, claimed_by TEXT NOT NULL DEFAULT ''); INSERT INTO admission_queue "
                        "VALUES('old', 'ta', 1, '', 'a', 0, 1, '')"),
      absl::OkStatus());
  absl::StatusOr<std::unique_ptr<SqliteAdmissionStore>> a = SqliteAdmissionStore::Open(path);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<SqliteAdmissionStore>> b = SqliteAdmissionStore::Open(path);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*a)->Enqueue(Waiter("new", "ta"), 0, {}).ok());
  EXPECT_EQ(ClaimId(**b, "b"), "old");
  EXPECT_EQ(ClaimId(**b, "b"), "new");
}

INSTANTIATE_TEST_SUITE_P(Postgres, AdmissionStoreContract,
                         ::testing::Values(+[]() -> std::unique_ptr<Backend> {
                           return std::make_unique<PostgresBackend>();
                         }),
                         [](const auto&) { return std::string("pools"); });

INSTANTIATE_TEST_SUITE_P(Sqlite, AdmissionStoreContract,
                         ::testing::Values(+[]() -> std::unique_ptr<Backend> {
                           return std::make_unique<SqliteBackend>();
                         }),
                         [](const auto&) { return std::string("connections"); });

}  // namespace
}  // namespace sandgate::store
