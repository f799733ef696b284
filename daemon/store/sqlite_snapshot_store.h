// SqliteSnapshotStore: SnapshotStore (store/snapshot_store.h) in the SQLite state file.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto snapshots, SqliteSnapshotStore::Open(dir + "/state.db"));
//
// Thread safe: one connection guarded by a mutex.
#ifndef SANDGATE_STORE_SQLITE_SNAPSHOT_STORE_H_
#define SANDGATE_STORE_SQLITE_SNAPSHOT_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "store/snapshot_store.h"

struct sqlite3;

namespace sandgate::store {

class SqliteSnapshotStore : public SnapshotStore {
 public:
  // Opens (creating) the file and migrates its table.
  static absl::StatusOr<std::unique_ptr<SqliteSnapshotStore>> Open(const std::string& path);
  ~SqliteSnapshotStore() override;

  absl::Status Create(const v1::Snapshot& snapshot) override;
  absl::StatusOr<v1::Snapshot> Get(const std::string& id) override;
  absl::StatusOr<std::vector<v1::Snapshot>> List(const std::string& tenant,
                                                 const std::string& session_id) override;
  absl::StatusOr<bool> Delete(const std::string& id) override;
  absl::StatusOr<std::vector<std::string>> ListCreatedBefore(absl::Time cutoff) override;

 private:
  explicit SqliteSnapshotStore(sqlite3* db) : db_(db) {}
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SQLITE_SNAPSHOT_STORE_H_
