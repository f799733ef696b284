// Sql: one prepared SQLite statement with its parameters bound, finalized on every path, for
// the tables that keep their own connection to the state file (the admission queue, the
// snapshots).
//
//   Sql s(db, "SELECT proto FROM snapshots WHERE id = ?1", {id});
//   SANDGATE_ASSIGN_OR_RETURN(bool row, s.Row("get snapshot"));
//   if (row) use(s.Bytes(0));
//
// Not thread safe: the caller holds its connection's lock.
#ifndef SANDGATE_STORE_SQLITE_SQL_H_
#define SANDGATE_STORE_SQLITE_SQL_H_

#include <sqlite3.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::store {

// A BLOB parameter (a record's serialized message), bound as one, not as text.
struct Blob {
  std::string bytes;
};
using Value = std::variant<std::string, int64_t, Blob>;

// One prepared statement with its parameters bound (?1..), finalized on every path.
class Sql {
 public:
  Sql(sqlite3* db, const std::string& sql, std::initializer_list<Value> params) : db_(db) {
    ok_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr) == SQLITE_OK;
    int i = 1;
    for (const Value& v : params) {
      if (const auto* t = std::get_if<std::string>(&v)) {
        sqlite3_bind_text(s_, i++, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
      } else if (const auto* b = std::get_if<Blob>(&v)) {
        sqlite3_bind_blob(s_, i++, b->bytes.data(), static_cast<int>(b->bytes.size()),
                          SQLITE_TRANSIENT);
      } else {
        sqlite3_bind_int64(s_, i++, std::get<int64_t>(v));
      }
    }
  }
  ~Sql() { sqlite3_finalize(s_); }
  // SQLITE_ROW, SQLITE_DONE, or the error as a Status naming `what`.
  absl::StatusOr<bool> Row(const char* what) {
    int rc = ok_ ? sqlite3_step(s_) : SQLITE_ERROR;
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return errors::Internal(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db_)));
  }
  // Runs a statement without rows; the rows it changed.
  absl::StatusOr<int> Run(const char* what) {
    SANDGATE_ASSIGN_OR_RETURN(bool row, Row(what));
    (void)row;
    return sqlite3_changes(db_);
  }
  std::string Text(int col) {
    const unsigned char* p = sqlite3_column_text(s_, col);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
  int64_t Int(int col) { return sqlite3_column_int64(s_, col); }
  std::string Bytes(int col) {
    const void* p = sqlite3_column_blob(s_, col);
    return p ? std::string(static_cast<const char*>(p), sqlite3_column_bytes(s_, col))
             : std::string();
  }

 private:
  sqlite3* const db_;
  sqlite3_stmt* s_ = nullptr;
  bool ok_ = false;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SQLITE_SQL_H_
