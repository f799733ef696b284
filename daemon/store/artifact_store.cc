#include "store/artifact_store.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::store {

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

absl::Status CheckArtifactNames(const std::string& run_id, const std::string& name) {
  if (!IsPlainFileName(name)) {
    return errors::InvalidArgument(
        absl::StrCat("artifact name: not a plain file name: '", name, "'"));
  }
  if (!IsPlainFileName(run_id)) {
    return errors::InvalidArgument(
        absl::StrCat("artifact run id: not a plain file name: '", run_id, "'"));
  }
  return absl::OkStatus();
}

absl::Status ArtifactStore::Writer::Append(absl::string_view piece) {
  if (committed_) {
    return errors::FailedPrecondition(absl::StrCat("artifact ", name_, ": already committed"));
  }
  sha256_.Update(piece);
  size_ += piece.size();
  return Write(piece);
}

absl::StatusOr<v1::Artifact> ArtifactStore::Writer::Commit() {
  if (committed_) {
    return errors::FailedPrecondition(absl::StrCat("artifact ", name_, ": already committed"));
  }
  // Whatever Publish answers, the hash is final: a writer whose Commit failed is only to be
  // destroyed, which removes what it stored.
  committed_ = true;
  v1::Artifact artifact;
  artifact.set_name(name_);
  artifact.set_size_bytes(size_);
  artifact.set_sha256(sha256_.HexDigest());
  SANDGATE_RETURN_IF_ERROR(Publish(artifact));
  return artifact;
}

absl::StatusOr<v1::Artifact> ArtifactStore::Put(const std::string& run_id, const std::string& name,
                                                absl::string_view data) {
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<Writer> writer, Create(run_id, name));
  SANDGATE_RETURN_IF_ERROR(writer->Append(data));
  return writer->Commit();
}

}  // namespace sandgate::store
