// SnapshotStore: the records of workspace snapshots (v1::Snapshot), wherever the state is
// kept; the tars themselves are in the ArtifactStore, under the snapshot's id
// (core/snapshots.h).
//
// Two implementations, chosen with the store (daemon/app/daemon.cc), with one contract suite
// (tests/store/snapshot_store_test.cc):
//   - SqliteSnapshotStore: table `snapshots` in state_dir/state.db, on a connection of its
//     own; its schema version is the row of component "snapshots" in `schema_version`, as
//     PostgreSQL keeps it.
//   - PostgresSnapshotStore: table `snapshots` in the shared database, schema component
//     "snapshots" (store/postgres_schema.h), so every replica lists and restores any
//     replica's snapshots.
//
// A record is its serialized message beside the columns the queries need (tenant, session,
// created_at), as runs and sessions are kept. Thread safe.
#ifndef SANDGATE_STORE_SNAPSHOT_STORE_H_
#define SANDGATE_STORE_SNAPSHOT_STORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::store {

class SnapshotStore {
 public:
  virtual ~SnapshotStore() = default;
  // A new record; ALREADY_EXISTS when its id is taken.
  virtual absl::Status Create(const v1::Snapshot& snapshot) = 0;
  // NOT_FOUND when there is none.
  virtual absl::StatusOr<v1::Snapshot> Get(const std::string& id) = 0;
  // The tenant's, newest first; only those of `session_id` when it is not empty.
  virtual absl::StatusOr<std::vector<v1::Snapshot>> List(const std::string& tenant,
                                                         const std::string& session_id) = 0;
  // Whether there was one to delete.
  virtual absl::StatusOr<bool> Delete(const std::string& id) = 0;
  // The ids of every tenant's snapshots created before `cutoff` (retention).
  virtual absl::StatusOr<std::vector<std::string>> ListCreatedBefore(absl::Time cutoff) = 0;
};

// A record read back from its bytes; INTERNAL naming `id` when they do not parse.
absl::StatusOr<v1::Snapshot> ParseSnapshotRecord(const std::string& id, const std::string& bytes);
// Its creation time as the `created_ns` column keeps it (Unix nanoseconds).
int64_t SnapshotCreatedNs(const v1::Snapshot& snapshot);

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_SNAPSHOT_STORE_H_
