#include "store/sqlite_sql.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::store {

Sql::Sql(sqlite3* db, const char* what, const std::string& sql, std::initializer_list<Value> params)
    : db_(db), what_(what) {
  ok_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr) == SQLITE_OK;
  int i = 1;
  for (const Value& v : params) {
    if (const auto* t = std::get_if<std::string>(&v)) {
      sqlite3_bind_text(s_, i++, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
    } else if (const auto* b = std::get_if<Blob>(&v)) {
      sqlite3_bind_blob(s_, i++, b->bytes.data(), static_cast<int>(b->bytes.size()),
                        SQLITE_TRANSIENT);
    } else if (const auto* time = std::get_if<absl::Time>(&v)) {
      sqlite3_bind_int64(s_, i++, absl::ToUnixNanos(*time));
    } else {
      sqlite3_bind_int64(s_, i++, std::get<int64_t>(v));
    }
  }
}

absl::StatusOr<bool> Sql::Row() {
  int rc = ok_ ? sqlite3_step(s_) : SQLITE_ERROR;
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return errors::Internal(absl::StrCat("sqlite: ", what_, ": ", sqlite3_errmsg(db_)));
}

absl::Status Sql::ForEachRow(const std::function<void()>& row) {
  for (;;) {
    SANDGATE_ASSIGN_OR_RETURN(bool more, Row());
    if (!more) return absl::OkStatus();
    row();
  }
}

absl::StatusOr<int> Sql::Run() {
  SANDGATE_ASSIGN_OR_RETURN(bool row, Row());
  (void)row;
  return sqlite3_changes(db_);
}

std::string Sql::Text(int col) {
  const unsigned char* p = sqlite3_column_text(s_, col);
  return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
}

std::string Sql::Bytes(int col) {
  const void* p = sqlite3_column_blob(s_, col);
  return p ? std::string(static_cast<const char*>(p), sqlite3_column_bytes(s_, col))
           : std::string();
}

absl::StatusOr<int64_t> SqlTx::Int(const std::string& sql,
                                   std::initializer_list<Value> params) const {
  Sql s = Query(sql, params);
  SANDGATE_ASSIGN_OR_RETURN(bool row, s.Row());
  return row ? s.Int(0) : 0;
}

absl::Status SqlTx::Script(const std::string& sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) == SQLITE_OK) return absl::OkStatus();
  absl::Status st =
      errors::Internal(absl::StrCat("sqlite: ", what_, ": ", err ? err : "unknown error"));
  sqlite3_free(err);
  return st;
}

absl::Status SqlTx::End(const absl::Status& body) const {
  absl::Status st = body.ok() ? Script("COMMIT") : body;
  // A failed COMMIT may leave the transaction open; the first error is the one to report.
  if (!st.ok()) (void)Script("ROLLBACK");
  return st;
}

}  // namespace sandgate::store
