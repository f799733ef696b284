// ArtifactStore: the files runs produced, kept under <root>/<run_id>/<name>.
//
// Thread safe (each call works on its own file descriptors; Put writes a temp file and
// renames it into place, so readers see a whole artifact or none).
#ifndef SANDGATE_STORE_ARTIFACT_STORE_H_
#define SANDGATE_STORE_ARTIFACT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::store {

class ArtifactStore {
 public:
  // Creates `root` (0700) when missing.
  static absl::StatusOr<std::unique_ptr<ArtifactStore>> Open(const std::string& root);

  // `name` must be a plain file name; returns its size and sha256.
  absl::StatusOr<v1::Artifact> Put(const std::string& run_id, const std::string& name,
                                   const std::string& data);
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
