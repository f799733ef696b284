// PostgresSnapshotStore: SnapshotStore (store/snapshot_store.h) in the PostgreSQL database
// the replicas share, schema component "snapshots" (store/postgres_schema.h).
//
//   SANDGATE_ASSIGN_OR_RETURN(auto snapshots, PostgresSnapshotStore::Open(&store->database()));
//
// Thread safe (the pool is).
#ifndef SANDGATE_STORE_POSTGRES_SNAPSHOT_STORE_H_
#define SANDGATE_STORE_POSTGRES_SNAPSHOT_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "store/postgres_connection.h"
#include "store/snapshot_store.h"

namespace sandgate::store {

class PostgresSnapshotStore : public SnapshotStore {
 public:
  // Migrates its table. `db` outlives the store.
  static absl::StatusOr<std::unique_ptr<PostgresSnapshotStore>> Open(PostgresDatabase* db);

  absl::Status Create(const v1::Snapshot& snapshot) override;
  absl::StatusOr<v1::Snapshot> Get(const std::string& id) override;
  absl::StatusOr<std::vector<v1::Snapshot>> List(const std::string& tenant,
                                                 const std::string& session_id) override;
  absl::StatusOr<bool> Delete(const std::string& id) override;
  absl::StatusOr<std::vector<std::string>> ListCreatedBefore(absl::Time cutoff) override;

 private:
  explicit PostgresSnapshotStore(PostgresDatabase* db) : db_(db) {}
  PostgresDatabase* const db_;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_POSTGRES_SNAPSHOT_STORE_H_
