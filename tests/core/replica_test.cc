// ReplicaMember on a FakeClock, with replicas sharing one SQLite file: a lost replica's lease
// is not taken over 1 ns before it ends and is at its end; of two replicas racing, one cleans
// up, and each remote resource is deleted once; a replica that cannot renew stops taking work
// exactly at its lease's end; one taken over ends its work and rejoins at a new epoch, its
// late writes refused. Also the start-up recovery and sweep that touch only a replica's own
// runs and journal entries.
#include "core/replica.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "store/sqlite_admission_store.h"
#include "store/sqlite_replica_store.h"
#include "store/sqlite_store.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_journal.h"
#include "tests/fakes/forwarding_admission_store.h"
#include "tests/fakes/forwarding_store.h"

namespace sandgate::core {
namespace {

constexpr absl::Duration kNs = absl::Nanoseconds(1);
constexpr absl::Duration kLease = absl::Seconds(15);
constexpr absl::Duration kRenew = absl::Seconds(5);

// A remote provider that counts its sweeps per resource and erases each record, as the real
// ones do once the resource is gone. Shared by the replicas of a test.
class CountingProvider : public sandbox::Provider {
 public:
  explicit CountingProvider(ResourceJournal* journal) : journal_(journal) {}
  std::string name() const override { return "openai"; }
  absl::StatusOr<std::unique_ptr<sandbox::Session>> Create(const sandbox::SessionSpec&,
                                                           const CancelToken*) override {
    return absl::UnimplementedError("sweeps only");
  }
  absl::Status Sweep(const JournalEntry& entry) override {
    {
      absl::MutexLock lock(&mu_);
      ++sweeps_[entry.id];
    }
    return journal_->Erase(entry.id);
  }
  std::map<std::string, int> sweeps() {
    absl::MutexLock lock(&mu_);
    return sweeps_;
  }

 private:
  ResourceJournal* const journal_;
  absl::Mutex mu_;
  std::map<std::string, int> sweeps_ ABSL_GUARDED_BY(mu_);
};

v1::Run MakeRun(const std::string& id, const std::string& replica, v1::RunStatus status) {
  v1::Run run;
  run.set_id(id);
  run.set_tenant("t");
  run.set_status(status);
  run.set_replica(replica);
  return run;
}

store::Lease Own(const std::string& id, absl::Time expires_at) {
  store::Lease lease;
  lease.replica_id = id;
  lease.expires_at = expires_at;
  return lease;
}

// Renewals that fail while the flag is set, as when the database is out of reach.
class FlakyLeases : public store::ReplicaStore {
 public:
  explicit FlakyLeases(store::ReplicaStore* base) : base_(base) {}
  absl::StatusOr<int64_t> Join(const store::Lease& l, absl::Time now) override {
    return base_->Join(l, now);
  }
  absl::Status Renew(const std::string& id, int64_t epoch, absl::Time until) override {
    if (failing.load()) return absl::UnavailableError("connection refused");
    return base_->Renew(id, epoch, until);
  }
  absl::StatusOr<std::vector<store::Lease>> ListLeases() override { return base_->ListLeases(); }
  absl::StatusOr<bool> ClaimTakeover(const std::string& dead, const std::string& by, absl::Time now,
                                     absl::Time until) override {
    return base_->ClaimTakeover(dead, by, now, until);
  }
  std::atomic<bool> failing{false};

 private:
  store::ReplicaStore* const base_;
};

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    store_ = *store::SqliteStore::Open(path());
    events_ = std::make_unique<EventLog>(store_.get(), &clock_);
    provider_ = std::make_unique<CountingProvider>(store_.get());
    // The lease table first, as in a daemon: a takeover's commit frees the slots through it.
    (void)*store::SqliteReplicaStore::Open(path());
    admission_ = *store::SqliteAdmissionStore::Open(path());
  }
  void TearDown() override {
    members_.clear();
    stores_.clear();
    events_.reset();
  }
  std::string path() const { return dir_.path() + "/state.db"; }

  // Replica "a", which dies: a lease ending at kLease from now, a running and a queued run, a
  // kept session, two remote resources and a local sandbox in the journal.
  void LeaveLostReplica() {
    auto leases = *store::SqliteReplicaStore::Open(path());
    ASSERT_TRUE(leases->Join(Own("a", clock_.Now() + kLease), clock_.Now()).ok());
    ASSERT_TRUE(store_->CreateRun(MakeRun("r-running", "a", v1::RUN_STATUS_RUNNING), "").ok());
    ASSERT_TRUE(store_->CreateRun(MakeRun("r-queued", "a", v1::RUN_STATUS_QUEUED), "").ok());
    v1::RunAnalysisRequest request;
    request.set_playbook("financial-analyst");
    ASSERT_TRUE(store_->PutRunRequest("r-queued", request).ok());
    ASSERT_TRUE(store_->CreateRun(MakeRun("r-other", "z", v1::RUN_STATUS_RUNNING), "").ok());
    v1::Session session;
    session.set_id("s-a");
    session.set_tenant("t");
    session.set_status(v1::SESSION_STATUS_ACTIVE);
    session.set_replica("a");
    ASSERT_TRUE(store_->CreateSession(session, "").ok());
    ReplicaJournal a(store_.get(), "a");
    ASSERT_TRUE(a.Record({"openai-container:c1", "openai", "container", {}}).ok());
    ASSERT_TRUE(a.Record({"openai-file:f1", "openai", "file", {}}).ok());
    ASSERT_TRUE(a.Record({"local-session:s-a", "local", "session", {}}).ok());
    ASSERT_TRUE(ReplicaJournal(store_.get(), "z")
                    .Record({"openai-container:c9", "openai", "container", {}})
                    .ok());
  }

  // `leases` null: a connection of its own. Not joined yet. Each replica writes through a
  // store of its own on the shared file, fenced at its epoch once joined; its events go
  // through the test's (unfenced) log.
  ReplicaMember& NewReplica(const std::string& id, store::ReplicaStore* leases = nullptr,
                            ReplicaDeps deps = {}) {
    leases_.push_back(*store::SqliteReplicaStore::Open(path()));
    stores_.push_back(*store::SqliteStore::Open(path()));
    deps.leases = leases != nullptr ? leases : leases_.back().get();
    if (deps.store == nullptr) deps.store = stores_.back().get();
    deps.journal = store_.get();
    deps.events = events_.get();
    deps.clock = &clock_;
    if (deps.remote_providers.empty()) deps.remote_providers = {{"openai", provider_.get()}};
    if (deps.admission == nullptr) deps.admission = admission_.get();
    ReplicaConfig config;
    config.id = id;
    config.lease_period = kLease;
    config.renew_interval = kRenew;
    members_.push_back(std::make_unique<ReplicaMember>(deps, config));
    return *members_.back();
  }
  // Leases whose renewals fail while `failing` is set; they outlive the replicas.
  FlakyLeases& Flaky() {
    leases_.push_back(*store::SqliteReplicaStore::Open(path()));
    flaky_.push_back(std::make_unique<FlakyLeases>(leases_.back().get()));
    return *flaky_.back();
  }
  ReplicaMember& StartReplica(const std::string& id, store::ReplicaStore* leases = nullptr,
                              ReplicaDeps deps = {}) {
    ReplicaMember& member = NewReplica(id, leases, std::move(deps));
    EXPECT_TRUE(member.Join().ok());
    Start(member);
    return member;
  }
  void Start(ReplicaMember& member) {
    member.Start();
    ++started_;
  }
  // One lease period on the clock, a renewal interval at a time, settling at each: the
  // replicas renew on time, and a lease left unrenewed ends.
  bool RenewThroughALease() {
    for (absl::Duration t = kRenew; t <= kLease; t += kRenew) {
      if (!Settle()) return false;
      clock_.Advance(kRenew);
    }
    return true;
  }
  // Until every timer has run and waits again: the event log's, and each started replica's
  // heartbeat and cleaner. Twice: a heartbeat hands a claimed cleanup to its cleaner, which
  // may have looked at its queue (empty) in the first round; the second sees it taken and done.
  bool Settle() {
    return clock_.BlockUntilSettled(1 + 2 * started_) && clock_.BlockUntilSettled(1 + 2 * started_);
  }

  int started_ = 0;
  testing::ScopedTempDir dir_{"sg-replica"};
  testing::FakeClock clock_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<EventLog> events_;  // one timer thread waits on the clock
  std::unique_ptr<CountingProvider> provider_;
  std::unique_ptr<store::SqliteAdmissionStore> admission_;
  std::vector<std::unique_ptr<store::SqliteReplicaStore>> leases_;
  std::vector<std::unique_ptr<store::SqliteStore>> stores_;  // the replicas' own
  std::vector<std::unique_ptr<FlakyLeases>> flaky_;
  std::vector<std::unique_ptr<ReplicaMember>> members_;
};

TEST_F(ReplicaTest, LostReplicaIsTakenOverAtItsLeasesEndNotBefore) {
  const absl::Time end = clock_.Now() + kLease;
  LeaveLostReplica();
  ReplicaMember& b = StartReplica("b");
  ASSERT_TRUE(Settle());  // b's heartbeat, the event log's timer

  clock_.Advance(kLease - kNs);
  ASSERT_TRUE(Settle());
  EXPECT_EQ(b.takeovers(), 0) << "1 ns before the lease ends";
  EXPECT_EQ(store_->GetRun("r-running")->status(), v1::RUN_STATUS_RUNNING);
  EXPECT_TRUE(provider_->sweeps().empty());

  clock_.Advance(kNs);
  ASSERT_TRUE(Settle());
  EXPECT_EQ(b.takeovers(), 1) << "at the lease's end";
  v1::Run failed = *store_->GetRun("r-running");
  EXPECT_EQ(failed.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(failed.status_reason(),
            "replica a stopped renewing its lease, which ended at " + absl::FormatTime(end));
  std::vector<v1::Event> log = *store_->ReadEvents("r-running", 0, 10);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].run_finished().reason(), failed.status_reason());

  v1::Run queued = *store_->GetRun("r-queued");
  EXPECT_EQ(queued.status(), v1::RUN_STATUS_FAILED) << "a alone knew of it: it was in no queue";
  EXPECT_EQ(queued.status_reason(), failed.status_reason() +
                                        ", and this run waited for it alone (it was not in the "
                                        "shared queue)");
  EXPECT_EQ(*store_->LastSeq("r-queued"), 1);
  EXPECT_EQ(store_->GetRun("r-other")->status(), v1::RUN_STATUS_RUNNING) << "z's, alive";
  v1::Session session = *store_->GetSession("s-a");
  EXPECT_EQ(session.status(), v1::SESSION_STATUS_EXPIRED);
  EXPECT_TRUE(absl::StartsWith(session.status_reason(), "replica a stopped renewing"));

  EXPECT_EQ(provider_->sweeps(),
            (std::map<std::string, int>{{"openai-container:c1", 1}, {"openai-file:f1", 1}}));
  std::vector<JournalEntry> left = *store_->List();
  ASSERT_EQ(left.size(), 2u) << "a's local sandbox (a sweeps it when back) and z's container";
  EXPECT_EQ(left[0].id, "local-session:s-a");
  EXPECT_EQ(left[1].id, "openai-container:c9");

  clock_.Advance(kLease);
  ASSERT_TRUE(Settle());
  EXPECT_EQ(b.takeovers(), 1) << "once";
}

// Every write of a takeover, through the three stores it writes (records and events, the
// shared queue, the leases), in order. From the `left`th on, each fails, as after a SIGKILL of
// the claimer's store connection; -1: none fails.
class TakeoverWrites {
 public:
  explicit TakeoverWrites(int left) : left_(left) {}
  absl::Status Write(const std::string& what) {
    absl::MutexLock lock(&mu_);
    if (left_ == 0) return absl::UnavailableError("the process was killed");
    if (left_ > 0) --left_;
    made_.push_back(what);
    return absl::OkStatus();
  }
  std::vector<std::string> made() {
    absl::MutexLock lock(&mu_);
    return made_;
  }

 private:
  absl::Mutex mu_;
  int left_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> made_ ABSL_GUARDED_BY(mu_);
};

class WritesOfStore : public testing::ForwardingStore {
 public:
  WritesOfStore(store::Store* inner, TakeoverWrites* writes)
      : ForwardingStore(inner), writes_(writes) {}
  absl::Status PutRun(const v1::Run& run) override {
    SANDGATE_RETURN_IF_ERROR(writes_->Write("put run " + run.id()));
    return inner()->PutRun(run);
  }
  absl::Status AppendEventsWithRecords(const std::vector<v1::Event>& events,
                                       const std::vector<v1::Run>& runs,
                                       const std::vector<v1::Session>& sessions) override {
    SANDGATE_RETURN_IF_ERROR(writes_->Write("events and records"));
    return inner()->AppendEventsWithRecords(events, runs, sessions);
  }
  absl::Status SettleTakeover(const std::vector<v1::Event>& events,
                              const std::vector<v1::Run>& runs,
                              const std::vector<v1::Session>& sessions, const std::string& lost,
                              const std::string& by) override {
    SANDGATE_RETURN_IF_ERROR(writes_->Write("settle takeover"));
    return inner()->SettleTakeover(events, runs, sessions, lost, by);
  }

 private:
  TakeoverWrites* const writes_;
};

class WritesOfQueue : public testing::ForwardingAdmissionStore {
 public:
  WritesOfQueue(store::AdmissionStore* inner, TakeoverWrites* writes)
      : ForwardingAdmissionStore(inner), writes_(writes) {}
  using ForwardingAdmissionStore::Enqueue;
  absl::StatusOr<bool> Enqueue(const store::QueuedRun& run, uint32_t max_waiting,
                               store::RoomHere room, v1::Event* queued) override {
    SANDGATE_RETURN_IF_ERROR(writes_->Write("queue " + run.run_id));
    return ForwardingAdmissionStore::Enqueue(run, max_waiting, room, queued);
  }
  absl::Status ReleaseReplica(const std::string& replica) override {
    SANDGATE_RETURN_IF_ERROR(writes_->Write("release replica " + replica));
    return ForwardingAdmissionStore::ReleaseReplica(replica);
  }

 private:
  TakeoverWrites* const writes_;
};

// Issue 21 ("a takeover commits once"): the takeover freed the lost replica's quota slots,
// failed its runs and ended its sessions, queued again a run it had claimed but not started,
// and marked its cleanup done in four transactions, so a claimer killed between two of them
// left some done and some not (slots freed under runs still RUNNING). It is one commit now.
class ReplicaTakeoverTest : public ReplicaTest, public ::testing::WithParamInterface<int> {
 protected:
  // a, lost, also holds a claimed run it had started (r-running), one it had claimed but not
  // started (r-queued), and its kept session's slot: tenant t's two run slots are a's.
  void LeaveLostReplicaWithSlots() {
    LeaveLostReplica();
    store::QueuedRun row;
    row.tenant = "t";
    row.tenant_limit = 2;
    row.enqueued_by = "a";
    for (const char* id : {"r-running", "r-queued"}) {
      row.run_id = id;
      ASSERT_TRUE(admission_->Enqueue(row, 0, store::RoomHere{}).ok());
      ASSERT_EQ((*admission_->Claim("a", true))->run_id, id);
    }
    ASSERT_TRUE(*admission_->TakeSessionSlot("t", "s-a", "a", 1));
  }
  // Whether a's takeover is done: nothing of it, or all of it. Fails the test otherwise.
  bool TakenOver() {
    std::optional<store::QueuedRun> running = *admission_->Find("r-running");
    std::optional<store::QueuedRun> queued = *admission_->Find("r-queued");
    std::vector<store::Lease> leases = *leases_.front()->ListLeases();
    const bool cleaned = std::any_of(leases.begin(), leases.end(), [](const store::Lease& l) {
      return l.replica_id == "a" && l.cleaned;
    });
    const std::vector<bool> done = {
        store_->GetRun("r-running")->status() == v1::RUN_STATUS_FAILED,
        *store_->LastSeq("r-running") == 1,
        store_->GetSession("s-a")->status() == v1::SESSION_STATUS_EXPIRED,
        !running.has_value(),
        queued.has_value() && queued->claimed_by.empty(),
        store_->GetRun("r-queued")->status() == v1::RUN_STATUS_QUEUED,
        cleaned};
    const std::vector<bool> untouched = {
        store_->GetRun("r-running")->status() == v1::RUN_STATUS_RUNNING,
        *store_->LastSeq("r-running") == 0,
        store_->GetSession("s-a")->status() == v1::SESSION_STATUS_ACTIVE,
        running.has_value() && running->claimed_by == "a",
        queued.has_value() && queued->claimed_by == "a",
        store_->GetRun("r-queued")->status() == v1::RUN_STATUS_QUEUED,
        !cleaned};
    const bool all = std::count(done.begin(), done.end(), true) == 7;
    const bool none = std::count(untouched.begin(), untouched.end(), true) == 7;
    EXPECT_TRUE(all || none) << "a takeover half done: run failed, its log ended, session "
                                "ended, started run's slot freed, waiting run back in the "
                                "queue, still queued, cleanup done: "
                             << ::testing::PrintToString(done);
    return all;
  }
  // b takes a over, writing through `writes` (its leases write nothing in a takeover since:
  // before, FinishTakeover was counted too).
  ReplicaMember& TakeOver(TakeoverWrites* writes) {
    own_ = *store::SqliteStore::Open(path());
    counted_store_ = std::make_unique<WritesOfStore>(own_.get(), writes);
    counted_events_ = std::make_unique<WritesOfStore>(store_.get(), writes);
    counted_queue_ = std::make_unique<WritesOfQueue>(admission_.get(), writes);
    events_ = std::make_unique<EventLog>(counted_events_.get(), &clock_);
    ReplicaDeps deps;
    deps.store = counted_store_.get();
    deps.admission = counted_queue_.get();
    return StartReplica("b", nullptr, deps);
  }
  void TearDown() override {
    members_.clear();  // they and the log write through the counted stores
    events_.reset();
    ReplicaTest::TearDown();
  }

  std::unique_ptr<store::SqliteStore> own_;
  std::unique_ptr<WritesOfStore> counted_store_;
  std::unique_ptr<WritesOfStore> counted_events_;
  std::unique_ptr<WritesOfQueue> counted_queue_;
};

TEST_F(ReplicaTakeoverTest, ATakeoverCommitsOnceWithItsSlotsWaitingRunsAndLease) {
  LeaveLostReplicaWithSlots();
  TakeoverWrites writes(-1);
  ReplicaMember& b = TakeOver(&writes);
  ASSERT_TRUE(RenewThroughALease());  // b renews on time; a's lease ends
  ASSERT_TRUE(Settle());
  ASSERT_EQ(b.takeovers(), 1);
  EXPECT_EQ(writes.made().size(), 1u) << ::testing::PrintToString(writes.made());
  EXPECT_TRUE(TakenOver());
  absl::StatusOr<std::optional<store::QueuedRun>> next = admission_->Claim("c", true);
  ASSERT_TRUE(next.ok() && next->has_value()) << "a's slots are t's again";
  EXPECT_EQ((*next)->run_id, "r-queued");
  EXPECT_TRUE(*admission_->TakeSessionSlot("t", "s-c", "c", 1)) << "so is its session's";
}

TEST_P(ReplicaTakeoverTest, ATakeoverKilledAfterAnyOfItsWritesLeavesAllOrNothing) {
  LeaveLostReplicaWithSlots();
  TakeoverWrites writes(GetParam());
  ReplicaMember& b = TakeOver(&writes);
  ASSERT_TRUE(RenewThroughALease());
  ASSERT_TRUE(Settle());
  EXPECT_EQ(TakenOver(), b.takeovers() == 1)
      << "writes made: " << ::testing::PrintToString(writes.made());
}

INSTANTIATE_TEST_SUITE_P(KilledAfter, ReplicaTakeoverTest, ::testing::Values(0, 1, 2, 3));

TEST_F(ReplicaTest, ALostReplicasQuotaSlotsAreFreedAtItsTakeover) {
  LeaveLostReplica();
  store::QueuedRun running;
  running.run_id = "r-running";
  running.tenant = "t";
  running.tenant_limit = 1;
  running.enqueued_by = "a";
  store::QueuedRun later = running;
  later.run_id = "r-later";
  ASSERT_TRUE(admission_->Enqueue(running, 0, store::RoomHere{}).ok());
  ASSERT_EQ((*admission_->Claim("a", true))->run_id, "r-running");
  ASSERT_TRUE(*admission_->TakeSessionSlot("t", "slot-a", "a", 1));
  ASSERT_TRUE(admission_->Enqueue(later, 0, store::RoomHere{}).ok());
  ReplicaMember& b = StartReplica("b");
  ASSERT_TRUE(Settle());
  EXPECT_FALSE(admission_->Claim("b", true)->has_value()) << "a's run holds t's one slot";

  clock_.Advance(kLease - kNs);
  ASSERT_TRUE(Settle());
  clock_.Advance(kNs);
  ASSERT_TRUE(Settle());
  ASSERT_EQ(b.takeovers(), 1);
  absl::StatusOr<std::optional<store::QueuedRun>> next = admission_->Claim("b", true);
  ASSERT_TRUE(next.ok() && next->has_value()) << "a's slot is free";
  EXPECT_EQ((*next)->run_id, "r-later");
  EXPECT_TRUE(*admission_->TakeSessionSlot("t", "slot-b", "b", 1)) << "so is its session's";
}

TEST_F(ReplicaTest, OfTwoRacingReplicasOneCleansUpAndEachResourceGoesOnce) {
  LeaveLostReplica();
  ReplicaMember& b = StartReplica("b");
  ReplicaMember& c = StartReplica("c");
  ASSERT_TRUE(RenewThroughALease());  // b and c renew on time
  ASSERT_TRUE(Settle());
  EXPECT_EQ(b.takeovers() + c.takeovers(), 1);
  EXPECT_EQ(provider_->sweeps(),
            (std::map<std::string, int>{{"openai-container:c1", 1}, {"openai-file:f1", 1}}));
  EXPECT_EQ(*store_->LastSeq("r-queued"), 1) << "one run.finished";
  EXPECT_EQ(*store_->LastSeq("r-running"), 1) << "one run.finished";
  EXPECT_EQ(*store_->LastSeq("s-a"), 1) << "one session.closed";
}

TEST_F(ReplicaTest, ReplicaThatCannotRenewStopsTakingWorkAtItsLeasesEnd) {
  FlakyLeases& leases = Flaky();
  ReplicaMember& a = NewReplica("a", &leases);
  EXPECT_EQ(a.CanTakeWork().code(), absl::StatusCode::kUnavailable) << "before joining";
  ASSERT_TRUE(a.Join().ok());
  Start(a);
  ASSERT_TRUE(Settle());
  clock_.Advance(kRenew);  // renewed: the lease now ends at kRenew + kLease
  ASSERT_TRUE(Settle());
  leases.failing = true;
  clock_.Advance(kLease - kNs);
  ASSERT_TRUE(Settle());
  EXPECT_TRUE(a.CanTakeWork().ok()) << "1 ns before the lease ends";
  clock_.Advance(kNs);
  absl::Status refused = a.CanTakeWork();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(refused.message(), "replica a could not renew its lease"))
      << refused;
  leases.failing = false;
  clock_.Advance(kRenew);
  ASSERT_TRUE(Settle());
  EXPECT_TRUE(a.CanTakeWork().ok()) << "renewed again before anyone took it over";
}

// "a" is only cut off from the store for a while, with a run going; "b" takes its lease over
// meanwhile and fails the run. Back, a's writes to the run are refused (the failure stays);
// a ends its work, sweeps its host and joins again at a new epoch, without a restart.
TEST_F(ReplicaTest, TakenOverReplicaEndsItsWorkSweepsItsHostAndRejoins) {
  FlakyLeases& leases = Flaky();
  CountingProvider local(store_.get());
  std::vector<std::string> ended;  // end_local_work's calls, with what CanTakeWork said then
  ReplicaMember* a = nullptr;
  ReplicaDeps deps;
  deps.own_providers = {{"local", &local}};
  deps.end_local_work = [&](const std::string& why) {
    ended.push_back(why);
    ended.push_back(a->CanTakeWork().ToString());
  };
  a = &StartReplica("a", &leases, deps);
  store::Store& a_store = *stores_.back();
  EXPECT_EQ(a->epoch(), 1);
  ASSERT_TRUE(a_store.CreateRun(MakeRun("r-a", "a", v1::RUN_STATUS_RUNNING), "").ok());
  ASSERT_TRUE(
      ReplicaJournal(store_.get(), "a").Record({"local-session:sa", "local", "session", {}}).ok());
  leases.failing = true;
  ReplicaMember& b = StartReplica("b");
  ASSERT_TRUE(RenewThroughALease());
  ASSERT_TRUE(Settle());
  ASSERT_EQ(b.takeovers(), 1);
  const std::string reason = store_->GetRun("r-a")->status_reason();
  ASSERT_TRUE(absl::StartsWith(reason, "replica a stopped renewing")) << reason;

  // Its run's work, going on meanwhile, writes: refused, saying by whom and that the run was
  // settled there.
  v1::Run late = MakeRun("r-a", "a", v1::RUN_STATUS_SUCCEEDED);
  absl::Status refused = a_store.PutRun(late);
  EXPECT_TRUE(store::IsFencedWrite(refused)) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "replica a was taken over by replica b"))
      << refused;
  EXPECT_EQ(store_->GetRun("r-a")->status(), v1::RUN_STATUS_FAILED);
  EXPECT_TRUE(ended.empty()) << "a has not renewed since";

  leases.failing = false;  // a's next renewal is refused: taken over
  clock_.Advance(kRenew);
  ASSERT_TRUE(Settle());
  ASSERT_EQ(ended.size(), 2u) << "its work ended once";
  EXPECT_TRUE(absl::StrContains(ended[0], "the lease of replica a was taken over by replica b"))
      << ended[0];
  EXPECT_TRUE(absl::StrContains(ended[1], "UNAVAILABLE")) << "no new work meanwhile: " << ended[1];
  EXPECT_EQ(local.sweeps(), (std::map<std::string, int>{{"local-session:sa", 1}}))
      << "its own host swept before it rejoins";
  EXPECT_EQ(a->epoch(), 2) << "rejoined at a new epoch";
  EXPECT_TRUE(a->CanTakeWork().ok()) << a->CanTakeWork();
  EXPECT_EQ(a->takeovers(), 0) << "a replica without its lease cleans up after nobody";

  // New work of a's is written; the old run stays as b left it.
  EXPECT_TRUE(a_store.CreateRun(MakeRun("r-new", "a", v1::RUN_STATUS_QUEUED), "").ok());
  EXPECT_TRUE(a_store.PutRun(MakeRun("r-new", "a", v1::RUN_STATUS_RUNNING)).ok());
  EXPECT_EQ(store_->GetRun("r-a")->status_reason(), reason);
  clock_.Advance(kRenew);
  ASSERT_TRUE(Settle());
  EXPECT_TRUE(a->CanTakeWork().ok()) << "renews its new lease";
  EXPECT_EQ(ended.size(), 2u);
}

// The store away for 6.4 s across two renewals (5 s and 10 s): the first renewal after it is
// back, within a retry, moves the lease on, well before its end at 15 s, so the other
// replica watching it takes nothing over. Before, a failed renewal waited for the next 5 s
// tick, which fell on the lease's end, where the watcher's takeover raced it.
TEST_F(ReplicaTest, AStoreBlinkShorterThanTheLeaseEndsNoLease) {
  FlakyLeases& leases = Flaky();
  ReplicaMember& a = StartReplica("a", &leases);
  ReplicaMember& b = StartReplica("b");
  const absl::Time joined = clock_.Now();
  const absl::Duration step = absl::Milliseconds(100);
  auto run_until = [&](absl::Time t) {
    while (clock_.Now() < t) {
      ASSERT_TRUE(Settle());
      clock_.Advance(step);
    }
    ASSERT_TRUE(Settle());
  };
  run_until(joined + absl::Milliseconds(4900));
  leases.failing = true;
  run_until(joined + absl::Milliseconds(11300));
  leases.failing = false;
  run_until(joined + absl::Milliseconds(13500));
  absl::StatusOr<std::vector<store::Lease>> rows = leases_.front()->ListLeases();
  ASSERT_TRUE(rows.ok()) << rows.status();
  absl::Time a_end = absl::InfinitePast();
  for (const store::Lease& l : *rows) {
    if (l.replica_id == "a") a_end = l.expires_at;
  }
  EXPECT_GT(a_end, joined + absl::Milliseconds(11300) + kLease - kRenewRetryMost)
      << "renewed within a retry of the store's return, not at the next tick";
  run_until(joined + kLease + kRenew);
  EXPECT_EQ(b.takeovers(), 0);
  EXPECT_TRUE(a.CanTakeWork().ok()) << a.CanTakeWork();
}

// A process frozen while another starts under its id (SIGSTOP, then a new daemon
// given the same replica.id, then SIGCONT): its next renewal is refused, it ends its work,
// takes no new work and never joins again, which would fence out the live process; the live
// one renews on at its epoch. Before renewals named the epoch, the frozen one renewed on.
TEST_F(ReplicaTest, AProcessWhoseIdJoinedAgainElsewhereStopsAndNeverRejoins) {
  CountingProvider local(store_.get());
  std::vector<std::string> ended;
  ReplicaDeps deps;
  deps.own_providers = {{"local", &local}};
  deps.end_local_work = [&](const std::string& why) { ended.push_back(why); };
  ReplicaMember& frozen = StartReplica("a", nullptr, deps);
  ASSERT_TRUE(
      ReplicaJournal(store_.get(), "a").Record({"local-session:sa", "local", "session", {}}).ok());
  ASSERT_TRUE(Settle());  // its heartbeat and the event log's timer
  ReplicaMember& live = StartReplica("a");
  ASSERT_EQ(frozen.epoch(), 1);
  ASSERT_EQ(live.epoch(), 2);

  for (int renewal = 0; renewal < 4; ++renewal) {
    clock_.Advance(kRenew);
    ASSERT_TRUE(Settle());
  }
  absl::Status refused = frozen.CanTakeWork();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(),
                                "the lease of replica a was joined again by another process "
                                "(epoch 2; this process holds epoch 1)"))
      << refused;
  ASSERT_EQ(ended.size(), 1u) << "its work ended once";
  EXPECT_EQ(frozen.epoch(), 1) << "never joined again";
  EXPECT_TRUE(local.sweeps().empty()) << "the host's journal is the live process's to sweep";
  EXPECT_EQ(live.epoch(), 2);
  EXPECT_TRUE(live.CanTakeWork().ok()) << live.CanTakeWork();
  EXPECT_EQ(live.takeovers(), 0);
}

// Taken over by a claimer still cleaning up: "a" ends its work at once, but joins again only
// once that cleanup is done, as a restart would wait.
TEST_F(ReplicaTest, TakenOverReplicaRejoinsOnlyOnceTheCleanupIsDone) {
  FlakyLeases& leases = Flaky();
  std::atomic<int> ended{0};
  ReplicaDeps deps;
  deps.end_local_work = [&](const std::string&) { ++ended; };
  ReplicaMember& a = StartReplica("a", &leases, deps);
  leases.failing = true;
  ASSERT_TRUE(RenewThroughALease());  // a's lease ends unrenewed
  ASSERT_TRUE(Settle());
  auto claimer = *store::SqliteReplicaStore::Open(path());
  ASSERT_TRUE(*claimer->ClaimTakeover("a", "c", clock_.Now(), clock_.Now() + 10 * kLease));
  leases.failing = false;
  for (int renewal = 0; renewal < 2; ++renewal) {
    clock_.Advance(kRenew);
    ASSERT_TRUE(Settle());
    EXPECT_EQ(ended.load(), 1) << "its work ends once, at the first refused renewal";
    EXPECT_EQ(a.epoch(), 1) << "c's cleanup is under way";
    EXPECT_EQ(a.CanTakeWork().code(), absl::StatusCode::kUnavailable);
  }
  ASSERT_TRUE(store_->SettleTakeover({}, {}, {}, "a", "c").ok());  // c's cleanup commits
  clock_.Advance(kRenew);
  ASSERT_TRUE(Settle());
  EXPECT_EQ(a.epoch(), 2);
  EXPECT_TRUE(a.CanTakeWork().ok()) << a.CanTakeWork();
  EXPECT_EQ(ended.load(), 1);
}

TEST_F(ReplicaTest, AfterAnOutageOfTheStoreNoReplicaTakesAnotherOver) {
  FlakyLeases& b_leases = Flaky();
  FlakyLeases& c_leases = Flaky();
  ReplicaMember& b = StartReplica("b", &b_leases);
  ReplicaMember& c = StartReplica("c", &c_leases);
  b_leases.failing = true;
  c_leases.failing = true;
  for (absl::Duration t = kRenew; t <= 2 * kLease; t += kRenew) {  // both cut off, leases end
    ASSERT_TRUE(Settle());
    clock_.Advance(kRenew);
  }
  ASSERT_TRUE(Settle());
  b_leases.failing = false;  // b is back one renewal before c
  clock_.Advance(kRenew);
  ASSERT_TRUE(Settle());
  c_leases.failing = false;
  for (absl::Duration t = kRenew; t <= 2 * kLease; t += kRenew) {
    ASSERT_TRUE(Settle());
    clock_.Advance(kRenew);
  }
  ASSERT_TRUE(Settle());
  EXPECT_EQ(b.takeovers() + c.takeovers(), 0);
  EXPECT_TRUE(b.CanTakeWork().ok()) << b.CanTakeWork();
  EXPECT_TRUE(c.CanTakeWork().ok()) << c.CanTakeWork();
}

// Issue 21 item 2, as the fault harness met it: a store away for 9.2 s of a's and 9 s of b's
// (the lease is 15 s). b's retry after the store was back fell at a's lease's end, a's at
// 16 s; b, whose own lease had not lapsed, took a over. A replica the store did not answer
// lately claims nothing until the others' retries have landed (kClaimGraceAfterOutage).
TEST_F(ReplicaTest, AfterAStoreOutageShorterThanTheLeaseTheOwnersRetriesComeFirst) {
  FlakyLeases& a_leases = Flaky();
  FlakyLeases& b_leases = Flaky();
  ReplicaMember& a = StartReplica("a", &a_leases);
  ReplicaMember& b = StartReplica("b", &b_leases);
  const absl::Time joined = clock_.Now();
  const absl::Duration step = absl::Milliseconds(100);
  auto run_until = [&](absl::Time t) {
    while (clock_.Now() < t) {
      ASSERT_TRUE(Settle());
      clock_.Advance(step);
    }
    ASSERT_TRUE(Settle());
  };
  run_until(joined + absl::Milliseconds(4900));
  a_leases.failing = true;  // a's renewal at 5 s fails: its lease ends at 15 s
  run_until(joined + absl::Milliseconds(5100));
  b_leases.failing = true;  // b renewed at 5 s: its lease ends at 20 s
  run_until(joined + absl::Milliseconds(14100));
  a_leases.failing = false;  // the store is back for both
  b_leases.failing = false;
  run_until(joined + 2 * kLease);
  EXPECT_EQ(b.takeovers(), 0) << "a renewed at 16 s, before b claimed";
  EXPECT_TRUE(a.CanTakeWork().ok()) << a.CanTakeWork();
  EXPECT_TRUE(b.CanTakeWork().ok()) << b.CanTakeWork();
}

// Issue 21 item 1: the takeover freed the lost replica's quota slots, then queued again (or
// failed) its waiting runs from a read made meanwhile, while claim loops took the same runs:
// one run finished twice, a takeover aborted on a run another replica had claimed. A waiting
// run that is in the shared queue is the queue's: the takeover leaves it alone, claimed by a
// live replica or not, and settles only what nobody else can (its running runs, a waiting run
// no longer in the queue).
TEST_F(ReplicaTest, ATakeoverLeavesTheLostReplicasWaitingRunsToTheSharedQueue) {
  LeaveLostReplica();  // a: r-running, and r-queued, in no queue
  v1::RunAnalysisRequest request;
  request.set_playbook("financial-analyst");
  for (const char* id : {"r-claimed", "r-waiting"}) {
    ASSERT_TRUE(store_->CreateRun(MakeRun(id, "a", v1::RUN_STATUS_QUEUED), "").ok());
    ASSERT_TRUE(store_->PutRunRequest(id, request).ok());
  }
  store::QueuedRun row;
  row.tenant = "t";
  row.enqueued_by = "a";
  for (const char* id : {"r-running", "r-claimed", "r-waiting"}) {
    row.run_id = id;
    ASSERT_TRUE(admission_->Enqueue(row, 0, store::RoomHere{}).ok());
  }
  ASSERT_EQ((*admission_->Claim("a", true))->run_id, "r-running");
  ASSERT_EQ((*admission_->Claim("c", true))->run_id, "r-claimed") << "c, alive, starts it";
  ReplicaMember& b = StartReplica("b");
  ASSERT_TRUE(RenewThroughALease());  // b renews on time
  ASSERT_TRUE(Settle());
  ASSERT_EQ(b.takeovers(), 1);

  EXPECT_EQ(store_->GetRun("r-queued")->status(), v1::RUN_STATUS_FAILED) << "the one not queued";
  for (const char* id : {"r-claimed", "r-waiting"}) {
    EXPECT_EQ(store_->GetRun(id)->status(), v1::RUN_STATUS_QUEUED) << id;
    EXPECT_EQ(*store_->LastSeq(id), 0) << id << ": no event written by the takeover";
  }
  std::optional<store::QueuedRun> claimed = *admission_->Find("r-claimed");
  ASSERT_TRUE(claimed.has_value());
  EXPECT_EQ(claimed->claimed_by, "c");
  std::optional<store::QueuedRun> waiting = *admission_->Find("r-waiting");
  ASSERT_TRUE(waiting.has_value());
  EXPECT_EQ(waiting->claimed_by, "") << "any replica with room takes it";
  EXPECT_EQ(store_->GetRun("r-running")->status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(*store_->LastSeq("r-running"), 1) << "one run.finished";
}

// A remote provider whose sweeps wait until let go, as an upstream delete that hangs.
class HangingProvider : public CountingProvider {
 public:
  using CountingProvider::CountingProvider;
  absl::Status Sweep(const JournalEntry& entry) override {
    absl::MutexLock lock(&mu_);
    entered_ = true;
    mu_.Await(absl::Condition(&go_));
    return CountingProvider::Sweep(entry);
  }
  // Until a sweep hangs here (real time, bounded): the cleanup has left the clock's waiters.
  bool AwaitEntered() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&entered_), absl::Seconds(10));
  }
  void Go() {
    absl::MutexLock lock(&mu_);
    go_ = true;
  }

 private:
  absl::Mutex mu_;
  bool entered_ ABSL_GUARDED_BY(mu_) = false;
  bool go_ ABSL_GUARDED_BY(mu_) = false;
};

// The cleanup after a lost replica ran on the heartbeat thread: an upstream delete that hung
// held back the claimer's own renewals until its lease ended too. It runs on a thread of its
// own; the claimer renews on time meanwhile.
TEST_F(ReplicaTest, ACleanupThatHangsDoesNotHoldBackTheClaimersRenewals) {
  LeaveLostReplica();
  HangingProvider hanging(store_.get());
  ReplicaDeps deps;
  deps.remote_providers = {{"openai", &hanging}};
  ReplicaMember& claimer = StartReplica("b", nullptr, deps);
  ASSERT_TRUE(RenewThroughALease());  // a's lease ends: b claims it
  // b's cleaner hangs in the sweep: the event log's timer and b's heartbeat wait on the clock.
  // Settling for two before the cleaner is in the sweep could count the idle cleaner and the
  // timer while the heartbeat, slow on a loaded machine, is still claiming: the clock would
  // then run past b's lease with no renewal due (5 in 300 under three busy loops).
  ASSERT_TRUE(hanging.AwaitEntered());
  ASSERT_TRUE(clock_.BlockUntilSettled(2));
  for (absl::Duration t = kRenew; t <= 2 * kLease; t += kRenew) {
    clock_.Advance(kRenew);
    ASSERT_TRUE(clock_.BlockUntilSettled(2));
  }
  EXPECT_TRUE(claimer.CanTakeWork().ok())
      << "renewed through the hanging cleanup: " << claimer.CanTakeWork();
  EXPECT_EQ(claimer.takeovers(), 0) << "still cleaning up";
  hanging.Go();
  ASSERT_TRUE(Settle());
  EXPECT_EQ(claimer.takeovers(), 1);
}

TEST(ReplicaJournalTest, ListsItsOwnAndUnmarkedEntriesAndViewsAnothersRemoteOnes) {
  testing::ScopedTempDir dir("sg-rjournal");
  ASSERT_TRUE(dir.ok());
  auto store = *store::SqliteStore::Open(dir.path() + "/s.db");
  ASSERT_TRUE(store->Record({"old", "openai", "container", {}}).ok());  // before replicas
  ReplicaJournal a(store.get(), "a"), b(store.get(), "b");
  ASSERT_TRUE(a.Record({"a-c", "openai", "container", {}}).ok());
  ASSERT_TRUE(a.Record({"a-l", "local", "session", {}}).ok());
  ASSERT_TRUE(b.Record({"b-c", "openai", "container", {}}).ok());
  auto ids = [](ResourceJournal& j) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<JournalEntry>> entries = j.List();
    EXPECT_TRUE(entries.ok()) << entries.status();
    if (entries.ok()) {
      for (const JournalEntry& e : *entries) out.push_back(e.id);
    }
    return out;
  };
  EXPECT_EQ(ids(a), (std::vector<std::string>{"a-c", "a-l", "old"}));
  EXPECT_EQ(ids(b), (std::vector<std::string>{"b-c", "old"}));
  ReplicaJournal remote_of_a = ReplicaJournal::Of(store.get(), "a", {"openai"});
  EXPECT_EQ(ids(remote_of_a), std::vector<std::string>{"a-c"});
  EXPECT_EQ((*store->List())[0].details[ReplicaJournal::kKey], "a");
}

// Erases nothing while `away` is set: the database is out of reach.
class AwayJournal : public testing::FakeJournal {
 public:
  absl::Status Erase(const std::string& id) override {
    if (away.load()) return absl::UnavailableError("journal erase: postgres connect failed");
    return FakeJournal::Erase(id);
  }
  std::atomic<bool> away{false};
};

// The fault harness (tests/faults) found the journal entries of sandboxes deleted while
// PostgreSQL was stopped still there after every replica had drained: the erase failed and
// only the next start's sweep would remove them. The erase is kept and done again once the
// store answers, unless the id was recorded again since.
TEST(ReplicaJournalTest, AnEraseTheStoreDidNotTakeIsDoneAgainOnceItAnswers) {
  AwayJournal base;
  ReplicaJournal a(&base, "a");
  ASSERT_TRUE(a.Record({"gone", "local", "session", {}}).ok());
  ASSERT_TRUE(a.Record({"again", "local", "session", {}}).ok());
  base.away = true;
  EXPECT_FALSE(a.Erase("gone").ok());
  EXPECT_FALSE(a.Erase("again").ok());
  a.RetryErases();
  EXPECT_TRUE(base.Has("gone")) << "still away";
  base.away = false;
  ASSERT_TRUE(a.Record({"again", "local", "session", {}}).ok());  // a new resource, same id
  a.RetryErases();
  EXPECT_FALSE(base.Has("gone"));
  EXPECT_TRUE(base.Has("again"));
}

// The heartbeat does it after each renewal the store answered.
TEST_F(ReplicaTest, AReplicasErasesTheStoreDidNotTakeAreDoneAtItsNextRenewal) {
  AwayJournal base;
  ReplicaJournal journal(&base, "a");
  ReplicaDeps deps;
  deps.own_journal = &journal;
  ReplicaMember& a = StartReplica("a", nullptr, deps);
  ASSERT_TRUE(journal.Record({"local-session:sa", "local", "session", {}}).ok());
  base.away = true;
  EXPECT_FALSE(journal.Erase("local-session:sa").ok());
  base.away = false;
  ASSERT_TRUE(Settle());
  EXPECT_TRUE(base.Has("local-session:sa"));
  clock_.Advance(kRenew);
  ASSERT_TRUE(Settle());
  EXPECT_FALSE(base.Has("local-session:sa"));
  a.Stop();  // before the journal goes
}

TEST(ReplicaIdTest, DefaultIsStablePerStateDirAndAValidId) {
  const std::string one = DefaultReplicaId("/var/lib/sandgate");
  EXPECT_EQ(one, DefaultReplicaId("/var/lib/sandgate"));
  EXPECT_NE(one, DefaultReplicaId("/var/lib/sandgate-2"));
  Config c;
  c.replica.id = one;
  EXPECT_TRUE(ValidateConfig(c).ok()) << one;
}

// A replica's start-up recovery settles its own runs and those stored before replicas,
// never a live replica's.
TEST(RecoverRunsTest, OnlyThisReplicasOwnRuns) {
  testing::ScopedTempDir dir("sg-recover");
  ASSERT_TRUE(dir.ok());
  auto store = *store::SqliteStore::Open(dir.path() + "/s.db");
  testing::FakeClock clock;
  EventLog events(store.get(), &clock);
  ASSERT_TRUE(store->CreateRun(MakeRun("mine", "a", v1::RUN_STATUS_RUNNING), "").ok());
  ASSERT_TRUE(store->CreateRun(MakeRun("old", "", v1::RUN_STATUS_RUNNING), "").ok());
  ASSERT_TRUE(store->CreateRun(MakeRun("theirs", "b", v1::RUN_STATUS_RUNNING), "").ok());
  Tenants tenants({});
  ASSERT_TRUE(RecoverRuns({store.get(), &events, &clock, "a", "", ""}, tenants,
                          [](const Caller&, const v1::Run&, v1::RunAnalysisRequest,
                             const std::string&) { return absl::OkStatus(); })
                  .ok());
  EXPECT_EQ(store->GetRun("mine")->status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(store->GetRun("old")->status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(store->GetRun("theirs")->status(), v1::RUN_STATUS_RUNNING);
}

}  // namespace
}  // namespace sandgate::core
