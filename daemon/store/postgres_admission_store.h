// PostgresAdmissionStore: AdmissionStore (store/admission_store.h, which explains the locks)
// on the PostgreSQL database the replicas share, through the store's connection pool.
//
// Its tables are component "admission" of the schema (store/postgres_schema.h), migrated at
// Create under the same advisory lock as the store's.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto admission, PostgresAdmissionStore::Create(&store->database()));
//
// Thread safe (the pool is).
#ifndef SANDGATE_STORE_POSTGRES_ADMISSION_STORE_H_
#define SANDGATE_STORE_POSTGRES_ADMISSION_STORE_H_

#include <memory>
#include <string>

#include "store/admission_store.h"
#include "store/postgres_connection.h"

namespace sandgate::store {

class PostgresAdmissionStore : public AdmissionStore {
 public:
  // `db` outlives the store.
  static absl::StatusOr<std::unique_ptr<PostgresAdmissionStore>> Create(PostgresDatabase* db);

  using AdmissionStore::Enqueue;
  absl::StatusOr<bool> Enqueue(const QueuedRun& run, uint32_t max_waiting, RoomHere room,
                               v1::Event* queued) override;
  absl::StatusOr<std::optional<QueuedRun>> Claim(const std::string& replica,
                                                 bool sandbox_room) override;
  absl::StatusOr<bool> Remove(const std::string& run_id) override;
  absl::Status Release(const std::string& run_id) override;
  absl::Status ReleaseReplica(const std::string& replica) override;
  absl::StatusOr<WaitingRuns> Waiting() override;
  absl::StatusOr<std::optional<QueuedRun>> Find(const std::string& run_id) override;
  absl::StatusOr<uint64_t> WaitingCount() override;
  absl::StatusOr<std::optional<absl::Time>> CountStart(const std::string& tenant, uint32_t limit,
                                                       absl::Time now) override;
  absl::StatusOr<bool> TakeSessionSlot(const std::string& tenant, const std::string& session_id,
                                       const std::string& replica, uint32_t limit) override;
  absl::Status ReleaseSessionSlot(const std::string& session_id) override;

 private:
  explicit PostgresAdmissionStore(PostgresDatabase* db) : db_(db) {}

  PostgresDatabase* const db_;
  // Whether the run records (PostgresStore's table) are in this database, so a claim makes
  // the run's record the claimer's in its transaction. Set at Create; a queue alone has none.
  bool records_ = false;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_POSTGRES_ADMISSION_STORE_H_
