// A SQLite state file as an older version left it, for the tests that open one: `sql` (its
// tables and rows) run on a new file at `path`. An error names what SQLite said.
//
//   ASSERT_TRUE(WriteOldStateFile(path, "CREATE TABLE t (x); INSERT INTO t VALUES(1)").ok());
#ifndef SANDGATE_TESTS_STORE_OLD_STATE_FILE_H_
#define SANDGATE_TESTS_STORE_OLD_STATE_FILE_H_

#include <sqlite3.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sandgate::store {

inline absl::Status WriteOldStateFile(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    absl::Status error =
        absl::InternalError(absl::StrCat("opening ", path, ": ", sqlite3_errmsg(db)));
    sqlite3_close(db);
    return error;
  }
  char* message = nullptr;
  absl::Status st;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    st = absl::InternalError(absl::StrCat("writing ", path, ": ", message ? message : "?"));
  }
  sqlite3_free(message);
  sqlite3_close(db);
  return st;
}

}  // namespace sandgate::store

#endif  // SANDGATE_TESTS_STORE_OLD_STATE_FILE_H_
