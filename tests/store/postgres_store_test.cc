// What only PostgresStore has: its connection pool, the password path, schema versions
// across binaries and components. The Store contract itself is store_contract_test.cc.
#include "store/postgres_store.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "store/postgres_schema.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/postgres_server.h"

namespace sandgate::store {
namespace {

using sandgate::testing::PostgresServer;

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dsn = PostgresServer::Shared().CreateDatabase();
    ASSERT_TRUE(dsn.ok()) << dsn.status();
    options_.dsn = *dsn;
  }
  PostgresOptions options_;
};

TEST_F(PostgresStoreTest, ADatabaseWithANewerSchemaIsRefused) {
  {
    auto store = PostgresStore::Open(options_);
    ASSERT_TRUE(store.ok()) << store.status();
    auto conn = (*store)->database().Acquire("test");
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE((*conn)
                    ->Run("test", "UPDATE schema_version SET version = 99 WHERE component = $1",
                          PgParams().Text(kStoreComponent))
                    .ok());
  }
  auto again = PostgresStore::Open(options_);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("version 99, newer than this sandgated's 1"),
            std::string::npos)
      << again.status();
}

// Another component (the replica tables) keeps its own version: its steps run once each,
// a later binary's new step alone.
TEST_F(PostgresStoreTest, EachComponentMigratesItsOwnSteps) {
  auto db = PostgresDatabase::Open(options_);
  ASSERT_TRUE(db.ok()) << db.status();
  const char* two[] = {"CREATE TABLE a (x INT)", "INSERT INTO a VALUES (1)"};
  ASSERT_TRUE(MigrateSchema(**db, "test", two).ok());
  ASSERT_TRUE(MigrateSchema(**db, "test", two).ok()) << "nothing to do the second time";
  const char* three[] = {two[0], two[1], "INSERT INTO a VALUES (2)"};
  ASSERT_TRUE(MigrateSchema(**db, "test", three).ok());
  EXPECT_EQ(*SchemaVersion(**db, "test"), 3);
  EXPECT_EQ(*SchemaVersion(**db, kStoreComponent), 0) << "the store has not been opened";
  auto conn = (*db)->Acquire("test");
  ASSERT_TRUE(conn.ok());
  auto rows = (*conn)->Exec("test", "SELECT count(*) FROM a");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->Int(0, 0), 2) << "each step ran exactly once";
  // A failing step leaves the version where it was, naming the step.
  const char* bad[] = {two[0], two[1], three[2], "SELECT nosuchcolumn FROM a"};
  absl::Status st = MigrateSchema(**db, "test", bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("'test' to version 4"), std::string::npos) << st;
  EXPECT_NE(st.message().find("nosuchcolumn"), std::string::npos) << st;
  EXPECT_EQ(*SchemaVersion(**db, "test"), 3);
}

// PostgresDatabase::Transaction: the body's statements commit together, or none does when
// one fails; the body's value comes back once committed; every error names the operation.
TEST_F(PostgresStoreTest, ATransactionCommitsAllOrNothingAndNamesItsOperation) {
  auto db = PostgresDatabase::Open(options_);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Run("test", "CREATE TABLE t (x INT PRIMARY KEY)").ok());
  absl::StatusOr<int64_t> two =
      (*db)->Transaction("add two", [](PgTx& tx) -> absl::StatusOr<int64_t> {
        SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES (1)"));
        SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES ($1)", PgParams().Int(2)));
        SANDGATE_ASSIGN_OR_RETURN(PgResult r, tx.Exec("SELECT count(*) FROM t"));
        return r.Int(0, 0);
      });
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, 2);
  absl::Status failed = (*db)->Transaction("add three", [](PgTx& tx) -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES (3)"));
    return tx.Run("INSERT INTO t VALUES (1)");
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kAlreadyExists) << failed;
  EXPECT_EQ(failed.message().rfind("postgres add three: ", 0), 0u) << failed;
  absl::Status refused = (*db)->Transaction("refuse", [](PgTx& tx) -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES (4)"));
    return absl::FailedPreconditionError("the body says no");
  });
  EXPECT_EQ(refused, absl::FailedPreconditionError("the body says no"));
  auto rows = (*db)->Exec("count", "SELECT count(*) FROM t");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->Int(0, 0), 2) << "3 and 4 were rolled back";
  auto bad = (*db)->Exec("read nothing", "SELECT nosuchcolumn FROM t");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(bad.status().message().rfind("postgres read nothing: ", 0), 0u) << bad.status();
}

TEST_F(PostgresStoreTest, ADsnHoldingAPasswordIsRefused) {
  options_.dsn += " password=hunter2";
  auto store = PostgresStore::Open(options_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("store.dsn"), std::string::npos);
  EXPECT_EQ(store.status().message().find("hunter2"), std::string::npos);
}

TEST_F(PostgresStoreTest, ThePasswordLogsInAndAWrongOneIsNeverEchoed) {
  PostgresOptions o = options_;
  o.dsn = PostgresServer::Shared().Dsn(
      options_.dsn.substr(options_.dsn.find("dbname=") + 7,
                          options_.dsn.find(" user=") - options_.dsn.find("dbname=") - 7),
      PostgresServer::kPasswordUser);
  o.password = "wrong-password-1234";
  auto wrong = PostgresStore::Open(o);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(wrong.status().message().find("password authentication failed"), std::string::npos)
      << wrong.status();
  EXPECT_EQ(wrong.status().message().find("wrong-password-1234"), std::string::npos);
  o.password = PostgresServer::kPassword;
  auto right = PostgresStore::Open(o);
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_TRUE((*right)->AppendEvent(v1::Event()).ok());
}

// Every connection busy: Acquire waits, through the injected clock, at most
// acquire_timeout, then says so.
TEST_F(PostgresStoreTest, AcquireWaitsForAFreeConnectionAtMostTheTimeout) {
  sandgate::testing::FakeClock clock;
  options_.pool_size = 1;
  options_.acquire_timeout = absl::Seconds(5);
  options_.clock = &clock;
  auto db = PostgresDatabase::Open(options_);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<PgLease> held = (*db)->Acquire("holder");
  ASSERT_TRUE(held.ok());
  absl::Status waited;
  std::thread waiter([&] { waited = (*db)->Acquire("waiter").status(); });
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  clock.Advance(absl::Seconds(5) - absl::Nanoseconds(1));
  ASSERT_TRUE(clock.BlockUntilSettled(1)) << "still waiting just before the timeout";
  clock.Advance(absl::Nanoseconds(1));
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(waited.message().find("waiter: all 1 connections busy for 5s"), std::string::npos)
      << waited;
  // A connection given back is taken by the next waiter at once.
  std::thread second([&] { waited = (*db)->Acquire("second").status(); });
  ASSERT_TRUE(clock.BlockUntilSettled(1));
  held = absl::UnavailableError("given back");
  second.join();
  EXPECT_TRUE(waited.ok()) << waited;
}

// A connection the server dropped fails the statement it was running (UNAVAILABLE, with the
// server's reason) and is replaced: the next statement works.
TEST_F(PostgresStoreTest, ADroppedConnectionIsReplaced) {
  options_.pool_size = 1;
  auto store = PostgresStore::Open(options_);
  ASSERT_TRUE(store.ok()) << store.status();
  int64_t pid;
  {
    auto conn = (*store)->database().Acquire("test");
    ASSERT_TRUE(conn.ok());
    auto r = (*conn)->Exec("test", "SELECT pg_backend_pid()");
    ASSERT_TRUE(r.ok());
    pid = r->Int(0, 0);
  }
  auto killer = PostgresDatabase::Open(options_);
  ASSERT_TRUE(killer.ok());
  auto kconn = (*killer)->Acquire("kill");
  ASSERT_TRUE(kconn.ok());
  ASSERT_TRUE((*kconn)->Run("kill", "SELECT pg_terminate_backend($1)", PgParams().Int(pid)).ok());
  absl::StatusOr<v1::Run> lost = (*store)->GetRun("r");
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_NE(lost.status().message().find("postgres get run"), std::string::npos) << lost.status();
  EXPECT_EQ((*store)->GetRun("r").status().code(), absl::StatusCode::kNotFound);
}

// store.password_file: the password without its newline; refused, naming the file, when
// others may read it or it is not there. The password is never in the error.
TEST(PasswordFileTest, ReadsThePasswordAndRefusesAFileOthersCanRead) {
  char tmpl[] = "/tmp/sg-pw-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/pw";
  std::ofstream(path) << "s3cret-pw\n";
  chmod(path.c_str(), 0600);
  auto pw = ReadPasswordFile(path);
  ASSERT_TRUE(pw.ok()) << pw.status();
  EXPECT_EQ(*pw, "s3cret-pw");
  chmod(path.c_str(), 0644);
  auto open = ReadPasswordFile(path);
  EXPECT_EQ(open.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(open.status().message().find(path), std::string::npos) << open.status();
  EXPECT_NE(open.status().message().find("mode 0644"), std::string::npos) << open.status();
  EXPECT_EQ(open.status().message().find("s3cret"), std::string::npos);
  EXPECT_EQ(ReadPasswordFile(dir + "/none").status().code(), absl::StatusCode::kNotFound);
  std::ofstream(path, std::ios::trunc) << "\n";
  chmod(path.c_str(), 0600);
  EXPECT_EQ(ReadPasswordFile(path).status().code(), absl::StatusCode::kInvalidArgument);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace sandgate::store
