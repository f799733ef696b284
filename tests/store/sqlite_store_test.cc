#include "store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/fakes/largest_allocation.h"

namespace sandgate::store {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sg-store-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/state.db";
    auto s = SqliteStore::Open(path_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    std::system(("rm -rf " + dir_).c_str());
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
  std::string dir_, path_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreTest, RunsRoundTripAndSurviveReopen) {
  ASSERT_TRUE(store_->PutRun(MakeRun("r1", "a")).ok());
  v1::Run updated = MakeRun("r1", "a");
  updated.set_status(v1::RUN_STATUS_SUCCEEDED);
  ASSERT_TRUE(store_->PutRun(updated).ok());
  store_.reset();
  store_ = *SqliteStore::Open(path_);
  auto got = store_->GetRun("r1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_EQ(store_->GetRun("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, ListRunsIsTenantScopedNewestFirstAndPaged) {
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

TEST_F(SqliteStoreTest, IdempotencyKeyIsUniquePerTenant) {
  ASSERT_TRUE(store_->PutRun(MakeRun("r1", "a", "k")).ok());
  EXPECT_EQ(store_->PutRun(MakeRun("r2", "a", "k")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(store_->PutRun(MakeRun("r3", "b", "k")).ok());
  EXPECT_EQ((*store_->FindRunByIdempotencyKey("a", "k"))->id, "r1");
  EXPECT_FALSE(store_->FindRunByIdempotencyKey("a", "other")->has_value());
}

TEST_F(SqliteStoreTest, AKeyKeepsTheFingerprintOfTheRequestThatMadeIt) {
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

// A database made by the daemon before fingerprints (schema version 0) is
// migrated in place: its rows stay, with an empty fingerprint, and new rows get
// theirs.
TEST_F(SqliteStoreTest, MigratesAVersionZeroDatabase) {
  store_.reset();
  std::system(("rm -f " + path_ + "*").c_str());
  const std::string v0 =
      "CREATE TABLE runs (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT "
      "NULL UNIQUE, tenant TEXT NOT NULL, "
      "idempotency_key TEXT NOT NULL, status INTEGER NOT NULL, proto BLOB NOT "
      "NULL);"
      "CREATE UNIQUE INDEX runs_idempotency ON runs(tenant, idempotency_key) "
      "WHERE idempotency_key != '';"
      "CREATE TABLE sessions (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT "
      "NULL UNIQUE, tenant TEXT NOT NULL, "
      "idempotency_key TEXT NOT NULL, status INTEGER NOT NULL, proto BLOB NOT "
      "NULL);"
      "INSERT INTO runs(id, tenant, idempotency_key, status, proto) "
      "VALUES('old', 'a', 'k', 5, x'');"
      "INSERT INTO sessions(id, tenant, idempotency_key, status, proto) "
      "VALUES('s-old', 'a', 'k', 1, x'');";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, v0.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto reopened = SqliteStore::Open(path_);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  store_ = std::move(*reopened);
  auto old = store_->FindRunByIdempotencyKey("a", "k");
  ASSERT_TRUE(old.ok() && old->has_value()) << old.status();
  EXPECT_EQ((*old)->id, "old");
  EXPECT_EQ((*old)->request_sha256, "");
  EXPECT_EQ((*store_->FindSessionByIdempotencyKey("a", "k"))->request_sha256, "");
  ASSERT_TRUE(store_->CreateRun(MakeRun("new", "a", "k2"), "fp").ok());
  EXPECT_EQ((*store_->FindRunByIdempotencyKey("a", "k2"))->request_sha256, "fp");
  // Opening again does not migrate twice.
  store_.reset();
  auto again = SqliteStore::Open(path_);
  ASSERT_TRUE(again.ok()) << again.status();
  store_ = std::move(*again);
  EXPECT_EQ((*store_->FindRunByIdempotencyKey("a", "k2"))->request_sha256, "fp");
}

TEST_F(SqliteStoreTest, EventsAreDensePerRunAndReadAfterSeq) {
  for (int seq = 1; seq <= 4; ++seq) {
    v1::Event e;
    e.set_run_id("r1");
    e.set_seq(seq);
    e.set_type("notice");
    ASSERT_TRUE(store_->AppendEvent(e).ok());
  }
  v1::Event dup;
  dup.set_run_id("r1");
  dup.set_seq(2);
  EXPECT_EQ(store_->AppendEvent(dup).code(), absl::StatusCode::kAlreadyExists);
  auto events = store_->ReadEvents("r1", 2, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].seq(), 3);
  EXPECT_EQ(*store_->LastSeq("r1"), 4);
  EXPECT_EQ(*store_->LastSeq("none"), 0);
}

// The event log's group commit: a batch of several runs' events is stored whole or, when
// one of them cannot be, not at all (and the store takes the next batch).
TEST_F(SqliteStoreTest, ABatchOfEventsIsStoredWholeOrNotAtAll) {
  auto ev = [](const std::string& run, int64_t seq) {
    v1::Event e;
    e.set_run_id(run);
    e.set_seq(seq);
    e.set_type("notice");
    return e;
  };
  ASSERT_TRUE(store_->AppendEvents({ev("r1", 1), ev("r2", 1), ev("r1", 2)}).ok());
  EXPECT_EQ(store_->AppendEvents({ev("r2", 2), ev("r1", 2)}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*store_->LastSeq("r2"), 1) << "r2#2 was rolled back with the duplicate";
  ASSERT_TRUE(store_->AppendEvents({ev("r2", 2), ev("r1", 3)}).ok());
  EXPECT_EQ(*store_->LastSeq("r1"), 3);
  EXPECT_EQ(store_->ReadEvents("r2", 0, 10)->size(), 2u);
}

TEST_F(SqliteStoreTest, JournalRecordsAndErases) {
  JournalEntry e{"local-session:x", "local", "session", {{"uid", 100001}}};
  ASSERT_TRUE(store_->Record(e).ok());
  auto entries = store_->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].details["uid"], 100001);
  ASSERT_TRUE(store_->Erase("local-session:x").ok());
  ASSERT_TRUE(store_->Erase("local-session:x").ok());
  EXPECT_TRUE(store_->List()->empty());
}

// A record that need not survive a power loss (JournalEntry::durable false, a local sandbox's)
// still survives the daemon being killed right after Record returns: the next daemon sweeps.
TEST_F(SqliteStoreTest, ANonDurableRecordSurvivesAKilledDaemon) {
  store_.reset();
  pid_t pid = fork();
  if (pid == 0) {
    auto s = SqliteStore::Open(path_);
    JournalEntry e{"local-session:k", "local", "session", {{"uid", 100002}}};
    e.durable = false;
    _exit(s.ok() && (*s)->Record(e).ok() ? 0 : 1);  // no close, no checkpoint: killed
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  store_ = *SqliteStore::Open(path_);
  auto entries = store_->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].id, "local-session:k");
}

TEST_F(SqliteStoreTest, UnfinishedRunsAreListed) {
  ASSERT_TRUE(store_->PutRun(MakeRun("r1", "a")).ok());
  v1::Run done = MakeRun("r2", "a");
  done.set_status(v1::RUN_STATUS_FAILED);
  ASSERT_TRUE(store_->PutRun(done).ok());
  auto runs = store_->ListUnfinishedRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].id(), "r1");
}

TEST_F(SqliteStoreTest, AQueuedRunsRequestSurvivesReopenUntilTheRunStarts) {
  v1::Run queued = MakeRun("r1", "a");
  queued.set_status(v1::RUN_STATUS_QUEUED);
  ASSERT_TRUE(store_->PutRun(queued).ok());
  v1::RunAnalysisRequest req;
  req.set_playbook("financial-analyst");
  auto* in = req.add_inputs();
  in->set_name("data.csv");
  in->set_content(std::string("a,b\n\0\xff", 6));  // bytes, not text
  ASSERT_TRUE(store_->PutRunRequest("r1", req).ok());
  store_.reset();
  store_ = *SqliteStore::Open(path_);
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

// A kept request carries up to max_input_bytes of inputs: it streams into the database,
// with no serialized copy of it in memory (the daemon's RSS grew by one per queued run).
TEST_F(SqliteStoreTest, AKeptRequestStreamsIntoTheDatabaseWithoutACopyOfIt) {
  v1::RunAnalysisRequest req;
  req.set_playbook("financial-analyst");
  std::string content(48 << 20, 'x');
  for (size_t i = 0; i < content.size(); i += 4099) content[i] = static_cast<char>(i % 251);
  req.add_inputs()->set_name("big.csv");
  req.mutable_inputs(0)->set_content(content);
  req.add_inputs()->set_name("small.csv");
  req.mutable_inputs(1)->set_content("a,b\n1,2\n");
  {
    testing::LargestAllocation probe;
    ASSERT_TRUE(store_->PutRunRequest("r1", req).ok());
    EXPECT_LT(probe.bytes(), 1u << 20) << "a whole copy of the request was made";
  }
  req.mutable_inputs(1)->set_content("replaced");
  ASSERT_TRUE(store_->PutRunRequest("r1", req).ok()) << "kept again: replaced";
  store_.reset();
  store_ = *SqliteStore::Open(path_);
  absl::StatusOr<v1::RunAnalysisRequest> got;
  {
    testing::LargestAllocation probe;
    got = store_->GetRunRequest("r1");
    // The parsed request holds the content once; a copy of the row would be a second.
    EXPECT_LT(probe.total_bytes(), content.size() + (1u << 20)) << "the row was copied to parse it";
  }
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->inputs_size(), 2);
  EXPECT_TRUE(got->inputs(0).content() == content) << "the large input came back altered";
  EXPECT_EQ(got->inputs(1).content(), "replaced");
  EXPECT_EQ(got->playbook(), "financial-analyst");
}

TEST_F(SqliteStoreTest, SessionsRoundTripListAndKeepTheirIdempotencyKey) {
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
  *s.mutable_closed_at() = google::protobuf::Timestamp();
  s.mutable_closed_at()->set_seconds(1000);
  ASSERT_TRUE(store_->PutSession(s).ok());
  EXPECT_EQ(store_->GetSession("s1")->status(), v1::SESSION_STATUS_CLOSED);
  EXPECT_TRUE(store_->ListSessions("a", false)->empty());
  EXPECT_EQ(store_->ListSessions("a", true)->size(), 1u);
  EXPECT_EQ(store_->GetSession("nope").status().code(), absl::StatusCode::kNotFound);
  // Retention: the session ended at t=1000 s goes with a later cutoff.
  ASSERT_TRUE(store_->PurgeBefore(absl::FromUnixSeconds(999)).ok());
  EXPECT_TRUE(store_->GetSession("s1").ok());
  ASSERT_TRUE(store_->PurgeBefore(absl::FromUnixSeconds(1001)).ok());
  EXPECT_EQ(store_->GetSession("s1").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sandgate::store
