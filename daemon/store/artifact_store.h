// ArtifactStore: the files runs produced, by run and name, wherever the state is kept.
//
// Two implementations, chosen with the store (daemon/app/daemon.cc):
//   - FileArtifactStore (file_artifact_store.h), with store.type sqlite: files under
//     state_dir/artifacts/<run_id>/<name>, next to the one daemon that reads them.
//   - PostgresArtifactStore (postgres_artifact_store.h), with store.type postgres: chunked
//     rows in the database the replicas share, so every replica downloads, verifies and
//     purges any replica's artifacts. The database, not a shared directory: it is the one
//     system every replica already needs and keeps available, where a shared directory (NFS)
//     would be a second one to run, with its own failure modes (stale handles, no atomic
//     rename across clients on some servers, its own permissions); and artifacts are bounded
//     (max_artifact_bytes, 32 MiB by default, per artifact; a playbook's few per run).
//
// Artifacts stream in and out: a Writer takes one piece at a time and hashes as it goes,
// Read returns one bounded chunk, so the daemon never holds a whole artifact for storing or
// downloading it.
//
//   SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactStore::Writer> w, store->Create(run, name));
//   SANDGATE_RETURN_IF_ERROR(w->Append(piece));  // as often as needed
//   SANDGATE_ASSIGN_OR_RETURN(v1::Artifact stored, w->Commit());
//
// Implementations are thread safe, and readers see a whole artifact or none: nothing of it
// before its Commit, all of it after. A Writer is not thread safe.
#ifndef SANDGATE_STORE_ARTIFACT_STORE_H_
#define SANDGATE_STORE_ARTIFACT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::store {

class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;

  // One artifact being stored. Destroyed before Commit (an error, a refused file), it
  // removes what it stored and the artifact does not exist.
  class Writer {
   public:
    virtual ~Writer() = default;
    absl::Status Append(absl::string_view piece);
    // Makes the artifact durable and visible (replacing one of the same name); returns its
    // size and sha256. Once only, even when it fails.
    absl::StatusOr<v1::Artifact> Commit();

   protected:
    explicit Writer(std::string name) : name_(std::move(name)) {}
    // Stores the next piece.
    virtual absl::Status Write(absl::string_view piece) = 0;
    // Makes what Write stored durable and visible as `artifact`. Called once; a writer
    // destroyed without a successful Publish removes what it stored.
    virtual absl::Status Publish(const v1::Artifact& artifact) = 0;

   private:
    const std::string name_;
    Sha256 sha256_;
    uint64_t size_ = 0;
    bool committed_ = false;  // Commit was called
  };

  // `run_id` and `name` must be plain file names (IsPlainFileName), on every implementation,
  // so a run's artifacts can move between them.
  virtual absl::StatusOr<std::unique_ptr<Writer>> Create(const std::string& run_id,
                                                         const std::string& name) = 0;
  // Up to `max_bytes` from `offset`; empty at the end. NOT_FOUND for no such artifact.
  virtual absl::StatusOr<std::string> Read(const std::string& run_id, const std::string& name,
                                           uint64_t offset, uint64_t max_bytes) = 0;
  // Deletes every artifact of the run (retention), and anything a writer of it left (a
  // daemon killed mid-write). OK when there are none.
  virtual absl::Status RemoveRun(const std::string& run_id) = 0;

  // Create, one Append, Commit: for data already in memory.
  absl::StatusOr<v1::Artifact> Put(const std::string& run_id, const std::string& name,
                                   absl::string_view data);
};

// A plain file name: no '/', not "." or "..", no NUL, at most 255 bytes.
bool IsPlainFileName(const std::string& name);

// INVALID_ARGUMENT naming the one that is not a plain file name; OK when both are.
absl::Status CheckArtifactNames(const std::string& run_id, const std::string& name);

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_ARTIFACT_STORE_H_
