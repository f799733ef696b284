// OpenSqliteFile: how every sandgate table on SQLite opens its file, so the state store and
// the replica lease table (which may share one file, and which other daemons on the host may
// open too) agree on the flags, the busy wait and the journal mode.
#ifndef SANDGATE_STORE_SQLITE_FILE_H_
#define SANDGATE_STORE_SQLITE_FILE_H_

#include <sqlite3.h>

#include <string>

#include "absl/status/statusor.h"

namespace sandgate::store {

// Opens (creating it if needed) the database at `path` for use from any thread, waits up to
// 5 s for another connection's write lock instead of failing, and switches it to WAL. `what`
// names the database in errors ("state database"). The caller owns the handle (sqlite3_close).
absl::StatusOr<sqlite3*> OpenSqliteFile(const std::string& path, const std::string& what);

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SQLITE_FILE_H_
