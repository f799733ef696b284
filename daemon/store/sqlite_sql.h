// The statements of the tables that keep their own connection to the state file (the
// admission queue, the lease table, the snapshots):
//
// - Sql: one prepared statement with its parameters bound, finalized on every path;
// - SqlTx: one operation's statements with the operation's name bound once for their errors
//   ("sqlite: release run: <SQLite's message>"), optionally as one BEGIN IMMEDIATE transaction.
//
//   absl::MutexLock lock(&mu_);
//   SqlTx tx(db_, "release run");
//   return tx.Immediate([&]() -> absl::Status {
//     Sql claimed = tx.Query("SELECT tenant FROM admission_queue WHERE run_id = ?1", {id});
//     SANDGATE_ASSIGN_OR_RETURN(bool found, claimed.Row());
//     if (!found) return absl::OkStatus();
//     return tx.Run("UPDATE admission_tenants SET running = running - 1 WHERE tenant = ?1",
//                   {claimed.Text(0)});
//   });
//
// Not thread safe: the caller holds its connection's lock for as long as it uses either.
#ifndef SANDGATE_STORE_SQLITE_SQL_H_
#define SANDGATE_STORE_SQLITE_SQL_H_

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace sandgate::store {

// A BLOB parameter (a record's serialized message), bound as one, not as text.
struct Blob {
  std::string bytes;
};
// A time is bound, and read back (Sql::Time), as unix nanoseconds.
using Value = std::variant<std::string, int64_t, Blob, absl::Time>;

// One prepared statement with its parameters bound (?1..), finalized on every path. `what`
// (a string literal, or one that outlives the statement) names it in errors. A statement that
// fails to prepare reports SQLite's error at its first Row or Run.
class Sql {
 public:
  Sql(sqlite3* db, const char* what, const std::string& sql, std::initializer_list<Value> params);
  Sql(const Sql&) = delete;
  Sql& operator=(const Sql&) = delete;
  ~Sql() { sqlite3_finalize(s_); }

  // Steps once: true at a row (read it with Text, Int, Bytes), false when there are no more.
  absl::StatusOr<bool> Row();
  // Steps through every row, calling `row` at each to read it.
  absl::Status ForEachRow(const std::function<void()>& row);
  // Runs a statement without rows; the rows it changed.
  absl::StatusOr<int> Run();

  std::string Text(int col);
  int64_t Int(int col) { return sqlite3_column_int64(s_, col); }
  absl::Time Time(int col) { return absl::FromUnixNanos(Int(col)); }
  std::string Bytes(int col);

 private:
  sqlite3* const db_;
  const char* const what_;
  sqlite3_stmt* s_ = nullptr;
  bool ok_ = false;
};

// One operation's statements on a connection, named once. Outside Immediate each statement is
// its own transaction (autocommit). Borrows the connection (its owner keeps it open and
// locked) and opens nothing itself: made per call, passed by const reference to the helpers
// of one operation.
class SqlTx {
 public:
  // `what` is a string literal naming the operation in every error ("claim run").
  SqlTx(sqlite3* db, const char* what) : db_(db), what_(what) {}

  // A statement to step through (Sql::Row, ForEachRow).
  Sql Query(const std::string& sql, std::initializer_list<Value> params) const {
    return Sql(db_, what_, sql, params);
  }
  // Whether the query has a row.
  absl::StatusOr<bool> HasRow(const std::string& sql, std::initializer_list<Value> params) const {
    return Query(sql, params).Row();
  }
  // The query's first column as an integer (a count, a version); 0 when it has no row.
  absl::StatusOr<int64_t> Int(const std::string& sql, std::initializer_list<Value> params) const;
  // Runs a statement without rows.
  absl::Status Run(const std::string& sql, std::initializer_list<Value> params) const {
    return Changed(sql, params).status();
  }
  // Runs a statement without rows; the rows it changed.
  absl::StatusOr<int> Changed(const std::string& sql, std::initializer_list<Value> params) const {
    return Query(sql, params).Run();
  }
  // Runs a script of statements without parameters or rows (a schema, a PRAGMA), each in turn.
  absl::Status Script(const std::string& sql) const;

  // Runs `body` (this SqlTx's statements) as one BEGIN IMMEDIATE transaction: it takes the
  // write lock first (waiting up to the connection's busy timeout), so what body reads no
  // other connection or process changes before its writes commit. Commits when body succeeds,
  // else rolls back. Returns body's result (an absl::Status, or an absl::StatusOr<T> for an
  // operation with an answer), or the first error: BEGIN's, body's or COMMIT's.
  template <typename Body>
  auto Immediate(Body body) const -> decltype(body()) {
    SANDGATE_RETURN_IF_ERROR(Script("BEGIN IMMEDIATE"));
    decltype(body()) result = body();
    SANDGATE_RETURN_IF_ERROR(End(StatusOf(result)));
    return result;
  }

 private:
  // After Immediate's body: COMMIT if it succeeded, else ROLLBACK; the first error.
  absl::Status End(const absl::Status& body) const;
  static const absl::Status& StatusOf(const absl::Status& s) { return s; }
  template <typename T>
  static const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
    return s.status();
  }

  sqlite3* const db_;
  const char* const what_;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SQLITE_SQL_H_
