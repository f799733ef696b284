#include "store/sqlite_sql.h"

#include <sqlite3.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/sqlite_file.h"
#include "tests/common/temp_dir.h"

// Sql and SqlTx (store/sqlite_sql.h) on a real SQLite file, with a second connection to it
// as another daemon on the host would hold.
namespace sandgate::store {
namespace {

using Db = std::unique_ptr<sqlite3, decltype(&sqlite3_close)>;

class SqlTxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    db_ = Open();
    ASSERT_NE(db_, nullptr);
    ASSERT_TRUE(
        SqlTx(db_.get(), "set up").Script("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER)").ok());
  }
  Db Open() {
    absl::StatusOr<sqlite3*> db = OpenSqliteFile(dir_.path() + "/state.db", "test database");
    EXPECT_TRUE(db.ok()) << db.status();
    return Db(db.ok() ? *db : nullptr, &sqlite3_close);
  }
  // The rows of t as "k=n", in key order, read on `db`.
  static std::vector<std::string> Rows(sqlite3* db) {
    std::vector<std::string> out;
    Sql s(db, "read t", "SELECT k, n FROM t ORDER BY k", {});
    absl::Status st =
        s.ForEachRow([&] { out.push_back(s.Text(0) + "=" + std::to_string(s.Int(1))); });
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }

  testing::ScopedTempDir dir_{"sg-sqltx"};
  Db db_{nullptr, &sqlite3_close};
};

TEST_F(SqlTxTest, ImmediateCommitsWhatItsBodyWroteWhenTheBodySucceeds) {
  SqlTx tx(db_.get(), "add rows");
  absl::Status st = tx.Immediate([&]() -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES(?1, ?2)", {"a", int64_t{1}}));
    return tx.Run("INSERT INTO t VALUES(?1, ?2)", {"b", int64_t{2}});
  });
  ASSERT_TRUE(st.ok()) << st;
  Db other = Open();
  EXPECT_EQ(Rows(other.get()), (std::vector<std::string>{"a=1", "b=2"}));
}

TEST_F(SqlTxTest, ImmediateRollsBackAndReturnsTheBodysError) {
  SqlTx tx(db_.get(), "add rows");
  absl::Status st = tx.Immediate([&]() -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES(?1, ?2)", {"a", int64_t{1}}));
    return absl::ResourceExhaustedError("queue full");
  });
  EXPECT_EQ(st, absl::ResourceExhaustedError("queue full"));
  EXPECT_TRUE(Rows(db_.get()).empty()) << "rolled back";
  // The connection is outside any transaction again: the next one begins.
  EXPECT_TRUE(tx.Immediate([] { return absl::OkStatus(); }).ok());
}

TEST_F(SqlTxTest, ImmediateReturnsTheBodysAnswerOrRollsBackOnAnError) {
  SqlTx tx(db_.get(), "count rows");
  absl::StatusOr<int64_t> n = tx.Immediate([&]() -> absl::StatusOr<int64_t> {
    SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES('a', 1)", {}));
    return tx.Int("SELECT count(*) FROM t", {});
  });
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  absl::StatusOr<int64_t> failed = tx.Immediate([&]() -> absl::StatusOr<int64_t> {
    SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES('b', 2)", {}));
    SANDGATE_RETURN_IF_ERROR(tx.Run("INSERT INTO t VALUES('a', 3)", {}));  // the key is taken
    return 2;
  });
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(Rows(db_.get()), std::vector<std::string>{"a=1"}) << "b rolled back";
}

// IMMEDIATE takes the write lock at BEGIN: while the body runs, even before it writes, another
// connection cannot write (it would wait; with no busy wait it is refused at once).
TEST_F(SqlTxTest, ImmediateHoldsTheWriteLockForTheWholeBody) {
  Db other = Open();
  sqlite3_busy_timeout(other.get(), 0);
  SqlTx tx(db_.get(), "read then write");
  absl::Status other_write;
  absl::Status st = tx.Immediate([&]() -> absl::Status {
    SANDGATE_ASSIGN_OR_RETURN(int64_t n, tx.Int("SELECT count(*) FROM t", {}));
    other_write = SqlTx(other.get(), "other daemon").Run("INSERT INTO t VALUES('x', 9)", {});
    return tx.Run("INSERT INTO t VALUES('a', ?1)", {n});
  });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_FALSE(other_write.ok());
  EXPECT_TRUE(absl::StrContains(other_write.message(), "sqlite: other daemon: database is locked"))
      << other_write;
  EXPECT_EQ(Rows(db_.get()), std::vector<std::string>{"a=0"});
}

TEST_F(SqlTxTest, ErrorsNameTheOperation) {
  SqlTx tx(db_.get(), "claim run");
  absl::Status bad = tx.Run("UPDATE no_such_table SET n = 1", {});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StartsWith(bad.message(), "sqlite: claim run: no such table")) << bad;
  absl::Status script = tx.Script("CREATE TABLE t (k TEXT)");
  EXPECT_TRUE(absl::StartsWith(script.message(), "sqlite: claim run: table t already exists"))
      << script;
}

TEST_F(SqlTxTest, QueriesAnswerRowsCountsAndChanges) {
  SqlTx tx(db_.get(), "query");
  ASSERT_TRUE(tx.Script("INSERT INTO t VALUES('a', 1); INSERT INTO t VALUES('b', 2);").ok());
  EXPECT_EQ(*tx.HasRow("SELECT 1 FROM t WHERE k = ?1", {"a"}), true);
  EXPECT_EQ(*tx.HasRow("SELECT 1 FROM t WHERE k = ?1", {"z"}), false);
  EXPECT_EQ(*tx.Int("SELECT n FROM t WHERE k = ?1", {"b"}), 2);
  EXPECT_EQ(*tx.Int("SELECT n FROM t WHERE k = ?1", {"z"}), 0) << "no row";
  EXPECT_EQ(*tx.Changed("UPDATE t SET n = n + 1", {}), 2);
  EXPECT_EQ(*tx.Changed("DELETE FROM t WHERE k = ?1", {"z"}), 0);
  Sql blob = tx.Query("SELECT ?1", {Blob{std::string("a\0b", 3)}});
  ASSERT_TRUE(*blob.Row());
  EXPECT_EQ(blob.Bytes(0), std::string("a\0b", 3));
}

}  // namespace
}  // namespace sandgate::store
