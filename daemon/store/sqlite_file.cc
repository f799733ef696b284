#include "store/sqlite_file.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace sandgate::store {

absl::StatusOr<sqlite3*> OpenSqliteFile(const std::string& path, const std::string& what) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return errors::Unavailable(absl::StrCat("cannot open ", what, " ", path, ": ", msg));
  }
  // Another connection's write holds the file for milliseconds; waiting for it is always right.
  sqlite3_busy_timeout(db, 5000);
  // Switching a new file to WAL needs it alone, and SQLite answers BUSY at once (no busy
  // wait) when another connection is opening it at the same moment: asked again within the
  // same 5 s. Once the file is in WAL mode the pragma is a no-op that needs no lock.
  char* err = nullptr;
  rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err);
  for (int tries = 0; rc == SQLITE_BUSY && tries < 500; ++tries) {
    sqlite3_free(err);
    err = nullptr;
    sqlite3_sleep(10);
    rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err);
  }
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    sqlite3_close(db);
    return errors::Internal(absl::StrCat("sqlite: PRAGMA journal_mode=WAL on ", path, ": ", msg));
  }
  return db;
}

}  // namespace sandgate::store
