// The file RPCs of a kept session without gRPC: an upload gathered message by message and
// committed only when complete and as described, a download read whole and cut into chunks,
// and a listing sized for any client.
//
//   core::UploadAssembler up(max_bytes);
//   for (each message) SANDGATE_RETURN_IF_ERROR(up.Add(msg));   // or up.Unparsable()
//   absl::StatusOr<v1::FileInfo> info = up.Commit(sessions, caller, /*cut=*/false);
//
//   SANDGATE_ASSIGN_OR_RETURN(core::FileChunker chunks, core::ReadForDownload(...));
//   while (!chunks.done()) Send(chunks.Next());
//
// Not thread safe: an upload or a download is driven by one reaction or task at a time.
#ifndef SANDGATE_CORE_FILE_TRANSFER_H_
#define SANDGATE_CORE_FILE_TRANSFER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/session_manager.h"
#include "core/tenants.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::core {

constexpr uint64_t kTransferChunkBytes = 256 * 1024;

// UploadFile: a header, then data, gathered up to `max_bytes`. The file appears under its
// name only when the stream was complete (not cut) and the bytes match the header's
// size_bytes and sha256 when given; the workspace write itself goes through a temporary name
// (Session::WriteFile), so nothing partial is ever seen.
class UploadAssembler {
 public:
  explicit UploadAssembler(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The next message of the stream. An error ends the upload; nothing was written.
  absl::Status Add(const v1::UploadFileRequest& msg);
  // The next message did not parse as an UploadFileRequest: the error that ends the upload.
  absl::Status Unparsable();

  // The stream ended. `cut`: it was cancelled or broke instead of being half-closed, and
  // nothing is written. Else, once size and digest match, the file is written under a lease
  // on the header's session; returns what was written.
  absl::StatusOr<v1::FileInfo> Commit(SessionManager& sessions, const Caller& caller, bool cut);
  // As Commit, into `session` (the lease is the caller's).
  absl::StatusOr<v1::FileInfo> CommitTo(sandbox::Session& session, bool cut);
  // The error of a stream cut before Commit.
  absl::Status CutError() const;

  // "session:path" for the audit log, or "(no header)".
  std::string target() const;
  bool have_header() const { return have_header_; }
  const v1::UploadFileRequest::Header& header() const { return header_; }
  // The bytes taken so far: what a relay to the session's owner passes on.
  const std::string& data() const { return data_; }

 private:
  absl::Status CheckHeader() const;
  // Size and digest, when the header gave them, against what arrived.
  absl::Status CheckReceived(const std::string& sha256) const;
  // Whether what arrived may be written; its sha256 when it may.
  absl::StatusOr<std::string> CheckComplete(bool cut) const;
  absl::StatusOr<v1::FileInfo> Write(sandbox::Session& session, const std::string& sha256) const;

  const uint64_t max_bytes_;
  int messages_ = 0;
  v1::UploadFileRequest::Header header_;
  bool have_header_ = false;
  std::string data_;
};

// A file's bytes cut into FileChunks of kTransferChunkBytes; the last carries the sha256. An
// empty file is one empty chunk.
class FileChunker {
 public:
  explicit FileChunker(std::string data);
  bool done() const { return started_ && offset_ >= data_.size(); }
  v1::FileChunk Next();

 private:
  std::string data_;
  std::string sha256_;
  size_t offset_ = 0;
  bool started_ = false;
};

// DownloadFile: the file read from `session`'s workspace (regular files only), capped at
// request.max_bytes and at `max_bytes`.
absl::StatusOr<FileChunker> ReadForDownload(sandbox::Session& session,
                                            const v1::DownloadFileRequest& request,
                                            uint64_t max_bytes);
// As ReadForDownload, under a lease on the request's session.
absl::StatusOr<FileChunker> ReadForDownload(SessionManager& sessions, const Caller& caller,
                                            const v1::DownloadFileRequest& request,
                                            uint64_t max_bytes);

// ListFiles under a lease: names escaped to UTF-8, and the listing cut (truncated) before it
// outgrows what a default gRPC client reads.
absl::Status ListFiles(SessionManager& sessions, const Caller& caller,
                       const v1::ListFilesRequest& request, v1::ListFilesResponse* response);

// The rest of a session's files, under a lease, each path checked as UploadFile's is.
absl::Status StatFile(SessionManager& sessions, const Caller& caller,
                      const v1::StatFileRequest& request, v1::FileInfo* response);
absl::Status DeleteFile(SessionManager& sessions, const Caller& caller,
                        const v1::DeleteFileRequest& request, v1::DeleteFileResponse* response);
// Answers what `to` is now.
absl::Status RenameFile(SessionManager& sessions, const Caller& caller,
                        const v1::RenameFileRequest& request, v1::FileInfo* response);
absl::Status MakeDirectory(SessionManager& sessions, const Caller& caller,
                           const v1::MakeDirectoryRequest& request, v1::FileInfo* response);

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_FILE_TRANSFER_H_
