#include "core/file_transfer.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "core/request_validation.h"

namespace sandgate::core {
namespace {

// gRPC clients refuse a message over 4 MiB unless told otherwise, and a default workspace
// holds 16384 names of up to 255 bytes: a listing ends (truncated) before that, so that any
// client can read it.
constexpr size_t kMaxListingBytes = 3 << 20;

bool IsSha256Hex(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

v1::FileInfo::Type ToProto(sandbox::FileType t) {
  switch (t) {
    case sandbox::FileType::kRegular:
      return v1::FileInfo::TYPE_REGULAR;
    case sandbox::FileType::kDirectory:
      return v1::FileInfo::TYPE_DIRECTORY;
    case sandbox::FileType::kSymlink:
      return v1::FileInfo::TYPE_SYMLINK;
    case sandbox::FileType::kOther:
      return v1::FileInfo::TYPE_OTHER;
  }
  return v1::FileInfo::TYPE_OTHER;
}

// A file as the API shows it.
v1::FileInfo ToFileInfo(const sandbox::FileEntry& f) {
  v1::FileInfo info;
  bool escaped = false;
  info.set_path(EscapeInvalidUtf8(f.path, &escaped));
  info.set_path_escaped(escaped);
  info.set_type(ToProto(f.type));
  info.set_size_bytes(f.size);
  return info;
}

}  // namespace

absl::Status UploadAssembler::Add(const v1::UploadFileRequest& msg) {
  ++messages_;
  if (!have_header_) {
    if (!msg.has_header() || msg.header().session_id().empty() || msg.header().path().empty()) {
      return errors::InvalidArgument("header: the first message must carry session_id and path");
    }
    header_ = msg.header();
    have_header_ = true;
    return CheckHeader();
  }
  if (msg.has_header())
    return errors::InvalidArgument("header: only the first message carries one");
  if (data_.size() + msg.data().size() > max_bytes_) {
    return errors::ResourceExhausted(absl::StrCat(
        "upload of ", header_.path(), " is larger than the ", max_bytes_, "-byte limit"));
  }
  if (header_.has_size_bytes() && data_.size() + msg.data().size() > header_.size_bytes()) {
    return errors::FailedPrecondition(absl::StrCat("upload of ", header_.path(),
                                                   ": more bytes than header.size_bytes (",
                                                   header_.size_bytes(), "); nothing was written"));
  }
  data_.append(msg.data());
  return absl::OkStatus();
}

absl::Status UploadAssembler::Unparsable() {
  ++messages_;
  return errors::InvalidArgument(
      absl::StrCat("message ", messages_,
                   " is not a valid sandgate.v1.UploadFileRequest (a string field "
                   "that is not UTF-8, or bytes that are not one); nothing was written"));
}

absl::Status UploadAssembler::CheckHeader() const {
  if (absl::EndsWith(header_.path(), "/")) {
    return errors::InvalidArgument(absl::StrCat(
        "header.path: \"", header_.path(), "\" ends with \"/\"; name a file, not a directory"));
  }
  if (!header_.sha256().empty() && !IsSha256Hex(header_.sha256())) {
    return errors::InvalidArgument("header.sha256: must be 64 lowercase hex digits");
  }
  if (header_.has_size_bytes() && header_.size_bytes() > max_bytes_) {
    return errors::InvalidArgument(absl::StrCat("header.size_bytes: ", header_.size_bytes(),
                                                " is larger than the ", max_bytes_, "-byte limit"));
  }
  return absl::OkStatus();
}

absl::Status UploadAssembler::CutError() const {
  return errors::Cancelled(
      absl::StrCat("upload of ", have_header_ ? header_.path() : "(no header yet)",
                   " was cancelled after ", data_.size(), " bytes; nothing was written"));
}

absl::Status UploadAssembler::CheckReceived(const std::string& sha256) const {
  if (header_.has_size_bytes() && data_.size() != header_.size_bytes()) {
    return errors::FailedPrecondition(
        absl::StrCat("upload of ", header_.path(), ": header.size_bytes says ",
                     header_.size_bytes(), " bytes, got ", data_.size(), "; nothing was written"));
  }
  if (!header_.sha256().empty() && sha256 != header_.sha256()) {
    return errors::FailedPrecondition(absl::StrCat("upload of ", header_.path(),
                                                   ": header.sha256 says ", header_.sha256(),
                                                   ", got ", sha256, "; nothing was written"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> UploadAssembler::CheckComplete(bool cut) const {
  if (cut) return CutError();
  if (!have_header_) {
    return errors::InvalidArgument("header: the first message must carry session_id and path");
  }
  std::string sha256 = Sha256::Hex(data_);
  if (absl::Status st = CheckReceived(sha256); !st.ok()) return st;
  return sha256;
}

absl::StatusOr<v1::FileInfo> UploadAssembler::Commit(SessionManager& sessions, const Caller& caller,
                                                     bool cut) {
  absl::StatusOr<std::string> sha256 = CheckComplete(cut);
  if (!sha256.ok()) return sha256.status();
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> lease =
      sessions.Acquire(caller, header_.session_id());
  if (!lease.ok()) return lease.status();
  return Write((*lease)->session(), *sha256);
}

absl::StatusOr<v1::FileInfo> UploadAssembler::CommitTo(sandbox::Session& session, bool cut) {
  absl::StatusOr<std::string> sha256 = CheckComplete(cut);
  if (!sha256.ok()) return sha256.status();
  return Write(session, *sha256);
}

absl::StatusOr<v1::FileInfo> UploadAssembler::Write(sandbox::Session& session,
                                                    const std::string& sha256) const {
  absl::Status written = session.WriteFile(
      header_.path(), data_, header_.mode() ? static_cast<int>(header_.mode()) : 0644);
  if (!written.ok()) return written;
  v1::FileInfo info;
  info.set_path(header_.path());
  info.set_type(v1::FileInfo::TYPE_REGULAR);
  info.set_size_bytes(data_.size());
  info.set_sha256(sha256);
  return info;
}

std::string UploadAssembler::target() const {
  return have_header_ ? absl::StrCat(header_.session_id(), ":", header_.path()) : "(no header)";
}

FileChunker::FileChunker(std::string data) : data_(std::move(data)), sha256_(Sha256::Hex(data_)) {}

v1::FileChunk FileChunker::Next() {
  started_ = true;
  v1::FileChunk chunk;
  chunk.set_offset(offset_);
  chunk.set_total_size(data_.size());
  size_t n = std::min<size_t>(kTransferChunkBytes, data_.size() - offset_);
  chunk.set_data(data_.substr(offset_, n));
  offset_ += n;
  if (offset_ >= data_.size()) chunk.set_sha256(sha256_);
  return chunk;
}

absl::StatusOr<FileChunker> ReadForDownload(sandbox::Session& session,
                                            const v1::DownloadFileRequest& request,
                                            uint64_t max_bytes) {
  if (request.path().empty()) return errors::InvalidArgument("path: required");
  uint64_t cap = request.max_bytes() ? std::min(request.max_bytes(), max_bytes) : max_bytes;
  absl::StatusOr<std::string> data = session.ReadFile(request.path(), cap);
  if (!data.ok()) return data.status();
  return FileChunker(std::move(*data));
}

absl::StatusOr<FileChunker> ReadForDownload(SessionManager& sessions, const Caller& caller,
                                            const v1::DownloadFileRequest& request,
                                            uint64_t max_bytes) {
  if (request.path().empty()) return errors::InvalidArgument("path: required");
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> lease =
      sessions.Acquire(caller, request.session_id());
  if (!lease.ok()) return lease.status();
  return ReadForDownload((*lease)->session(), request, max_bytes);
}

absl::Status ListFiles(SessionManager& sessions, const Caller& caller,
                       const v1::ListFilesRequest& request, v1::ListFilesResponse* response) {
  absl::StatusOr<std::unique_ptr<SessionManager::Lease>> lease =
      sessions.Acquire(caller, request.session_id());
  if (!lease.ok()) return lease.status();
  absl::StatusOr<sandbox::FileListing> files = (*lease)->session().ListFiles(request.dir());
  if (!files.ok()) return files.status();
  response->set_truncated(files->truncated);
  size_t bytes = 0;
  for (const auto& f : files->entries) {
    // Sandbox code names its files: a name need not be UTF-8, which a proto3 string must be.
    v1::FileInfo info = ToFileInfo(f);
    info.set_not_listed(f.not_listed);
    bytes += info.ByteSizeLong() + 4;  // with the field's tag and length
    if (bytes > kMaxListingBytes) {
      response->set_truncated(true);
      break;
    }
    *response->add_files() = std::move(info);
  }
  return absl::OkStatus();
}

namespace {

// Runs `op` on the session of `session_id` under a lease.
absl::Status InSession(SessionManager& sessions, const Caller& caller,
                       const std::string& session_id,
                       const std::function<absl::Status(sandbox::Session&)>& op) {
  SANDGATE_ASSIGN_OR_RETURN(std::unique_ptr<SessionManager::Lease> lease,
                            sessions.Acquire(caller, session_id));
  return op(lease->session());
}

}  // namespace

absl::Status StatFile(SessionManager& sessions, const Caller& caller,
                      const v1::StatFileRequest& request, v1::FileInfo* response) {
  if (!request.path().empty())
    SANDGATE_RETURN_IF_ERROR(ValidateWorkspacePath(request.path(), "path"));
  return InSession(sessions, caller, request.session_id(), [&](sandbox::Session& s) {
    SANDGATE_ASSIGN_OR_RETURN(sandbox::FileEntry e, s.StatFile(request.path()));
    *response = ToFileInfo(e);
    return absl::OkStatus();
  });
}

absl::Status DeleteFile(SessionManager& sessions, const Caller& caller,
                        const v1::DeleteFileRequest& request, v1::DeleteFileResponse* response) {
  SANDGATE_RETURN_IF_ERROR(ValidateWorkspacePath(request.path(), "path"));
  return InSession(sessions, caller, request.session_id(), [&](sandbox::Session& s) {
    return s.RemoveFile(request.path(), request.recursive());
  });
}

absl::Status RenameFile(SessionManager& sessions, const Caller& caller,
                        const v1::RenameFileRequest& request, v1::FileInfo* response) {
  SANDGATE_RETURN_IF_ERROR(ValidateWorkspacePath(request.from(), "from"));
  SANDGATE_RETURN_IF_ERROR(ValidateWorkspacePath(request.to(), "to"));
  return InSession(sessions, caller, request.session_id(), [&](sandbox::Session& s) {
    SANDGATE_RETURN_IF_ERROR(s.RenameFile(request.from(), request.to(), request.overwrite()));
    SANDGATE_ASSIGN_OR_RETURN(sandbox::FileEntry e, s.StatFile(request.to()));
    *response = ToFileInfo(e);
    return absl::OkStatus();
  });
}

absl::Status MakeDirectory(SessionManager& sessions, const Caller& caller,
                           const v1::MakeDirectoryRequest& request, v1::FileInfo* response) {
  SANDGATE_RETURN_IF_ERROR(ValidateWorkspacePath(request.path(), "path"));
  return InSession(sessions, caller, request.session_id(), [&](sandbox::Session& s) {
    SANDGATE_RETURN_IF_ERROR(s.MakeDirectory(request.path(), request.parents()));
    SANDGATE_ASSIGN_OR_RETURN(sandbox::FileEntry e, s.StatFile(request.path()));
    *response = ToFileInfo(e);
    return absl::OkStatus();
  });
}

}  // namespace sandgate::core
