// PostgresArtifactStore: artifacts in the PostgreSQL database the replicas share
// (store.type postgres), so a run collected on one replica is downloaded, verified and
// purged through any other. Why the database and not a shared directory:
// store/artifact_store.h.
//
// An artifact is rows of at most `chunk_bytes` (1 MiB) in `artifact_chunks`, under an
// upload id of its own, and one row in `artifacts` naming the upload, its size and sha256.
// A Writer inserts each chunk as it fills (its own short statement: no connection is held
// while the sandbox is read, and memory holds one chunk); Commit makes the artifact visible
// by writing its `artifacts` row, replacing a former upload's, in one transaction. So a
// reader sees a whole artifact or none, and a writer that never commits (a refused file, a
// daemon killed mid-write) leaves chunks no row names: removed by the writer's destructor,
// or else with the run (RemoveRun deletes every chunk of the run, named or not).
//
// Read fetches, in one snapshot, only the chunk bytes asked for: the chunks are stored
// uncompressed out of line (STORAGE EXTERNAL), so substring() reads the slices it needs,
// not the whole 1 MiB. A download is one Read per 256 KiB, each one statement (its slice
// lies in one chunk), so the artifact is never whole in memory; a Read spanning chunks
// (the verifier's whole artifact) is a REPEATABLE READ transaction of one per chunk.
//
// Its tables are component "artifacts" of the schema (store/postgres_schema.h).
//
//   SANDGATE_ASSIGN_OR_RETURN(auto artifacts, PostgresArtifactStore::Open(&store->database()));
//
// Thread safe (the pool is); durability as the store's (postgres_store.h): a commit is not
// waited onto disk, but the WAL keeps order, so a run record that names an artifact is never
// kept without the artifact.
#ifndef SANDGATE_STORE_POSTGRES_ARTIFACT_STORE_H_
#define SANDGATE_STORE_POSTGRES_ARTIFACT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "store/artifact_store.h"
#include "store/postgres_connection.h"

namespace sandgate::store {

class PostgresArtifactStore : public ArtifactStore {
 public:
  static constexpr uint64_t kChunkBytes = 1 << 20;

  // Migrates its tables. `db` outlives the store; `chunk_bytes` > 0 (small in tests, to
  // cross chunk boundaries cheaply). Each artifact records its own, so a change of it
  // reads older artifacts still.
  static absl::StatusOr<std::unique_ptr<PostgresArtifactStore>> Open(
      PostgresDatabase* db, uint64_t chunk_bytes = kChunkBytes);

  absl::StatusOr<std::unique_ptr<Writer>> Create(const std::string& run_id,
                                                 const std::string& name) override;
  absl::StatusOr<std::string> Read(const std::string& run_id, const std::string& name,
                                   uint64_t offset, uint64_t max_bytes) override;
  absl::Status RemoveRun(const std::string& run_id) override;

 private:
  PostgresArtifactStore(PostgresDatabase* db, uint64_t chunk_bytes)
      : db_(db), chunk_bytes_(chunk_bytes) {}
  // A Read whose bytes span chunks, in one REPEATABLE READ snapshot.
  absl::StatusOr<std::string> ReadAcrossChunks(PgConnection& conn, const std::string& run_id,
                                               const std::string& name, uint64_t offset,
                                               uint64_t max_bytes);
  PostgresDatabase* const db_;
  const uint64_t chunk_bytes_;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_POSTGRES_ARTIFACT_STORE_H_
