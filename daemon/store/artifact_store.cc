#include "store/artifact_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/sha256.h"
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

absl::StatusOr<v1::Artifact> ArtifactStore::Put(const std::string& run_id,
                                                const std::string& name,
                                                const std::string& data) {
  if (!IsPlainFileName(run_id) || !IsPlainFileName(name)) {
    return errors::InvalidArgument(absl::StrCat("artifact name: not a plain file name: '", name, "'"));
  }
  std::string dir = absl::StrCat(root_, "/", run_id);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errors::FromErrno(errno, absl::StrCat("artifact directory ", dir));
  }
  std::string tmp = absl::StrCat(dir, "/.tmp-", name);
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return errors::FromErrno(errno, absl::StrCat("create ", tmp));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errors::FromErrno(errno, absl::StrCat("write ", tmp));
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0) return errors::FromErrno(errno, absl::StrCat("fsync ", tmp));
  fd.reset();
  std::string path = PathOf(run_id, name);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return errors::FromErrno(errno, absl::StrCat("rename ", path));
  }
  v1::Artifact artifact;
  artifact.set_name(name);
  artifact.set_size_bytes(data.size());
  artifact.set_sha256(Sha256::Hex(data));
  return artifact;
}

absl::Status ArtifactStore::RemoveRun(const std::string& run_id) {
  if (!IsPlainFileName(run_id)) return errors::InvalidArgument(absl::StrCat("run id: '", run_id, "'"));
  std::string dir = absl::StrCat(root_, "/", run_id);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return errno == ENOENT ? absl::OkStatus() : errors::FromErrno(errno, absl::StrCat("open ", dir));
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
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT) return errors::FromErrno(errno, absl::StrCat("remove ", dir));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ArtifactStore::Read(const std::string& run_id,
                                                const std::string& name, uint64_t offset,
                                                uint64_t max_bytes) {
  if (!IsPlainFileName(run_id) || !IsPlainFileName(name)) return errors::NotFound("artifact", name);
  UniqueFd fd(open(PathOf(run_id, name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    if (errno == ENOENT) return errors::NotFound("artifact", name);
    return errors::FromErrno(errno, absl::StrCat("open artifact ", name));
  }
  std::string out(max_bytes, '\0');
  ssize_t n;
  do {
    n = pread(fd.get(), out.data(), max_bytes, static_cast<off_t>(offset));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errors::FromErrno(errno, absl::StrCat("read artifact ", name));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace sandgate::store
