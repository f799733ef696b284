#include "store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/fakes/largest_allocation.h"

// What only SqliteStore does (its file, its migrations, its blob I/O); the Store contract
// itself runs on every store in store_contract_test.cc.
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

}  // namespace
}  // namespace sandgate::store
