#include "store/sqlite_snapshot_store.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "store/sqlite_file.h"
#include "store/sqlite_sql.h"

namespace sandgate::store {
namespace {

constexpr const char kComponent[] = "snapshots";

// Each step takes component "snapshots" from version i to i + 1, as on PostgreSQL
// (postgres_snapshot_store.cc holds the same table); a new step is appended, never edited.
constexpr const char* kSteps[] = {
    R"sql(
CREATE TABLE snapshots (
  n INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  session_id TEXT NOT NULL,
  created_ns INTEGER NOT NULL,
  proto BLOB NOT NULL);
CREATE INDEX snapshots_tenant ON snapshots(tenant, n);
CREATE INDEX snapshots_created ON snapshots(created_ns);
)sql",
};
constexpr int64_t kVersion = sizeof(kSteps) / sizeof(kSteps[0]);

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteSnapshotStore>> SqliteSnapshotStore::Open(
    const std::string& path) {
  SANDGATE_ASSIGN_OR_RETURN(sqlite3 * db, OpenSqliteFile(path, "state database"));
  std::unique_ptr<SqliteSnapshotStore> store(new SqliteSnapshotStore(db));
  absl::MutexLock lock(&store->mu_);
  SANDGATE_RETURN_IF_ERROR(SqlTx(db, "snapshots").Script("PRAGMA synchronous=NORMAL"));
  SANDGATE_RETURN_IF_ERROR(store->Migrate());
  return store;
}

SqliteSnapshotStore::~SqliteSnapshotStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::Status SqliteSnapshotStore::Migrate() {
  // Read inside the write transaction: another daemon on the file migrating at once waits.
  SqlTx tx(db_, "migrate snapshots");
  return tx.Immediate([&]() -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(
        tx.Script("CREATE TABLE IF NOT EXISTS schema_version ("
                  "component TEXT PRIMARY KEY, version INTEGER NOT NULL)"));
    SANDGATE_ASSIGN_OR_RETURN(
        const int64_t version,
        tx.Int("SELECT version FROM schema_version WHERE component = ?1", {kComponent}));
    if (version > kVersion) {
      return errors::FailedPrecondition(absl::StrCat("state database has snapshots schema version ",
                                                     version, ", newer than this daemon's ",
                                                     kVersion, "; run the newer sandgated"));
    }
    for (int64_t v = version; v < kVersion; ++v) SANDGATE_RETURN_IF_ERROR(tx.Script(kSteps[v]));
    return tx.Run(
        "INSERT INTO schema_version(component, version) VALUES(?1, ?2) "
        "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
        {kComponent, kVersion});
  });
}

absl::Status SqliteSnapshotStore::Create(const v1::Snapshot& snapshot) {
  absl::MutexLock lock(&mu_);
  Sql s(db_, "create snapshot",
        "INSERT INTO snapshots(id, tenant, session_id, created_ns, proto) "
        "VALUES(?1, ?2, ?3, ?4, ?5)",
        {snapshot.id(), snapshot.tenant(), snapshot.session_id(), SnapshotCreatedNs(snapshot),
         Blob{snapshot.SerializeAsString()}});
  absl::StatusOr<int> changed = s.Run();
  if (!changed.ok() && sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_UNIQUE) {
    return errors::AlreadyExists("snapshot", snapshot.id());
  }
  return changed.status();
}

absl::StatusOr<v1::Snapshot> SqliteSnapshotStore::Get(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Sql s(db_, "get snapshot", "SELECT proto FROM snapshots WHERE id = ?1", {id});
  SANDGATE_ASSIGN_OR_RETURN(bool row, s.Row());
  if (!row) return errors::NotFound("snapshot", id);
  return ParseSnapshotRecord(id, s.Bytes(0));
}

absl::StatusOr<std::vector<v1::Snapshot>> SqliteSnapshotStore::List(const std::string& tenant,
                                                                    const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  Sql s(db_, "list snapshots",
        "SELECT id, proto FROM snapshots WHERE tenant = ?1 AND (?2 = '' OR session_id = ?2) "
        "ORDER BY n DESC",
        {tenant, session_id});
  std::vector<v1::Snapshot> out;
  for (;;) {
    SANDGATE_ASSIGN_OR_RETURN(bool row, s.Row());
    if (!row) break;
    SANDGATE_ASSIGN_OR_RETURN(v1::Snapshot snapshot, ParseSnapshotRecord(s.Text(0), s.Bytes(1)));
    out.push_back(std::move(snapshot));
  }
  return out;
}

absl::StatusOr<bool> SqliteSnapshotStore::Delete(const std::string& id) {
  absl::MutexLock lock(&mu_);
  SANDGATE_ASSIGN_OR_RETURN(
      int changed, Sql(db_, "delete snapshot", "DELETE FROM snapshots WHERE id = ?1", {id}).Run());
  return changed > 0;
}

absl::StatusOr<std::vector<std::string>> SqliteSnapshotStore::ListCreatedBefore(absl::Time cutoff) {
  absl::MutexLock lock(&mu_);
  Sql s(db_, "list old snapshots", "SELECT id FROM snapshots WHERE created_ns < ?1 ORDER BY n",
        {absl::ToUnixNanos(cutoff)});
  std::vector<std::string> out;
  SANDGATE_RETURN_IF_ERROR(s.ForEachRow([&] { out.push_back(s.Text(0)); }));
  return out;
}

}  // namespace sandgate::store
