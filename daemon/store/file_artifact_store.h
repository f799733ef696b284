// FileArtifactStore: artifacts as files under <root>/<run_id>/<name> (state_dir/artifacts),
// for a daemon whose state is its own (store.type sqlite).
//
// A Writer writes a temp file in the run's directory and renames it into place at Commit
// (after fsync), so a reader sees a whole artifact or none; each call opens its own file
// descriptors, so the store is thread safe.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto artifacts, FileArtifactStore::Open(state_dir + "/artifacts"));
#ifndef SANDGATE_STORE_FILE_ARTIFACT_STORE_H_
#define SANDGATE_STORE_FILE_ARTIFACT_STORE_H_

#include <memory>
#include <string>

#include "store/artifact_store.h"

namespace sandgate::store {

class FileArtifactStore : public ArtifactStore {
 public:
  // Creates `root` (0700) when missing.
  static absl::StatusOr<std::unique_ptr<FileArtifactStore>> Open(const std::string& root);

  absl::StatusOr<std::unique_ptr<Writer>> Create(const std::string& run_id,
                                                 const std::string& name) override;
  absl::StatusOr<std::string> Read(const std::string& run_id, const std::string& name,
                                   uint64_t offset, uint64_t max_bytes) override;
  absl::Status RemoveRun(const std::string& run_id) override;

 private:
  explicit FileArtifactStore(std::string root) : root_(std::move(root)) {}
  std::string PathOf(const std::string& run_id, const std::string& name) const;
  const std::string root_;
};

}  // namespace sandgate::store

#endif  // SANDGATE_STORE_FILE_ARTIFACT_STORE_H_
