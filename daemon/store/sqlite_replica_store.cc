#include "store/sqlite_replica_store.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/sqlite_file.h"
#include "store/sqlite_sql.h"

namespace sandgate::store {
namespace {

// Times are unix nanoseconds from the callers' clock (see replica_store.h).
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS replica_leases (
  id TEXT PRIMARY KEY,
  address TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  taken_over_by TEXT NOT NULL DEFAULT '',
  claim_until INTEGER NOT NULL DEFAULT 0,
  cleaned INTEGER NOT NULL DEFAULT 0,
  epoch INTEGER NOT NULL DEFAULT 0,
  claimed_at INTEGER NOT NULL DEFAULT 0);
)sql";

// Columns added after the table's first release, for a file made before them (the table is
// not under the state database's user_version, which SqliteStore owns).
constexpr const char* kAddedColumns[][2] = {
    {"epoch", "INTEGER NOT NULL DEFAULT 0"},
    {"claimed_at", "INTEGER NOT NULL DEFAULT 0"},
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteReplicaStore>> SqliteReplicaStore::Open(
    const std::string& path) {
  SANDGATE_ASSIGN_OR_RETURN(sqlite3 * db, OpenSqliteFile(path, "lease database"));
  std::unique_ptr<SqliteReplicaStore> store(new SqliteReplicaStore(db));
  absl::MutexLock lock(&store->mu_);
  // IMMEDIATE: two daemons opening one old file at once add each column once.
  SqlTx tx(db, "create the lease table");
  SANDGATE_RETURN_IF_ERROR(tx.Immediate([&]() -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(tx.Script(kSchema));
    for (const auto& [name, type] : kAddedColumns) {
      SANDGATE_ASSIGN_OR_RETURN(
          bool found,
          tx.HasRow("SELECT 1 FROM pragma_table_info('replica_leases') WHERE name = ?1", {name}));
      if (found) continue;
      SANDGATE_RETURN_IF_ERROR(
          tx.Script(absl::StrCat("ALTER TABLE replica_leases ADD COLUMN ", name, " ", type)));
    }
    return absl::OkStatus();
  }));
  return store;
}

SqliteReplicaStore::~SqliteReplicaStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::StatusOr<int64_t> SqliteReplicaStore::Join(const Lease& lease, absl::Time now) {
  {
    absl::MutexLock lock(&mu_);
    Sql join(db_, "join",
             "INSERT INTO replica_leases(id, address, expires_at, epoch) VALUES(?1, ?2, ?3, 1) "
             "ON CONFLICT(id) DO UPDATE SET address = excluded.address, "
             "expires_at = excluded.expires_at, taken_over_by = '', claim_until = 0, "
             "cleaned = 0, claimed_at = 0, epoch = replica_leases.epoch + 1 "
             "WHERE replica_leases.taken_over_by = '' OR replica_leases.cleaned = 1 "
             "OR replica_leases.claim_until <= ?4 RETURNING epoch",
             {lease.replica_id, lease.address, lease.expires_at, now});
    SANDGATE_ASSIGN_OR_RETURN(bool joined, join.Row());
    if (joined) {
      const int64_t epoch = join.Int(0);
      SANDGATE_RETURN_IF_ERROR(join.Row().status());  // to its end: the write commits
      return epoch;
    }
  }
  return JoinRefused(*this, lease.replica_id);
}

absl::StatusOr<int> SqliteReplicaStore::Write(const char* what, const char* sql,
                                              std::initializer_list<Value> params) {
  absl::MutexLock lock(&mu_);
  return Sql(db_, what, sql, params).Run();
}

absl::Status SqliteReplicaStore::Renew(const std::string& replica_id, int64_t epoch,
                                       absl::Time expires_at) {
  SANDGATE_ASSIGN_OR_RETURN(int changed,
                            Write("renew lease",
                                  "UPDATE replica_leases SET expires_at = ?2 WHERE id = ?1 AND "
                                  "taken_over_by = '' AND epoch = ?3",
                                  {replica_id, expires_at, epoch}));
  if (changed == 1) return absl::OkStatus();
  return RenewRefused(*this, replica_id, epoch);
}

absl::StatusOr<std::vector<Lease>> SqliteReplicaStore::ListLeases() {
  absl::MutexLock lock(&mu_);
  Sql s(db_, "list leases",
        "SELECT id, address, expires_at, taken_over_by, claim_until, cleaned, epoch, claimed_at "
        "FROM replica_leases ORDER BY id",
        {});
  std::vector<Lease> out;
  SANDGATE_RETURN_IF_ERROR(s.ForEachRow([&] {
    out.push_back({s.Text(0), s.Text(1), s.Time(2), s.Text(3), s.Time(4), s.Int(5) != 0, s.Int(6),
                   s.Time(7)});
  }));
  return out;
}

absl::StatusOr<bool> SqliteReplicaStore::ClaimTakeover(const std::string& dead,
                                                       const std::string& by, absl::Time now,
                                                       absl::Time claim_until) {
  SANDGATE_ASSIGN_OR_RETURN(int changed,
                            Write("claim lease",
                                  "UPDATE replica_leases SET taken_over_by = ?2, claim_until = ?4, "
                                  "claimed_at = ?3 "
                                  "WHERE id = ?1 AND expires_at <= ?3 AND cleaned = 0 "
                                  "AND (taken_over_by = '' OR claim_until <= ?3)",
                                  {dead, by, now, claim_until}));
  return changed == 1;
}

}  // namespace sandgate::store
