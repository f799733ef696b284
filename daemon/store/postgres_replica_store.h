// PostgresReplicaStore: ReplicaStore on the PostgreSQL database the replicas share, through
// the store's connection pool (PostgresStore::database()).
//
// Its table is component "replicas" of the schema (store/postgres_schema.h), migrated at
// Create under the same advisory lock as the store's. Each operation is one guarded
// statement: under READ COMMITTED a second UPDATE of a row waits for the first's lock and
// then re-checks its WHERE against the committed row, so of two replicas claiming one lease
// exactly one changes it.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto leases, PostgresReplicaStore::Create(&store->database()));
//
// Thread safe (the pool is).
#ifndef SANDGATE_STORE_POSTGRES_REPLICA_STORE_H_
#define SANDGATE_STORE_POSTGRES_REPLICA_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "store/postgres_connection.h"
#include "store/replica_store.h"

namespace sandgate::store {

class PostgresReplicaStore : public ReplicaStore {
 public:
  // `db` outlives the store.
  static absl::StatusOr<std::unique_ptr<PostgresReplicaStore>> Create(PostgresDatabase* db);

  // PostgreSQL's clock_timestamp(): the one clock of every replica's lease decisions.
  absl::StatusOr<absl::Time> Now(absl::Time local) override;
  absl::StatusOr<int64_t> Join(const Lease& lease, absl::Time now) override;
  absl::Status Renew(const std::string& replica_id, int64_t epoch, absl::Time expires_at) override;
  absl::StatusOr<std::vector<Lease>> ListLeases() override;
  absl::StatusOr<bool> ClaimTakeover(const std::string& dead, const std::string& by, absl::Time now,
                                     absl::Time claim_until) override;

 private:
  explicit PostgresReplicaStore(PostgresDatabase* db) : db_(db) {}

  PostgresDatabase* const db_;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_POSTGRES_REPLICA_STORE_H_
