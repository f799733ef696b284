#include "store/artifact_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace sandgate::store {

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

absl::StatusOr<std::unique_ptr<ArtifactStore>> ArtifactStore::Open(const std::string& root) {
  if (mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
    return errors::FromErrno(errno, absl::StrCat("artifact directory ", root));
  }
  return std::unique_ptr<ArtifactStore>(new ArtifactStore(root));
}

std::string ArtifactStore::PathOf(const std::string& run_id, const std::string& name) const {
  return absl::StrCat(root_, "/", run_id, "/", name);
}

absl::StatusOr<std::unique_ptr<ArtifactStore::Writer>> ArtifactStore::Create(
    const std::string& run_id, const std::string& name) {
  if (!IsPlainFileName(run_id) || !IsPlainFileName(name)) {
    return errors::InvalidArgument(
        absl::StrCat("artifact name: not a plain file name: '", name, "'"));
  }
  std::string dir = absl::StrCat(root_, "/", run_id);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errors::FromErrno(errno, absl::StrCat("artifact directory ", dir));
  }
  std::string tmp = absl::StrCat(dir, "/.tmp-", name);
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return errors::FromErrno(errno, absl::StrCat("create ", tmp));
  return std::unique_ptr<Writer>(
      new Writer(std::move(fd), std::move(tmp), PathOf(run_id, name), name));
}

ArtifactStore::Writer::~Writer() {
  if (fd_.valid()) unlink(tmp_.c_str());
}

absl::Status ArtifactStore::Writer::Append(absl::string_view piece) {
  if (!fd_.valid()) {
    return errors::FailedPrecondition(absl::StrCat("artifact ", name_, ": already committed"));
  }
  sha256_.Update(piece);
  size_ += piece.size();
  while (!piece.empty()) {
    ssize_t n = write(fd_.get(), piece.data(), piece.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errors::FromErrno(errno, absl::StrCat("write ", tmp_));
    }
    piece.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Artifact> ArtifactStore::Writer::Commit() {
  if (!fd_.valid()) {
    return errors::FailedPrecondition(absl::StrCat("artifact ", name_, ": already committed"));
  }
  if (fsync(fd_.get()) != 0) return errors::FromErrno(errno, absl::StrCat("fsync ", tmp_));
  if (rename(tmp_.c_str(), path_.c_str()) != 0) {
    return errors::FromErrno(errno, absl::StrCat("rename ", path_));
  }
  fd_.reset();
  v1::Artifact artifact;
  artifact.set_name(name_);
  artifact.set_size_bytes(size_);
  artifact.set_sha256(sha256_.HexDigest());
  return artifact;
}

absl::StatusOr<v1::Artifact> ArtifactStore::Put(const std::string& run_id, const std::string& name,
                                                absl::string_view data) {
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<Writer> writer, Create(run_id, name));
  SANDGATE_RETURN_IF_ERROR(writer->Append(data));
  return writer->Commit();
}

absl::Status ArtifactStore::RemoveRun(const std::string& run_id) {
  if (!IsPlainFileName(run_id))
    return errors::InvalidArgument(absl::StrCat("run id: '", run_id, "'"));
  std::string dir = absl::StrCat(root_, "/", run_id);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr)
    return errno == ENOENT ? absl::OkStatus()
                           : errors::FromErrno(errno, absl::StrCat("open ", dir));
  // Only plain files are ever written here (Put); nothing is followed.
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (unlinkat(dirfd(d), name.c_str(), 0) != 0 && errno != ENOENT) {
      closedir(d);
      return errors::FromErrno(errno, absl::StrCat("remove ", dir, "/", name));
    }
  }
  closedir(d);
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT)
    return errors::FromErrno(errno, absl::StrCat("remove ", dir));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ArtifactStore::Read(const std::string& run_id, const std::string& name,
                                                uint64_t offset, uint64_t max_bytes) {
  if (!IsPlainFileName(run_id) || !IsPlainFileName(name)) return errors::NotFound("artifact", name);
  UniqueFd fd(open(PathOf(run_id, name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    if (errno == ENOENT) return errors::NotFound("artifact", name);
    return errors::FromErrno(errno, absl::StrCat("open artifact ", name));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return errors::FromErrno(errno, absl::StrCat("stat artifact ", name));
  }
  // Sized by what is there, not by max_bytes: a caller may ask for a whole artifact.
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string out(offset >= size ? 0 : std::min(max_bytes, size - offset), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n =
        pread(fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errors::FromErrno(errno, absl::StrCat("read artifact ", name));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

}  // namespace sandgate::store
