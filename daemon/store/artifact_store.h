// ArtifactStore: the files runs produced, kept under <root>/<run_id>/<name>.
//
// Artifacts stream in and out: a Writer takes one piece at a time and hashes as it goes,
// Read returns one bounded chunk, so the daemon never holds a whole artifact for storing or
// downloading it.
//
//   SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactStore::Writer> w, store->Create(run, name));
//   SANDGATE_RETURN_IF_ERROR(w->Append(piece));  // as often as needed
//   SANDGATE_ASSIGN_OR_RETURN(v1::Artifact stored, w->Commit());
//
// Thread safe (each call works on its own file descriptors; a Writer writes a temp file and
// renames it into place, so readers see a whole artifact or none). A Writer is not thread
// safe.
#ifndef SANDGATE_STORE_ARTIFACT_STORE_H_
#define SANDGATE_STORE_ARTIFACT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::store {

class ArtifactStore {
 public:
  // Creates `root` (0700) when missing.
  static absl::StatusOr<std::unique_ptr<ArtifactStore>> Open(const std::string& root);

  // One artifact being stored. Destroyed before Commit (an error, a refused file), it
  // removes its temporary file and the artifact does not exist.
  class Writer {
   public:
    ~Writer();
    absl::Status Append(absl::string_view piece);
    // Makes the artifact durable and visible; returns its size and sha256. Once only.
    absl::StatusOr<v1::Artifact> Commit();

   private:
    friend class ArtifactStore;
    Writer(UniqueFd fd, std::string tmp, std::string path, std::string name)
        : fd_(std::move(fd)),
          tmp_(std::move(tmp)),
          path_(std::move(path)),
          name_(std::move(name)) {}
    UniqueFd fd_;  // invalid once committed
    const std::string tmp_, path_, name_;
    Sha256 sha256_;
    uint64_t size_ = 0;
  };

  // `run_id` and `name` must be plain file names.
  absl::StatusOr<std::unique_ptr<Writer>> Create(const std::string& run_id,
                                                 const std::string& name);
  // Create, one Append, Commit: for data already in memory.
  absl::StatusOr<v1::Artifact> Put(const std::string& run_id, const std::string& name,
                                   absl::string_view data);
  // Up to `max_bytes` from `offset`; empty at the end.
  absl::StatusOr<std::string> Read(const std::string& run_id, const std::string& name,
                                   uint64_t offset, uint64_t max_bytes);
  std::string PathOf(const std::string& run_id, const std::string& name) const;
  // Deletes every artifact of the run (retention). OK when there are none.
  absl::Status RemoveRun(const std::string& run_id);

 private:
  explicit ArtifactStore(std::string root) : root_(std::move(root)) {}
  const std::string root_;
};

// A plain file name: no '/', not "." or "..", no NUL, at most 255 bytes.
bool IsPlainFileName(const std::string& name);

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_ARTIFACT_STORE_H_
