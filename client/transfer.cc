#include "client/transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sandgate::cli {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::Status(absl::ErrnoToStatusCode(errno),
                      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DownloadSink>> DownloadSink::Create(std::string path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  // Hidden and marked, so that a file left by a killed CLI is recognisable for what it is.
  std::string temp = absl::StrCat(dir, ".", base, ".sandgate-partial-XXXXXX");
  std::vector<char> name(temp.begin(), temp.end());
  name.push_back('\0');
  int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return Errno("cannot create a temporary file for", path);
  fchmod(fd, 0644);  // mkostemp's 0600 is stricter than a file written by the shell
  return std::unique_ptr<DownloadSink>(
      new DownloadSink(std::move(path), std::string(name.data()), fd));
}

DownloadSink::~DownloadSink() {
  if (fd_ >= 0) close(fd_);
  if (!committed_) unlink(temp_.c_str());
}

absl::Status DownloadSink::Add(absl::string_view data, uint64_t total_size,
                               absl::string_view sha256) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("cannot write", temp_);
    done += static_cast<size_t>(n);
  }
  hash_.Update(data);
  bytes_ += data.size();
  announced_size_ = total_size;
  if (!sha256.empty()) announced_sha256_ = std::string(sha256);
  return absl::OkStatus();
}

absl::Status DownloadSink::Commit(absl::string_view expected_sha256) {
  if (committed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": already committed"));
  std::string got = hash_.HexDigest();
  if (announced_sha256_.empty()) {
    return absl::DataLossError(
        absl::StrCat(path_, ": the daemon sent no sha256 to check the download against (", bytes_,
                     " bytes received, sha256 ", got, "); not saved"));
  }
  if (bytes_ != announced_size_) {
    return absl::DataLossError(absl::StrCat(path_, ": received ", bytes_,
                                            " bytes, the daemon announced ", announced_size_,
                                            "; not saved"));
  }
  for (absl::string_view want : {absl::string_view(announced_sha256_), expected_sha256}) {
    if (!want.empty() && want != got) {
      return absl::DataLossError(absl::StrCat(path_, ": sha256 mismatch: expected ", want,
                                              ", received ", got, "; not saved"));
    }
  }
  int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) return Errno("cannot write", temp_);
  if (rename(temp_.c_str(), path_.c_str()) != 0)
    return Errno("cannot rename the download to", path_);
  committed_ = true;
  return absl::OkStatus();
}

absl::Status ReadFileChunks(const std::string& path, size_t chunk_bytes,
                            const std::function<bool(absl::string_view)>& on_chunk) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot read", path);
  std::string buf(chunk_bytes, '\0');
  absl::Status status;
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = Errno("cannot read", path);
    if (n <= 0 || !on_chunk(absl::string_view(buf.data(), static_cast<size_t>(n)))) break;
  }
  close(fd);
  return status;
}

absl::StatusOr<FileDigest> DigestFile(const std::string& path) {
  FileDigest d;
  Sha256 hash;
  absl::Status read = ReadFileChunks(path, 1 << 20, [&](absl::string_view chunk) {
    hash.Update(chunk);
    d.size_bytes += chunk.size();
    return true;
  });
  if (!read.ok()) return read;
  d.sha256 = hash.HexDigest();
  return d;
}

}  // namespace sandgate::cli
