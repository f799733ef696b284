#include "store/file_artifact_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace sandgate::store {
namespace {

class FileWriter final : public ArtifactStore::Writer {
 public:
  FileWriter(UniqueFd fd, std::string tmp, std::string path, std::string name)
      : Writer(std::move(name)), fd_(std::move(fd)), tmp_(std::move(tmp)), path_(std::move(path)) {}
  ~FileWriter() override {
    if (fd_.valid()) unlink(tmp_.c_str());
  }

 private:
  absl::Status Write(absl::string_view piece) override {
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
  absl::Status Publish(const v1::Artifact&) override {
    if (fsync(fd_.get()) != 0) return errors::FromErrno(errno, absl::StrCat("fsync ", tmp_));
    if (rename(tmp_.c_str(), path_.c_str()) != 0) {
      return errors::FromErrno(errno, absl::StrCat("rename ", path_));
    }
    fd_.reset();
    return absl::OkStatus();
  }

  UniqueFd fd_;  // invalid once published
  const std::string tmp_, path_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FileArtifactStore>> FileArtifactStore::Open(
    const std::string& root) {
  if (mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
    return errors::FromErrno(errno, absl::StrCat("artifact directory ", root));
  }
  return std::unique_ptr<FileArtifactStore>(new FileArtifactStore(root));
}

std::string FileArtifactStore::PathOf(const std::string& run_id, const std::string& name) const {
  return absl::StrCat(root_, "/", run_id, "/", name);
}

absl::StatusOr<std::unique_ptr<ArtifactStore::Writer>> FileArtifactStore::Create(
    const std::string& run_id, const std::string& name) {
  SANDGATE_RETURN_IF_ERROR(CheckArtifactNames(run_id, name));
  std::string dir = absl::StrCat(root_, "/", run_id);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errors::FromErrno(errno, absl::StrCat("artifact directory ", dir));
  }
  std::string tmp = absl::StrCat(dir, "/.tmp-", name);
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return errors::FromErrno(errno, absl::StrCat("create ", tmp));
  return std::unique_ptr<Writer>(
      new FileWriter(std::move(fd), std::move(tmp), PathOf(run_id, name), name));
}

absl::Status FileArtifactStore::RemoveRun(const std::string& run_id) {
  if (!IsPlainFileName(run_id))
    return errors::InvalidArgument(absl::StrCat("run id: '", run_id, "'"));
  std::string dir = absl::StrCat(root_, "/", run_id);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr)
    return errno == ENOENT ? absl::OkStatus()
                           : errors::FromErrno(errno, absl::StrCat("open ", dir));
  // Only plain files are ever written here (Create); nothing is followed.
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

absl::StatusOr<std::string> FileArtifactStore::Read(const std::string& run_id,
                                                    const std::string& name, uint64_t offset,
                                                    uint64_t max_bytes) {
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
