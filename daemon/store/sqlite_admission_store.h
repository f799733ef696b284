// SqliteAdmissionStore: AdmissionStore (store/admission_store.h) on the SQLite state file, for
// one daemon, or several on one host sharing the file.
//
// Its tables live in the state file on a connection of their own (as the lease table does,
// store/sqlite_replica_store.h), created IF NOT EXISTS, outside the state store's numbered
// migrations. Every operation is one BEGIN IMMEDIATE transaction: SQLite has one writer at a
// time across connections and processes, so a check and the count it guards never interleave
// with another's.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto admission, SqliteAdmissionStore::Open(dir + "/state.db"));
//
// Thread safe: one connection guarded by a mutex.
#ifndef SANDGATE_STORE_SQLITE_ADMISSION_STORE_H_
#define SANDGATE_STORE_SQLITE_ADMISSION_STORE_H_

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "store/admission_store.h"

struct sqlite3;

namespace sandgate::store {

class SqliteAdmissionStore : public AdmissionStore {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteAdmissionStore>> Open(const std::string& path);
  ~SqliteAdmissionStore() override;

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
  explicit SqliteAdmissionStore(sqlite3* db) : db_(db) {}

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
  // Whether the run records (SqliteStore's table) are in this file, so a claim makes the
  // run's record the claimer's in its transaction. Set at Open; a queue alone has none.
  bool records_ = false;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SQLITE_ADMISSION_STORE_H_
