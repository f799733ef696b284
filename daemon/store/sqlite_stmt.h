// Stmt: one prepared statement of SqliteStore's connection, finalized on every return path, or
// one of the store's cached statements, reset and unbound instead; and the parsing of the
// messages its rows hold. Shared by SqliteStore's two files (sqlite_store.cc: the records;
// sqlite_store_logs.cc: the event logs and the resource journal). Internal to the store.
//
//   Stmt s(db, "SELECT proto FROM runs WHERE id = ?1");
//   s.Bind(1, id);
//   if (s.Step() != SQLITE_ROW) return errors::NotFound("run", id);
//   return ParseBlob<v1::Run>(s.Blob(0), "run");
//
// Not thread safe: the caller holds the store's lock.
#ifndef SANDGATE_STORE_SQLITE_STMT_H_
#define SANDGATE_STORE_SQLITE_STMT_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::store {

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  explicit Stmt(sqlite3_stmt* cached)
      : stmt_(cached), cached_(true), rc_(cached ? SQLITE_OK : SQLITE_ERROR) {}
  ~Stmt() {
    if (!cached_) {
      sqlite3_finalize(stmt_);
    } else if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  bool ok() const { return rc_ == SQLITE_OK; }
  void Bind(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void BindBlob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int Step() { return sqlite3_step(stmt_); }
  std::string Text(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return p ? std::string(static_cast<const char*>(p), n) : std::string();
  }
  // The column's bytes in SQLite's own buffer, valid until the next Step: no copy, for a
  // row that may hold max_input_bytes.
  absl::string_view Blob(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return p ? absl::string_view(static_cast<const char*>(p), n) : absl::string_view();
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  bool cached_ = false;
  int rc_;
};

template <typename Message>
absl::StatusOr<Message> ParseBlob(absl::string_view blob, absl::string_view what) {
  Message m;
  if (!m.ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
    return errors::Internal(absl::StrCat("corrupt ", what, " row"));
  }
  return m;
}

// Every row's first column parsed as a Message, in order.
template <typename Message>
absl::StatusOr<std::vector<Message>> CollectProtos(Stmt& s, absl::string_view what) {
  std::vector<Message> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    SANDGATE_ASSIGN_OR_RETURN(Message m, ParseBlob<Message>(s.Text(0), what));
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE)
    return errors::Internal(absl::StrCat("sqlite: reading ", what, " rows failed"));
  return out;
}

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SQLITE_STMT_H_
