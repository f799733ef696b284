// Files the CLI receives from the daemon or sends to it, checked end to end.
//
// A download is written under a temporary name beside its final one, hashed as it arrives,
// and renamed only once the sha256 the stream's last chunk carries (and the size it
// announced) match what arrived: a cut stream or a corrupted one leaves no file under the
// final name, and a mismatch names the file and both hashes.
//
//   absl::StatusOr<std::unique_ptr<DownloadSink>> sink = DownloadSink::Create("out/memo.md");
//   while (reader->Read(&chunk)) (*sink)->Add(chunk.data(), chunk.total_size(), chunk.sha256());
//   if (!reader->Finish().ok()) return ...;   // the sink's destructor removes the temp file
//   absl::Status verified = (*sink)->Commit();
//
// Not thread safe; one sink per file.
#ifndef SANDGATE_CLIENT_TRANSFER_H_
#define SANDGATE_CLIENT_TRANSFER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"

namespace sandgate::cli {

class DownloadSink {
 public:
  // Creates the temporary file in the directory of `path` (which must exist).
  static absl::StatusOr<std::unique_ptr<DownloadSink>> Create(std::string path);
  // Removes the temporary file unless Commit succeeded.
  ~DownloadSink();
  DownloadSink(const DownloadSink&) = delete;
  DownloadSink& operator=(const DownloadSink&) = delete;

  // One chunk as both download RPCs send it: `sha256` is set on the last chunk only.
  absl::Status Add(absl::string_view data, uint64_t total_size, absl::string_view sha256);
  // Checks what arrived against the last chunk's sha256 and total size, and against
  // `expected_sha256` when that is not empty (a hash known beforehand, e.g. the run's record
  // of an artifact); DATA_LOSS naming the file and both hashes on a mismatch. Renames the
  // file into place only when everything matches.
  absl::Status Commit(absl::string_view expected_sha256 = "");

  uint64_t bytes() const { return bytes_; }

 private:
  DownloadSink(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

  const std::string path_, temp_;
  int fd_;  // the temporary file, open until Commit or destruction
  Sha256 hash_;
  uint64_t bytes_ = 0;
  uint64_t announced_size_ = 0;
  std::string announced_sha256_;
  bool committed_ = false;
};

struct FileDigest {
  uint64_t size_bytes = 0;
  std::string sha256;  // lower-case hex
};

// Size and sha256 of a local file, read in bounded chunks (for an upload's header).
absl::StatusOr<FileDigest> DigestFile(const std::string& path);

// Calls `on_chunk` with the file's bytes in chunks of at most `chunk_bytes`; stops early
// when it returns false. An error when the file cannot be read.
absl::Status ReadFileChunks(const std::string& path, size_t chunk_bytes,
                            const std::function<bool(absl::string_view)>& on_chunk);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_TRANSFER_H_
