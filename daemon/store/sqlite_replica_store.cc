#include "store/sqlite_replica_store.h"

#include <sqlite3.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "store/sqlite_file.h"

namespace sandgate::store {
namespace {

int64_t Ns(absl::Time t) { return absl::ToUnixNanos(t); }

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

absl::Status SqliteError(sqlite3* db, const char* what) {
  return errors::Internal(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

std::string Column(sqlite3_stmt* s, int col) {
  const unsigned char* p = sqlite3_column_text(s, col);
  return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteReplicaStore>> SqliteReplicaStore::Open(
    const std::string& path) {
  SANDGATE_ASSIGN_OR_RETURN(sqlite3 * db, OpenSqliteFile(path, "lease database"));
  std::unique_ptr<SqliteReplicaStore> store(new SqliteReplicaStore(db));
  char* err = nullptr;
  if (sqlite3_exec(db, kSchema, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return errors::Internal(absl::StrCat("sqlite: creating the lease table in ", path, ": ", msg));
  }
  SANDGATE_RETURN_IF_ERROR(store->AddColumns());
  return store;
}

absl::Status SqliteReplicaStore::AddColumns() {
  absl::MutexLock lock(&mu_);
  // IMMEDIATE: two daemons opening one old file at once add each column once.
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteError(db_, "upgrade the lease table");
  }
  absl::Status st = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    for (const auto& [name, type] : kAddedColumns) {
      sqlite3_stmt* s = nullptr;
      const std::string has = absl::StrCat(
          "SELECT 1 FROM pragma_table_info('replica_leases') WHERE name = '", name, "'");
      if (sqlite3_prepare_v2(db_, has.c_str(), -1, &s, nullptr) != SQLITE_OK) {
        sqlite3_finalize(s);
        return SqliteError(db_, "read the lease table's columns");
      }
      const int rc = sqlite3_step(s);
      sqlite3_finalize(s);
      if (rc == SQLITE_ROW) continue;
      const std::string add =
          absl::StrCat("ALTER TABLE replica_leases ADD COLUMN ", name, " ", type);
      if (sqlite3_exec(db_, add.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
        return SqliteError(db_, "add a column to the lease table");
      }
    }
    return absl::OkStatus();
  }();
  sqlite3_exec(db_, st.ok() ? "COMMIT" : "ROLLBACK", nullptr, nullptr, nullptr);
  return st;
}

SqliteReplicaStore::~SqliteReplicaStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::StatusOr<int> SqliteReplicaStore::Write(const char* sql,
                                              const std::vector<std::string>& texts,
                                              const std::vector<int64_t>& ints, const char* what,
                                              int64_t* returned) {
  absl::MutexLock lock(&mu_);
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) {
    sqlite3_finalize(s);
    return SqliteError(db_, what);
  }
  absl::Cleanup finalize = [s] { sqlite3_finalize(s); };
  int i = 1;
  for (const std::string& t : texts) {
    sqlite3_bind_text(s, i++, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
  }
  for (int64_t n : ints) sqlite3_bind_int64(s, i++, n);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW && returned != nullptr) {
    *returned = sqlite3_column_int64(s, 0);
    rc = sqlite3_step(s);
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, what);
  return sqlite3_changes(db_);
}

absl::StatusOr<int64_t> SqliteReplicaStore::Join(const Lease& lease, absl::Time now) {
  int64_t epoch = 0;
  SANDGATE_ASSIGN_OR_RETURN(
      int changed,
      Write("INSERT INTO replica_leases(id, address, expires_at, epoch) VALUES(?1, ?2, ?3, 1) "
            "ON CONFLICT(id) DO UPDATE SET address = excluded.address, "
            "expires_at = excluded.expires_at, taken_over_by = '', claim_until = 0, cleaned = 0, "
            "claimed_at = 0, epoch = replica_leases.epoch + 1 "
            "WHERE replica_leases.taken_over_by = '' OR replica_leases.cleaned = 1 "
            "OR replica_leases.claim_until <= ?4 RETURNING epoch",
            {lease.replica_id, lease.address}, {Ns(lease.expires_at), Ns(now)}, "join", &epoch));
  if (changed == 1) return epoch;
  SANDGATE_ASSIGN_OR_RETURN(std::string claimer, ClaimerOf(lease.replica_id));
  return CleanupUnderWay(lease.replica_id, claimer);
}

absl::Status SqliteReplicaStore::Renew(const std::string& replica_id, int64_t epoch,
                                       absl::Time expires_at) {
  SANDGATE_ASSIGN_OR_RETURN(int changed,
                            Write("UPDATE replica_leases SET expires_at = ?2 WHERE id = ?1 AND "
                                  "taken_over_by = '' AND epoch = ?3",
                                  {replica_id}, {Ns(expires_at), epoch}, "renew lease"));
  if (changed == 1) return absl::OkStatus();
  return RenewRefused(*this, replica_id, epoch);
}

absl::StatusOr<std::string> SqliteReplicaStore::ClaimerOf(const std::string& replica_id) {
  absl::MutexLock lock(&mu_);
  sqlite3_stmt* s = nullptr;
  absl::Cleanup finalize = [&s] { sqlite3_finalize(s); };
  if (sqlite3_prepare_v2(db_, "SELECT taken_over_by FROM replica_leases WHERE id = ?", -1, &s,
                         nullptr) != SQLITE_OK) {
    return SqliteError(db_, "read lease");
  }
  sqlite3_bind_text(s, 1, replica_id.data(), static_cast<int>(replica_id.size()), SQLITE_TRANSIENT);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return errors::NotFound("lease of replica", replica_id);
  if (rc != SQLITE_ROW) return SqliteError(db_, "read lease");
  return Column(s, 0);
}

absl::StatusOr<std::vector<Lease>> SqliteReplicaStore::ListLeases() {
  absl::MutexLock lock(&mu_);
  sqlite3_stmt* s = nullptr;
  absl::Cleanup finalize = [&s] { sqlite3_finalize(s); };
  if (sqlite3_prepare_v2(db_,
                         "SELECT id, address, expires_at, taken_over_by, claim_until, cleaned, "
                         "epoch, claimed_at FROM replica_leases ORDER BY id",
                         -1, &s, nullptr) != SQLITE_OK) {
    return SqliteError(db_, "list leases");
  }
  std::vector<Lease> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back({Column(s, 0), Column(s, 1), absl::FromUnixNanos(sqlite3_column_int64(s, 2)),
                   Column(s, 3), absl::FromUnixNanos(sqlite3_column_int64(s, 4)),
                   sqlite3_column_int64(s, 5) != 0, sqlite3_column_int64(s, 6),
                   absl::FromUnixNanos(sqlite3_column_int64(s, 7))});
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, "list leases");
  return out;
}

absl::StatusOr<bool> SqliteReplicaStore::ClaimTakeover(const std::string& dead,
                                                       const std::string& by, absl::Time now,
                                                       absl::Time claim_until) {
  SANDGATE_ASSIGN_OR_RETURN(int changed,
                            Write("UPDATE replica_leases SET taken_over_by = ?2, claim_until = ?4, "
                                  "claimed_at = ?3 "
                                  "WHERE id = ?1 AND expires_at <= ?3 AND cleaned = 0 "
                                  "AND (taken_over_by = '' OR claim_until <= ?3)",
                                  {dead, by}, {Ns(now), Ns(claim_until)}, "claim lease"));
  return changed == 1;
}

absl::Status SqliteReplicaStore::FinishTakeover(const std::string& dead, const std::string& by) {
  SANDGATE_ASSIGN_OR_RETURN(
      int changed,
      Write("UPDATE replica_leases SET cleaned = 1 WHERE id = ?1 AND taken_over_by = ?2",
            {dead, by}, {}, "finish takeover"));
  if (changed == 1) return absl::OkStatus();
  return ClaimLost(dead, by);
}

}  // namespace sandgate::store
