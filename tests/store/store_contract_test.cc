// The Store contract (store/store.h), run on every implementation: SqliteStore and
// PostgresStore. Cases a shared database needs (two store instances on one database, as
// two replicas) run on both too: SQLite's file can be opened twice as well.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/store/store_backends.h"

namespace sandgate::store {
namespace {

class StoreContractTest : public ::testing::TestWithParam<testing::BackendKind> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    ASSERT_NE(backend_, nullptr);
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }
  // Another instance on the same database (a restart, or a second replica).
  std::unique_ptr<Store> Open() {
    auto s = backend_->Open();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  void Reopen() {
    store_.reset();
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }
  static v1::Run MakeRun(const std::string& id, const std::string& tenant,
                         const std::string& key = "") {
    v1::Run run;
    run.set_id(id);
    run.set_tenant(tenant);
    run.set_idempotency_key(key);
    run.set_status(v1::RUN_STATUS_RUNNING);
    return run;
  }
  static v1::Session MakeSession(const std::string& id, const std::string& tenant,
                                 const std::string& key = "") {
    v1::Session session;
    session.set_id(id);
    session.set_tenant(tenant);
    session.set_idempotency_key(key);
    session.set_status(v1::SESSION_STATUS_ACTIVE);
    return session;
  }
  static v1::Event Ev(const std::string& run, int64_t seq) {
    v1::Event e;
    e.set_run_id(run);
    e.set_seq(seq);
    e.set_type("notice");
    return e;
  }
  std::unique_ptr<testing::Backend> backend_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContractTest, RunsRoundTripAndSurviveReopen) {
  ASSERT_TRUE(store_->PutRun(MakeRun("r1", "a")).ok());
  v1::Run updated = MakeRun("r1", "a");
  updated.set_status(v1::RUN_STATUS_SUCCEEDED);
  ASSERT_TRUE(store_->PutRun(updated).ok());
  Reopen();
  auto got = store_->GetRun("r1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_EQ(store_->GetRun("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreContractTest, ListRunsIsTenantScopedNewestFirstAndPaged) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(store_->PutRun(MakeRun("a" + std::to_string(i), "a")).ok());
  ASSERT_TRUE(store_->PutRun(MakeRun("b0", "b")).ok());
  auto page1 = store_->ListRuns("a", 3, "");
  ASSERT_TRUE(page1.ok());
  ASSERT_EQ(page1->runs.size(), 3u);
  EXPECT_EQ(page1->runs[0].id(), "a4");
  ASSERT_FALSE(page1->next_page_token.empty());
  auto page2 = store_->ListRuns("a", 3, page1->next_page_token);
  ASSERT_TRUE(page2.ok());
  ASSERT_EQ(page2->runs.size(), 2u);
  EXPECT_EQ(page2->runs[1].id(), "a0");
  EXPECT_TRUE(page2->next_page_token.empty());
  EXPECT_EQ(store_->ListRuns("", 50, "")->runs.size(), 6u);
  EXPECT_EQ(store_->ListRuns("a", 3, "garbage").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StoreContractTest, IdempotencyKeyIsUniquePerTenant) {
  ASSERT_TRUE(store_->PutRun(MakeRun("r1", "a", "k")).ok());
  EXPECT_EQ(store_->PutRun(MakeRun("r2", "a", "k")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(store_->PutRun(MakeRun("r3", "b", "k")).ok());
  EXPECT_EQ((*store_->FindRunByIdempotencyKey("a", "k"))->id, "r1");
  EXPECT_FALSE(store_->FindRunByIdempotencyKey("a", "other")->has_value());
}

TEST_P(StoreContractTest, AKeyKeepsTheFingerprintOfTheRequestThatMadeIt) {
  ASSERT_TRUE(store_->CreateRun(MakeRun("r1", "a", "k"), "fp1").ok());
  // A second run under the key is refused at insert: the concurrent-retry path.
  EXPECT_EQ(store_->CreateRun(MakeRun("r2", "a", "k"), "fp2").code(),
            absl::StatusCode::kAlreadyExists);
  v1::Run later = MakeRun("r1", "a", "k");
  later.set_status(v1::RUN_STATUS_SUCCEEDED);
  ASSERT_TRUE(store_->PutRun(later).ok());  // updates keep the fingerprint
  auto found = store_->FindRunByIdempotencyKey("a", "k");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->id, "r1");
  EXPECT_EQ((*found)->request_sha256, "fp1");

  v1::Session s;
  s.set_id("s1");
  s.set_tenant("a");
  s.set_idempotency_key("k");
  ASSERT_TRUE(store_->CreateSession(s, "sfp").ok());
  s.set_status(v1::SESSION_STATUS_CLOSED);
  ASSERT_TRUE(store_->PutSession(s).ok());
  EXPECT_EQ((*store_->FindSessionByIdempotencyKey("a", "k"))->request_sha256, "sfp");
}

TEST_P(StoreContractTest, EventsAreDensePerRunAndReadAfterSeq) {
  for (int seq = 1; seq <= 4; ++seq) ASSERT_TRUE(store_->AppendEvent(Ev("r1", seq)).ok());
  EXPECT_EQ(store_->AppendEvent(Ev("r1", 2)).code(), absl::StatusCode::kAlreadyExists);
  auto events = store_->ReadEvents("r1", 2, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].seq(), 3);
  EXPECT_EQ((*events)[0].type(), "notice");
  EXPECT_EQ(*store_->LastSeq("r1"), 4);
  EXPECT_EQ(*store_->LastSeq("none"), 0);
  EXPECT_EQ(store_->ReadEvents("r1", 0, 3)->size(), 3u) << "limit";
}

// The event log's group commit: a batch of several runs' events is stored whole or, when
// one of them cannot be, not at all (and the store takes the next batch).
TEST_P(StoreContractTest, ABatchOfEventsIsStoredWholeOrNotAtAll) {
  ASSERT_TRUE(store_->AppendEvents({Ev("r1", 1), Ev("r2", 1), Ev("r1", 2)}).ok());
  EXPECT_EQ(store_->AppendEvents({Ev("r2", 2), Ev("r1", 2)}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*store_->LastSeq("r2"), 1) << "r2#2 was rolled back with the duplicate";
  ASSERT_TRUE(store_->AppendEvents({Ev("r2", 2), Ev("r1", 3)}).ok());
  EXPECT_EQ(*store_->LastSeq("r1"), 3);
  EXPECT_EQ(store_->ReadEvents("r2", 0, 10)->size(), 2u);
}

// A burst larger than one statement holds (PostgresStore splits it) is still one
// transaction.
TEST_P(StoreContractTest, ALargeBatchIsStoredWholeOrNotAtAll) {
  std::vector<v1::Event> batch;
  for (int seq = 1; seq <= 2500; ++seq) batch.push_back(Ev("big", seq));
  batch.push_back(Ev("big", 7));  // a duplicate in the last part
  EXPECT_EQ(store_->AppendEvents(batch).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*store_->LastSeq("big"), 0);
  batch.pop_back();
  ASSERT_TRUE(store_->AppendEvents(batch).ok());
  EXPECT_EQ(*store_->LastSeq("big"), 2500);
  EXPECT_EQ(store_->ReadEvents("big", 2000, 1000)->size(), 500u);
}

// A run's final record and its terminal event in one transaction (the event log's Finish):
// both stored, or on any error neither, so no reader ever finds a finished run whose log
// does not end, nor an ended log under an unfinished record.
TEST_P(StoreContractTest, AFinalRecordAndItsEventsAreStoredTogetherOrNotAtAll) {
  v1::Run queued = MakeRun("r1", "a");
  queued.set_status(v1::RUN_STATUS_QUEUED);
  ASSERT_TRUE(store_->PutRun(queued).ok());
  ASSERT_TRUE(store_->PutRunRequest("r1", v1::RunAnalysisRequest()).ok());
  ASSERT_TRUE(store_->PutRun(MakeRun("r2", "a")).ok());
  ASSERT_TRUE(store_->AppendEvents({Ev("r1", 1), Ev("r2", 1)}).ok());

  v1::Run r1 = MakeRun("r1", "a");
  r1.set_status(v1::RUN_STATUS_SUCCEEDED);
  v1::Run r2 = MakeRun("r2", "a");
  r2.set_status(v1::RUN_STATUS_FAILED);
  // r2#1 is a duplicate: the batch fails, and r1's record goes with it.
  EXPECT_EQ(store_->AppendEventsWithRuns({Ev("r1", 2), Ev("r2", 1)}, {r1, r2}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetRun("r1")->status(), v1::RUN_STATUS_QUEUED);
  EXPECT_EQ(store_->GetRun("r2")->status(), v1::RUN_STATUS_RUNNING);
  EXPECT_EQ(*store_->LastSeq("r1"), 1);
  EXPECT_TRUE(store_->GetRunRequest("r1").ok()) << "rolled back with the record";

  ASSERT_TRUE(store_->AppendEventsWithRuns({Ev("r1", 2)}, {r1}).ok());
  ASSERT_TRUE(store_->AppendEventsWithRuns({Ev("r2", 2), Ev("r2", 3)}, {r2}).ok());
  Reopen();
  EXPECT_EQ(store_->GetRun("r1")->status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_EQ(store_->GetRun("r2")->status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(*store_->LastSeq("r1"), 2);
  EXPECT_EQ(*store_->LastSeq("r2"), 3);
  EXPECT_EQ(store_->GetRunRequest("r1").status().code(), absl::StatusCode::kNotFound)
      << "a run that has started cannot be queued again (PutRun's contract)";
  EXPECT_TRUE(store_->ListUnfinishedRuns()->empty());
}

// A kept session's final record and its own log's session.closed in one transaction (the
// event log's Finish), with a run's alike: all stored, or on any error none, so no reader
// finds a closed session whose log does not end.
TEST_P(StoreContractTest, ASessionsFinalRecordAndItsEventsAreStoredTogetherOrNotAtAll) {
  v1::Session live = MakeSession("s1", "a", "k");
  ASSERT_TRUE(store_->CreateSession(live, "sha").ok());
  ASSERT_TRUE(store_->PutRun(MakeRun("r1", "a")).ok());
  ASSERT_TRUE(store_->AppendEvents({Ev("s1", 1), Ev("r1", 1)}).ok());

  v1::Session closed = live;
  closed.set_status(v1::SESSION_STATUS_CLOSED);
  closed.mutable_closed_at()->set_seconds(1000);
  v1::Run r1 = MakeRun("r1", "a");
  r1.set_status(v1::RUN_STATUS_SUCCEEDED);
  // r1#1 is a duplicate: the batch fails, and the session's record goes with it.
  EXPECT_EQ(store_->AppendEventsWithRecords({Ev("s1", 2), Ev("r1", 1)}, {r1}, {closed}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetSession("s1")->status(), v1::SESSION_STATUS_ACTIVE);
  EXPECT_EQ(store_->GetRun("r1")->status(), v1::RUN_STATUS_RUNNING);
  EXPECT_EQ(*store_->LastSeq("s1"), 1);

  ASSERT_TRUE(store_->AppendEventsWithRecords({Ev("s1", 2)}, {}, {closed}).ok());
  Reopen();
  EXPECT_EQ(store_->GetSession("s1")->status(), v1::SESSION_STATUS_CLOSED);
  EXPECT_EQ(*store_->LastSeq("s1"), 2);
  EXPECT_TRUE(store_->ListSessions("a", false)->empty());
  EXPECT_EQ((*store_->FindSessionByIdempotencyKey("a", "k"))->request_sha256, "sha")
      << "written as PutSession writes: the fingerprint stays";
}

TEST_P(StoreContractTest, JournalRecordsAndErases) {
  JournalEntry e{"local-session:x", "local", "session", {{"uid", 100001}}};
  ASSERT_TRUE(store_->Record(e).ok());
  JournalEntry quick{"local-session:y", "local", "session", {{"uid", 100002}}};
  quick.durable = false;
  ASSERT_TRUE(store_->Record(quick).ok());
  e.details["uid"] = 100003;
  ASSERT_TRUE(store_->Record(e).ok()) << "recording an existing id replaces its details";
  auto entries = store_->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].details["uid"], 100003);
  EXPECT_EQ((*entries)[1].kind, "session");
  ASSERT_TRUE(store_->Erase("local-session:x").ok());
  ASSERT_TRUE(store_->Erase("local-session:x").ok());
  ASSERT_TRUE(store_->Erase("local-session:y").ok());
  EXPECT_TRUE(store_->List()->empty());
}

TEST_P(StoreContractTest, UnfinishedRunsAreListed) {
  ASSERT_TRUE(store_->PutRun(MakeRun("r1", "a")).ok());
  v1::Run done = MakeRun("r2", "a");
  done.set_status(v1::RUN_STATUS_FAILED);
  ASSERT_TRUE(store_->PutRun(done).ok());
  auto runs = store_->ListUnfinishedRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].id(), "r1");
}

TEST_P(StoreContractTest, AQueuedRunsRequestSurvivesReopenUntilTheRunStarts) {
  v1::Run queued = MakeRun("r1", "a");
  queued.set_status(v1::RUN_STATUS_QUEUED);
  ASSERT_TRUE(store_->PutRun(queued).ok());
  v1::RunAnalysisRequest req;
  req.set_playbook("financial-analyst");
  auto* in = req.add_inputs();
  in->set_name("data.csv");
  in->set_content(std::string("a,b\n\0\xff", 6));  // bytes, not text
  ASSERT_TRUE(store_->PutRunRequest("r1", req).ok());
  Reopen();
  auto got = store_->GetRunRequest("r1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->inputs(0).content(), std::string("a,b\n\0\xff", 6));
  ASSERT_TRUE(store_->PutRun(queued).ok()) << "still queued: kept";
  EXPECT_TRUE(store_->GetRunRequest("r1").ok());
  queued.set_status(v1::RUN_STATUS_RUNNING);
  ASSERT_TRUE(store_->PutRun(queued).ok());
  EXPECT_EQ(store_->GetRunRequest("r1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetRunRequest("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreContractTest, SessionsRoundTripListAndKeepTheirIdempotencyKey) {
  v1::Session s;
  s.set_id("s1");
  s.set_tenant("a");
  s.set_idempotency_key("k");
  s.set_status(v1::SESSION_STATUS_ACTIVE);
  ASSERT_TRUE(store_->PutSession(s).ok());
  v1::Session other = s;
  other.set_id("s2");
  EXPECT_EQ(store_->PutSession(other).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ((*store_->FindSessionByIdempotencyKey("a", "k"))->id, "s1");
  s.set_status(v1::SESSION_STATUS_CLOSED);
  s.mutable_closed_at()->set_seconds(1000);
  ASSERT_TRUE(store_->PutSession(s).ok());
  EXPECT_EQ(store_->GetSession("s1")->status(), v1::SESSION_STATUS_CLOSED);
  EXPECT_TRUE(store_->ListSessions("a", false)->empty());
  EXPECT_EQ(store_->ListSessions("a", true)->size(), 1u);
  EXPECT_EQ(store_->ListSessions("", true)->size(), 1u);
  EXPECT_EQ(store_->GetSession("nope").status().code(), absl::StatusCode::kNotFound);
  // Retention: the session ended at t=1000 s goes with a later cutoff.
  ASSERT_TRUE(store_->PurgeBefore(absl::FromUnixSeconds(999)).ok());
  EXPECT_TRUE(store_->GetSession("s1").ok());
  ASSERT_TRUE(store_->PurgeBefore(absl::FromUnixSeconds(1001)).ok());
  EXPECT_EQ(store_->GetSession("s1").status().code(), absl::StatusCode::kNotFound);
}

// Retention of runs: a finished run older than the cutoff goes with its events and kept
// request; a newer one, or one still running, stays.
TEST_P(StoreContractTest, PurgeBeforeDeletesOldFinishedRunsWithTheirEvents) {
  v1::Run old_run = MakeRun("old", "a");
  old_run.set_status(v1::RUN_STATUS_SUCCEEDED);
  old_run.mutable_finished_at()->set_seconds(1000);
  v1::Run new_run = old_run;
  new_run.set_id("new");
  new_run.mutable_finished_at()->set_seconds(3000);
  v1::Run running = MakeRun("running", "a");
  for (const v1::Run& r : {old_run, new_run, running}) {
    ASSERT_TRUE(store_->PutRun(r).ok());
    ASSERT_TRUE(store_->AppendEvent(Ev(r.id(), 1)).ok());
  }
  auto purged = store_->PurgeBefore(absl::FromUnixSeconds(2000));
  ASSERT_TRUE(purged.ok()) << purged.status();
  EXPECT_EQ(*purged, std::vector<std::string>{"old"});
  EXPECT_EQ(store_->GetRun("old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*store_->LastSeq("old"), 0);
  EXPECT_TRUE(store_->GetRun("new").ok());
  EXPECT_TRUE(store_->GetRun("running").ok());
  EXPECT_EQ(*store_->LastSeq("running"), 1);
}

// Two replicas on one database: each reads what the other wrote.
TEST_P(StoreContractTest, TwoInstancesOnOneDatabaseSeeEachOthersWrites) {
  std::unique_ptr<Store> other = Open();
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(store_->CreateRun(MakeRun("r1", "a", "k"), "fp").ok());
  ASSERT_TRUE(store_->AppendEvents({Ev("r1", 1), Ev("r1", 2)}).ok());
  EXPECT_EQ(other->GetRun("r1")->tenant(), "a");
  EXPECT_EQ((*other->FindRunByIdempotencyKey("a", "k"))->request_sha256, "fp");
  EXPECT_EQ(*other->LastSeq("r1"), 2);
  ASSERT_TRUE(other->AppendEvent(Ev("r1", 3)).ok());
  EXPECT_EQ(store_->AppendEvent(Ev("r1", 3)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->ReadEvents("r1", 0, 10)->size(), 3u);
  ASSERT_TRUE(other->Record({"openai-container:c", "openai", "container", {}}).ok());
  EXPECT_EQ(store_->List()->size(), 1u);
}

// The same idempotency key from two replicas at once: one row, the other ALREADY_EXISTS.
TEST_P(StoreContractTest, OneKeyFromTwoInstancesAtOnceMakesOneRow) {
  std::unique_ptr<Store> other = Open();
  ASSERT_NE(other, nullptr);
  for (int round = 0; round < 20; ++round) {
    const std::string key = "k" + std::to_string(round);
    std::atomic<int> go{0};
    absl::Status a, b;
    std::thread ta([&] {
      ++go;
      while (go.load() < 2) {
      }
      a = store_->CreateRun(MakeRun("a-" + key, "t", key), "fp-a");
    });
    std::thread tb([&] {
      ++go;
      while (go.load() < 2) {
      }
      b = other->CreateRun(MakeRun("b-" + key, "t", key), "fp-b");
    });
    ta.join();
    tb.join();
    EXPECT_NE(a.ok(), b.ok()) << key << ": " << a << " / " << b;
    const absl::Status& lost = a.ok() ? b : a;
    EXPECT_EQ(lost.code(), absl::StatusCode::kAlreadyExists) << lost;
    auto found = store_->FindRunByIdempotencyKey("t", key);
    ASSERT_TRUE(found.ok() && found->has_value());
    EXPECT_EQ((*found)->id, a.ok() ? "a-" + key : "b-" + key);
  }
  EXPECT_EQ(store_->ListRuns("t", 100, "")->runs.size(), 20u);
}

// Two replicas appending one run's events at once never store a seq twice: each seq is
// taken by exactly one of them, the other told ALREADY_EXISTS.
TEST_P(StoreContractTest, ConcurrentAppendsFromTwoInstancesNeverDuplicateASeq) {
  std::unique_ptr<Store> other = Open();
  ASSERT_NE(other, nullptr);
  constexpr int kSeqs = 200;
  std::atomic<int> stored{0}, refused{0}, failed{0};
  auto writer = [&](Store* s) {
    for (int seq = 1; seq <= kSeqs; ++seq) {
      absl::Status st = s->AppendEvents({Ev("r", seq)});
      if (st.ok()) {
        ++stored;
      } else if (st.code() == absl::StatusCode::kAlreadyExists) {
        ++refused;
      } else {
        ++failed;
        ADD_FAILURE() << st;
      }
    }
  };
  std::thread ta(writer, store_.get()), tb(writer, other.get());
  ta.join();
  tb.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(stored.load(), kSeqs);
  EXPECT_EQ(refused.load(), kSeqs);
  auto events = store_->ReadEvents("r", 0, 1000);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), static_cast<size_t>(kSeqs));
  for (int i = 0; i < kSeqs; ++i) EXPECT_EQ((*events)[i].seq(), i + 1);
}

// Four replicas started at once on a new database: each migrates or finds it migrated,
// none fails, and the schema works for all.
TEST_P(StoreContractTest, FourInstancesStartedAtOnceMigrateOnce) {
  store_.reset();
  backend_ = GetParam().make();  // a database nobody has opened yet
  std::vector<std::unique_ptr<Store>> stores(4);
  std::vector<absl::Status> errors(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto s = backend_->Open();
      if (s.ok()) {
        stores[i] = std::move(*s);
      } else {
        errors[i] = s.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(errors[i].ok()) << "instance " << i << ": " << errors[i];
    ASSERT_TRUE(stores[i]->PutRun(MakeRun("r" + std::to_string(i), "a")).ok());
  }
  EXPECT_EQ(stores[0]->ListRuns("", 10, "")->runs.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreContractTest,
                         ::testing::Values(testing::Sqlite(), testing::Postgres()),
                         [](const ::testing::TestParamInfo<testing::BackendKind>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace sandgate::store
