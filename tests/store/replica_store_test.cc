// The ReplicaStore contract, run on every implementation: a lease is claimed for cleanup
// only once it has ended, by exactly one of the replicas racing for it, and a restarted
// replica waits for a cleanup under way. Each backend gives two instances on one database,
// as two replicas have. Also fencing (Store::FenceWrites) on the store of each backend: a
// taken-over replica's writes are refused, the winner's pass, and a takeover racing a late
// write leaves the failure in place.
#include "store/replica_store.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "store/postgres_replica_store.h"
#include "store/postgres_store.h"
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
const absl::Duration kPeriod = absl::Seconds(15);

// A database for one test; Connect() may be called several times: each is another replica.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::unique_ptr<ReplicaStore> Connect() = 0;
  // Another Store instance on the same database (a replica's own).
  virtual std::unique_ptr<Store> OpenStore() = 0;
};

class SqliteBackend : public Backend {
 public:
  std::unique_ptr<ReplicaStore> Connect() override {
    auto s = SqliteReplicaStore::Open(dir_.path() + "/state.db");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<Store> OpenStore() override {
    auto s = SqliteStore::Open(dir_.path() + "/state.db");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

 private:
  testing::ScopedTempDir dir_{"sg-leases"};
};

// One database on the binary's shared throwaway server; each Connect a pool of its own.
class PostgresBackend : public Backend {
 public:
  std::unique_ptr<ReplicaStore> Connect() override {
    PostgresDatabase* pool = db_.NewPool(2);
    if (pool == nullptr) return nullptr;
    auto s = PostgresReplicaStore::Create(pool);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<Store> OpenStore() override { return db_.OpenStore(); }
  ~PostgresBackend() override = default;

 private:
  testing::TestDatabase db_;  // its pools outlive the stores (fixture order)
};

// A lease held by its own replica.
Lease Own(const std::string& id, const std::string& address, absl::Time expires_at) {
  Lease lease;
  lease.replica_id = id;
  lease.address = address;
  lease.expires_at = expires_at;
  return lease;
}

using BackendFactory = std::unique_ptr<Backend> (*)();

class ReplicaStoreContract : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    backend_ = GetParam()();
    a_ = backend_->Connect();
    b_ = backend_->Connect();
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  // The commit that settles `by`'s takeover of `dead` marks its cleanup done.
  absl::Status FinishTakeover(const std::string& dead, const std::string& by) {
    if (settler_ == nullptr) settler_ = backend_->OpenStore();
    return settler_->SettleTakeover({}, {}, {}, dead, by);
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ReplicaStore> a_, b_;  // replica "a"'s and replica "b"'s connections
  std::unique_ptr<Store> settler_;
};

TEST_P(ReplicaStoreContract, JoinedLeaseIsSeenByOthersAndRenewed) {
  ASSERT_TRUE(a_->Join(Own("a", "tcp:127.0.0.1:7001", kT0 + kPeriod), kT0).ok());
  ASSERT_TRUE(a_->Renew("a", 1, kT0 + 2 * kPeriod).ok());
  absl::StatusOr<std::vector<Lease>> leases = b_->ListLeases();
  ASSERT_TRUE(leases.ok()) << leases.status();
  ASSERT_EQ(leases->size(), 1u);
  EXPECT_EQ((*leases)[0].replica_id, "a");
  EXPECT_EQ((*leases)[0].address, "tcp:127.0.0.1:7001");
  EXPECT_EQ((*leases)[0].expires_at, kT0 + 2 * kPeriod);
  EXPECT_EQ((*leases)[0].taken_over_by, "");
  EXPECT_EQ(a_->Renew("nobody", 1, kT0).code(), absl::StatusCode::kNotFound);
}

TEST_P(ReplicaStoreContract, RenewalAtAnEpochTheRowNoLongerHoldsIsRefused) {
  ASSERT_TRUE(a_->Join(Own("a", "", kT0 + kPeriod), kT0).ok());
  absl::StatusOr<int64_t> again = b_->Join(Own("a", "", kT0 + kPeriod), kT0);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(*again, 2) << "another process, same id";
  absl::Status stale = a_->Renew("a", 1, kT0 + 2 * kPeriod);
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_NE(stale.message().find("joined again by another process (epoch 2; this process holds "
                                 "epoch 1)"),
            absl::string_view::npos)
      << stale;
  EXPECT_EQ((*b_->ListLeases())[0].expires_at, kT0 + kPeriod) << "the stale renewal moved nothing";
  EXPECT_TRUE(b_->Renew("a", 2, kT0 + 2 * kPeriod).ok());
}

TEST_P(ReplicaStoreContract, ClaimedNotBeforeTheLeaseEndsAndAtIt) {
  ASSERT_TRUE(a_->Join(Own("a", "", kT0 + kPeriod), kT0).ok());
  const absl::Time end = kT0 + kPeriod;
  EXPECT_FALSE(*b_->ClaimTakeover("a", "b", end - kNs, end + kPeriod)) << "1 ns before the end";
  EXPECT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod)) << "at the end";
  EXPECT_FALSE(*a_->ClaimTakeover("a", "c", end, end + kPeriod)) << "claimed once only";
  absl::Status renew = a_->Renew("a", 1, end + kPeriod);
  EXPECT_EQ(renew.code(), absl::StatusCode::kFailedPrecondition) << renew;
  EXPECT_NE(renew.message().find("taken over by replica b"), absl::string_view::npos) << renew;
}

TEST_P(ReplicaStoreContract, RacingClaimersWinOnceOnly) {
  const absl::Time end = kT0 + kPeriod;
  for (int round = 0; round < 20; ++round) {
    const std::string dead = "dead-" + std::to_string(round);
    ASSERT_TRUE(a_->Join(Own(dead, "", end), kT0).ok());
    std::atomic<int> wins{0};
    std::vector<std::thread> claimers;
    for (ReplicaStore* s : {a_.get(), b_.get(), a_.get(), b_.get()}) {
      claimers.emplace_back([&, s, i = claimers.size()] {
        absl::StatusOr<bool> won =
            s->ClaimTakeover(dead, "claimer-" + std::to_string(i), end, end + kPeriod);
        EXPECT_TRUE(won.ok()) << won.status();
        if (won.ok() && *won) ++wins;
      });
    }
    for (std::thread& t : claimers) t.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
  }
}

TEST_P(ReplicaStoreContract, RestartedReplicaWaitsForTheCleanupThenRejoins) {
  const absl::Time end = kT0 + kPeriod;
  ASSERT_TRUE(a_->Join(Own("a", "", end), kT0).ok());
  ASSERT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod));
  absl::Status early = a_->Join(Own("a", "", end + 2 * kPeriod), end + kNs).status();
  EXPECT_EQ(early.code(), absl::StatusCode::kUnavailable) << early;
  EXPECT_NE(early.message().find("replica b is cleaning up after replica a"),
            absl::string_view::npos)
      << early;
  ASSERT_TRUE(FinishTakeover("a", "b").ok());
  EXPECT_FALSE(*b_->ClaimTakeover("a", "c", end + kPeriod, end + 2 * kPeriod))
      << "a cleaned-up lease is not claimed again";
  absl::StatusOr<int64_t> epoch = a_->Join(Own("a", "", end + 2 * kPeriod), end + kNs);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, 2) << "one more than the first join's";
  EXPECT_TRUE(a_->Renew("a", 2, end + 3 * kPeriod).ok()) << "its own again";
}

TEST_P(ReplicaStoreContract, ClaimOfADeadClaimerIsTakenOverWhenItEnds) {
  const absl::Time end = kT0 + kPeriod;
  ASSERT_TRUE(a_->Join(Own("a", "", end), kT0).ok());
  ASSERT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod));
  EXPECT_FALSE(*a_->ClaimTakeover("a", "c", end + kPeriod - kNs, end + 2 * kPeriod));
  EXPECT_TRUE(*a_->ClaimTakeover("a", "c", end + kPeriod, end + 2 * kPeriod));
  EXPECT_EQ(FinishTakeover("a", "b").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(FinishTakeover("a", "c").ok());
}

INSTANTIATE_TEST_SUITE_P(Postgres, ReplicaStoreContract,
                         ::testing::Values(+[]() -> std::unique_ptr<Backend> {
                           return std::make_unique<PostgresBackend>();
                         }),
                         [](const auto&) { return std::string("two_pools"); });

INSTANTIATE_TEST_SUITE_P(Sqlite, ReplicaStoreContract,
                         ::testing::Values(+[]() -> std::unique_ptr<Backend> {
                           return std::make_unique<SqliteBackend>();
                         }),
                         [](const auto&) { return std::string("two_connections"); });

v1::Run RunOf(const std::string& id, const std::string& replica, v1::RunStatus status,
              const std::string& reason = "") {
  v1::Run run;
  run.set_id(id);
  run.set_tenant("t");
  run.set_replica(replica);
  run.set_status(status);
  run.set_status_reason(reason);
  return run;
}

v1::Event EventOf(const std::string& run_id, int64_t seq) {
  v1::Event e;
  e.set_run_id(run_id);
  e.set_seq(seq);
  return e;
}

// Replicas "a" and "b" joined, each with its own store fenced at its epoch; a's lease ends
// at kT0 + kPeriod.
class FencingContract : public ReplicaStoreContract {
 protected:
  void SetUp() override {
    ReplicaStoreContract::SetUp();
    absl::StatusOr<int64_t> ea = a_->Join(Own("a", "", kT0 + kPeriod), kT0);
    absl::StatusOr<int64_t> eb = b_->Join(Own("b", "", kT0 + 3 * kPeriod), kT0);
    ASSERT_TRUE(ea.ok() && eb.ok()) << ea.status() << eb.status();
    EXPECT_EQ(*ea, 1) << "a new row's first epoch";
    store_a_ = backend_->OpenStore();
    store_b_ = backend_->OpenStore();
    ASSERT_NE(store_a_, nullptr);
    ASSERT_NE(store_b_, nullptr);
    store_a_->FenceWrites("a", *ea);
    store_b_->FenceWrites("b", *eb);
  }
  std::unique_ptr<Store> store_a_, store_b_;
};

TEST_P(FencingContract, TakenOverOwnersWritesAreRefusedAndTheWinnersPass) {
  ASSERT_TRUE(store_a_->CreateRun(RunOf("r1", "a", v1::RUN_STATUS_QUEUED), "").ok());
  ASSERT_TRUE(store_a_->PutRun(RunOf("r1", "a", v1::RUN_STATUS_RUNNING)).ok()) << "a holds it";
  ASSERT_TRUE(store_a_->AppendEvents({EventOf("r1", 1)}).ok());
  v1::Session session;
  session.set_id("s1");
  session.set_tenant("t");
  session.set_replica("a");
  session.set_status(v1::SESSION_STATUS_ACTIVE);
  ASSERT_TRUE(store_a_->CreateSession(session, "").ok());
  ASSERT_TRUE(store_a_->PutSession(session).ok());

  const absl::Time end = kT0 + kPeriod;
  ASSERT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod));
  absl::Status late = store_a_->PutRun(RunOf("r1", "a", v1::RUN_STATUS_SUCCEEDED));
  EXPECT_TRUE(IsFencedWrite(late)) << late;
  EXPECT_NE(
      late.message().find("replica a was taken over by replica b at " + absl::FormatTime(end)),
      absl::string_view::npos)
      << late;
  EXPECT_NE(late.message().find("run r1"), absl::string_view::npos) << late;
  absl::Status event = store_a_->AppendEvents({EventOf("r1", 2)});
  EXPECT_TRUE(IsFencedWrite(event)) << event;
  EXPECT_TRUE(IsFencedWrite(store_a_->AppendEvent(EventOf("r1", 2)))) << "one event alike";
  EXPECT_TRUE(IsFencedWrite(store_a_->AppendEventsWithRuns(
      {EventOf("r1", 2)}, {RunOf("r1", "a", v1::RUN_STATUS_SUCCEEDED)})))
      << "a final record with its event alike";
  session.set_status(v1::SESSION_STATUS_CLOSED);
  EXPECT_TRUE(IsFencedWrite(store_a_->PutSession(session)));

  // The winner fails a's run and ends its session; both pass, over a's rows.
  ASSERT_TRUE(store_b_
                  ->AppendEventsWithRuns({EventOf("r1", 2)},
                                         {RunOf("r1", "a", v1::RUN_STATUS_FAILED, "a was lost")})
                  .ok());
  session.set_status(v1::SESSION_STATUS_EXPIRED);
  ASSERT_TRUE(store_b_->PutSession(session).ok());
  EXPECT_TRUE(IsFencedWrite(store_a_->PutRun(RunOf("r1", "a", v1::RUN_STATUS_SUCCEEDED))));
  v1::Run stored = *store_a_->GetRun("r1");
  EXPECT_EQ(stored.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(stored.status_reason(), "a was lost");
  EXPECT_EQ(*store_a_->LastSeq("r1"), 2);
  EXPECT_EQ(store_a_->GetSession("s1")->status(), v1::SESSION_STATUS_EXPIRED);
  EXPECT_TRUE(store_b_->ListUnfinishedRunsOf("a")->empty());
  EXPECT_TRUE(store_b_->ListLiveSessionsOf("a")->empty());
}

// Issue 21: a replica taken over (its clock stepped, it was frozen) but not yet told went on
// accepting RunAnalysis and CreateSession: their new records, made after the takeover had
// settled everything of it, were nobody's to settle and stayed QUEUED or ACTIVE for good.
// A new record is fenced like an update: refused once the writer was taken over.
TEST_P(FencingContract, ATakenOverReplicaCreatesNoNewRecord) {
  const absl::Time end = kT0 + kPeriod;
  ASSERT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod));
  absl::Status run = store_a_->CreateRun(RunOf("late", "a", v1::RUN_STATUS_QUEUED), "sha");
  EXPECT_TRUE(IsFencedWrite(run)) << run;
  v1::Session session;
  session.set_id("s-late");
  session.set_tenant("t");
  session.set_replica("a");
  session.set_status(v1::SESSION_STATUS_ACTIVE);
  absl::Status created = store_a_->CreateSession(session, "sha");
  EXPECT_TRUE(IsFencedWrite(created)) << created;
  EXPECT_EQ(store_b_->GetRun("late").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_b_->GetSession("s-late").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_b_->CreateRun(RunOf("fresh", "b", v1::RUN_STATUS_QUEUED), "sha").ok())
      << "the live replica's pass";
}

TEST_P(FencingContract, RejoinedReplicaWritesAtItsNewEpochOnlyAndNotOverAnothersRun) {
  const absl::Time end = kT0 + kPeriod;
  ASSERT_TRUE(store_a_->CreateRun(RunOf("queued", "a", v1::RUN_STATUS_QUEUED), "").ok());
  ASSERT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod));
  // The winner takes a's queued run as its own.
  ASSERT_TRUE(store_b_->PutRun(RunOf("queued", "b", v1::RUN_STATUS_QUEUED)).ok());
  ASSERT_TRUE(store_b_->PutRun(RunOf("started", "b", v1::RUN_STATUS_RUNNING)).ok());
  ASSERT_TRUE(FinishTakeover("a", "b").ok());
  absl::StatusOr<int64_t> epoch = a_->Join(Own("a", "", end + 2 * kPeriod), end);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  ASSERT_EQ(*epoch, 2);

  std::unique_ptr<Store> old_a = backend_->OpenStore();  // a write still under epoch 1
  old_a->FenceWrites("a", 1);
  absl::Status stale = old_a->PutRun(RunOf("fresh", "a", v1::RUN_STATUS_RUNNING));
  EXPECT_TRUE(IsFencedWrite(stale)) << stale;
  EXPECT_NE(stale.message().find("joined again (lease epoch 2)"), absl::string_view::npos) << stale;

  store_a_->FenceWrites("a", *epoch);
  EXPECT_TRUE(store_a_->PutRun(RunOf("fresh", "a", v1::RUN_STATUS_RUNNING)).ok()) << "its own";
  EXPECT_TRUE(store_a_->AppendEvents({EventOf("fresh", 1)}).ok());
  absl::Status theirs = store_a_->PutRun(RunOf("started", "a", v1::RUN_STATUS_FAILED));
  EXPECT_TRUE(IsFencedWrite(theirs)) << theirs;
  EXPECT_NE(theirs.message().find("run started belongs to replica b, not a"),
            absl::string_view::npos)
      << theirs;
  std::vector<v1::Run> of_b = *store_a_->ListUnfinishedRunsOf("b");
  ASSERT_EQ(of_b.size(), 2u) << "by the owner column";
  EXPECT_EQ(store_a_->ListUnfinishedRunsOf("a")->size(), 1u);
  // A waiting run is whoever claims it from the shared queue (the claim is exclusive there):
  // the claimer records itself as its owner over the replica that queued it.
  EXPECT_TRUE(store_a_->PutRun(RunOf("queued", "a", v1::RUN_STATUS_RUNNING)).ok());
  EXPECT_EQ(store_a_->ListUnfinishedRunsOf("a")->size(), 2u);
  EXPECT_EQ(store_a_->ListUnfinishedRunsOf("b")->size(), 1u);
}

TEST_P(FencingContract, TakeoverRacingALateWriteLeavesTheFailure) {
  ASSERT_TRUE(store_a_->CreateRun(RunOf("r1", "a", v1::RUN_STATUS_RUNNING), "").ok());
  // a keeps writing its run as it goes on; b claims a's lease and fails the run meanwhile.
  std::atomic<bool> failed_by_b{false};
  std::atomic<int> writes_after{0};
  std::thread late([&] {
    for (int i = 0; i < 100000; ++i) {
      const bool after = failed_by_b.load();
      v1::Run run = RunOf("r1", "a", v1::RUN_STATUS_RUNNING, "write " + std::to_string(i));
      absl::Status st = store_a_->PutRun(run);
      if (!st.ok()) {
        EXPECT_TRUE(IsFencedWrite(st)) << st;
        return;
      }
      if (after && ++writes_after > 50) return;  // not fenced: it would go on forever
    }
  });
  const absl::Time end = kT0 + kPeriod;
  ASSERT_TRUE(*b_->ClaimTakeover("a", "b", end, end + kPeriod));
  ASSERT_TRUE(store_b_->PutRun(RunOf("r1", "a", v1::RUN_STATUS_FAILED, "a was lost")).ok());
  failed_by_b = true;
  late.join();
  EXPECT_EQ(writes_after.load(), 0);
  v1::Run stored = *store_b_->GetRun("r1");
  EXPECT_EQ(stored.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(stored.status_reason(), "a was lost");
}

// Issue 21: a run queued on a and claimed by b is b's from the claim's commit (the claim
// makes its record b's, AdmissionStore::Claim). An event a appends to its log after that is
// refused, so b, continuing the log from its last stored seq, never collides with one of a's
// (before, pins in the queue kept b from claiming while a wrote; now the append itself checks
// the log's owner). The same for a kept session's own log; a batch is whole or refused.
TEST_P(FencingContract, AnAppendToALogAnotherReplicaOwnsIsRefused) {
  ASSERT_TRUE(store_a_->CreateRun(RunOf("r1", "a", v1::RUN_STATUS_QUEUED), "").ok());
  ASSERT_TRUE(store_a_->CreateRun(RunOf("mine", "a", v1::RUN_STATUS_RUNNING), "").ok());
  ASSERT_TRUE(store_a_->AppendEvents({EventOf("r1", 1)}).ok()) << "a's while it is a's";
  ASSERT_TRUE(store_b_->PutRun(RunOf("r1", "b", v1::RUN_STATUS_QUEUED)).ok()) << "b claims it";
  absl::Status late = store_a_->AppendEvents({EventOf("r1", 2)});
  EXPECT_TRUE(IsFencedWrite(late)) << late;
  EXPECT_NE(late.message().find("the log of r1 belongs to replica b, not a"),
            absl::string_view::npos)
      << late;
  EXPECT_TRUE(IsFencedWrite(store_a_->AppendEvents({EventOf("mine", 1), EventOf("r1", 2)})));
  EXPECT_EQ(*store_a_->LastSeq("mine"), 0) << "a refused batch stores none of its events";
  EXPECT_TRUE(store_a_->AppendEvents({EventOf("mine", 1)}).ok());
  ASSERT_TRUE(store_b_->AppendEvents({EventOf("r1", 2)}).ok()) << "b continues the log";

  v1::Session session;
  session.set_id("s1");
  session.set_tenant("t");
  session.set_replica("b");
  session.set_status(v1::SESSION_STATUS_ACTIVE);
  ASSERT_TRUE(store_b_->CreateSession(session, "").ok());
  EXPECT_TRUE(IsFencedWrite(store_a_->AppendEvents({EventOf("s1", 1)})));
  EXPECT_TRUE(store_b_->AppendEvents({EventOf("s1", 1)}).ok());
}

// The queuer appending its run's events while another replica claims it: whichever commits
// first, the claimer's first event follows the last one the queuer stored, and nothing of the
// queuer's lands after the claim (a concurrent append either holds the claim back until it
// commits, or sees it and is refused).
TEST_P(FencingContract, AClaimRacingTheQueuersAppendsLeavesADenseLog) {
  ASSERT_TRUE(store_a_->CreateRun(RunOf("r1", "a", v1::RUN_STATUS_QUEUED), "").ok());
  std::atomic<bool> claimed{false};
  std::atomic<int> appends_after{0};
  std::thread queuer([&] {
    for (int64_t seq = 1; seq < 100000; ++seq) {
      const bool after = claimed.load();
      absl::Status st = store_a_->AppendEvents({EventOf("r1", seq)});
      if (!st.ok()) {
        EXPECT_TRUE(IsFencedWrite(st)) << st;
        return;
      }
      if (after && ++appends_after > 50) return;  // not refused: it would go on forever
    }
  });
  while (*store_b_->LastSeq("r1") < 5) {
  }  // a has appended some
  ASSERT_TRUE(store_b_->PutRun(RunOf("r1", "b", v1::RUN_STATUS_RUNNING)).ok()) << "b claims it";
  claimed = true;
  const int64_t last = *store_b_->LastSeq("r1");
  absl::Status first = store_b_->AppendEvents({EventOf("r1", last + 1)});
  EXPECT_TRUE(first.ok()) << "b's first event collided with one of a's: " << first;
  queuer.join();
  EXPECT_EQ(appends_after.load(), 0);
  EXPECT_GT(last, 0);
  EXPECT_EQ(*store_b_->LastSeq("r1"), last + 1) << "nothing of a's after b's";
}

// A lease table made before epochs: opening it adds the columns, and a join counts from 0.
TEST(SqliteReplicaStoreTest, AnOlderLeaseTableGainsTheEpochColumns) {
  testing::ScopedTempDir dir("sg-old-leases");
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.path() + "/state.db";
  ASSERT_EQ(
      WriteOldStateFile(path,
                        "CREATE TABLE replica_leases (id TEXT PRIMARY KEY, address TEXT NOT NULL, "
                        "expires_at INTEGER NOT NULL, taken_over_by TEXT NOT NULL DEFAULT '', "
                        "claim_until INTEGER NOT NULL DEFAULT 0, cleaned INTEGER NOT NULL "
                        "DEFAULT 0); INSERT INTO replica_leases(id, address, expires_at) "
                        "VALUES('a', '', 0);"),
      absl::OkStatus());
  for (int open = 0; open < 2; ++open) {  // the second finds the columns there
    auto leases = SqliteReplicaStore::Open(path);
    ASSERT_TRUE(leases.ok()) << leases.status();
    absl::StatusOr<int64_t> epoch = (*leases)->Join(Own("a", "", kT0 + kPeriod), kT0);
    ASSERT_TRUE(epoch.ok()) << epoch.status();
    EXPECT_EQ(*epoch, open + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Postgres, FencingContract,
                         ::testing::Values(+[]() -> std::unique_ptr<Backend> {
                           return std::make_unique<PostgresBackend>();
                         }),
                         [](const auto&) { return std::string("two_pools"); });

INSTANTIATE_TEST_SUITE_P(Sqlite, FencingContract,
                         ::testing::Values(+[]() -> std::unique_ptr<Backend> {
                           return std::make_unique<SqliteBackend>();
                         }),
                         [](const auto&) { return std::string("two_connections"); });

}  // namespace
}  // namespace sandgate::store
