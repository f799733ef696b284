// SqliteReplicaStore: ReplicaStore on a SQLite database, for several daemons on one host that
// share one state file (runs, sessions and the journal are shared through it as well).
//
// The lease table lives in the same file as SqliteStore's tables, on a connection of its own,
// so a lease renewal never waits behind the event log's batches in SqliteStore's mutex (a
// renewal that waited past the lease's end would hand the replica's work to another).
// SQLite serialises writers across processes; every statement here is one guarded write, so
// of two daemons claiming the same lease exactly one changes the row.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto leases, SqliteReplicaStore::Open(state_dir + "/state.db"));
//
// Thread safe: one connection guarded by a mutex.
#ifndef SANDGATE_STORE_SQLITE_REPLICA_STORE_H_
#define SANDGATE_STORE_SQLITE_REPLICA_STORE_H_

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "store/replica_store.h"
#include "store/sqlite_sql.h"

struct sqlite3;

namespace sandgate::store {

class SqliteReplicaStore : public ReplicaStore {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteReplicaStore>> Open(const std::string& path);
  ~SqliteReplicaStore() override;

  absl::StatusOr<int64_t> Join(const Lease& lease, absl::Time now) override;
  absl::Status Renew(const std::string& replica_id, int64_t epoch, absl::Time expires_at) override;
  absl::StatusOr<std::vector<Lease>> ListLeases() override;
  absl::StatusOr<bool> ClaimTakeover(const std::string& dead, const std::string& by, absl::Time now,
                                     absl::Time claim_until) override;

 private:
  explicit SqliteReplicaStore(sqlite3* db) : db_(db) {}
  // Runs `sql` (parameters ?1..); the rows it changed. `what` names it in errors.
  absl::StatusOr<int> Write(const char* what, const char* sql, std::initializer_list<Value> params);

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SQLITE_REPLICA_STORE_H_
