// The fs/* methods of Codex's exec-server protocol (server/codex_exec_server.h) on the
// session's file calls, and the workspace paths they take.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "core/file_transfer.h"
#include "core/sandbox_spec.h"
#include "server/codex_exec_params.h"
#include "server/codex_exec_server.h"

namespace sandgate::server {

using codex_params::BoolField;
using codex_params::PercentDecode;
using codex_params::StringField;

absl::StatusOr<std::string> CodexExecServer::WorkspacePath(const Json& params,
                                                           const char* field) const {
  SANDGATE_ASSIGN_OR_RETURN(std::string uri, StringField(params, field));
  const std::string shown = EscapeInvalidUtf8(uri);
  if (!absl::StartsWith(uri, "file:///")) {
    return errors::InvalidArgument(
        absl::StrCat("params.", field, ": '", shown, "' is not a file:/// URL"));
  }
  SANDGATE_ASSIGN_OR_RETURN(std::string path,
                            PercentDecode(absl::string_view(uri).substr(strlen("file://"))));
  if (!IsValidUtf8(path)) {
    return errors::InvalidArgument(absl::StrCat("params.", field, ": the path is not UTF-8"));
  }
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      return errors::InvalidArgument(
          absl::StrCat("params.", field, ": '", shown, "' has a '..' (not taken)"));
    }
    parts.emplace_back(part);
  }
  std::vector<std::string> root = absl::StrSplit(options_.workdir, '/', absl::SkipEmpty());
  bool inside = parts.size() >= root.size();
  for (size_t i = 0; inside && i < root.size(); ++i) inside = parts[i] == root[i];
  if (!inside) {
    return errors::NotFound(absl::StrCat("outside the session's workspace (", options_.workdir,
                                         ": sandgate's file calls reach only the workspace)"),
                            shown);
  }
  return absl::StrJoin(parts.begin() + static_cast<long>(root.size()), parts.end(), "/");
}

CodexExecServer::Answer CodexExecServer::FsReadFile(const Json& params) {
  absl::StatusOr<std::string> path = WorkspacePath(params, "path");
  if (!path.ok()) return ErrorOf(path.status());
  v1::DownloadFileRequest request;
  request.set_session_id(options_.session_id);
  request.set_path(*path);
  absl::StatusOr<core::FileChunker> chunks =
      core::ReadForDownload(*deps_.sessions, caller_, request, options_.max_file_bytes);
  if (!chunks.ok()) return ErrorOf(chunks.status());
  std::string data;
  while (!chunks->done()) data += chunks->Next().data();
  return Result({{"dataBase64", absl::Base64Escape(data)}});
}

CodexExecServer::Answer CodexExecServer::FsWriteFile(const Json& params) {
  absl::StatusOr<std::string> path = WorkspacePath(params, "path");
  if (!path.ok()) return ErrorOf(path.status());
  absl::StatusOr<std::string> encoded = StringField(params, "dataBase64");
  if (!encoded.ok()) return ErrorOf(encoded.status());
  if (encoded->size() / 4 * 3 > options_.max_file_bytes + 2) {
    return Error(kInvalidRequest,
                 absl::StrCat("the file is over ", options_.max_file_bytes, " bytes"));
  }
  v1::UploadFileRequest header, data;
  if (!absl::Base64Unescape(*encoded, data.mutable_data())) {
    return Error(kInvalidParams, "params.dataBase64 must be base64");
  }
  header.mutable_header()->set_session_id(options_.session_id);
  header.mutable_header()->set_path(*path);
  core::UploadAssembler upload(options_.max_file_bytes);
  absl::Status st = upload.Add(header);
  if (st.ok()) st = upload.Add(data);
  if (st.ok()) st = upload.Commit(*deps_.sessions, caller_, /*cut=*/false).status();
  if (!st.ok()) return ErrorOf(st);
  return Result(Json::object());
}

CodexExecServer::Answer CodexExecServer::FsCreateDirectory(const Json& params) {
  absl::StatusOr<std::string> path = WorkspacePath(params, "path");
  if (!path.ok()) return ErrorOf(path.status());
  v1::MakeDirectoryRequest request;
  request.set_session_id(options_.session_id);
  request.set_path(*path);
  request.set_parents(BoolField(params, "recursive", true));
  v1::FileInfo info;
  absl::Status st = deps_.api->MakeDirectory(caller_, request, &info);
  if (!st.ok()) return ErrorOf(st);
  return Result(Json::object());
}

CodexExecServer::Answer CodexExecServer::FsGetMetadata(const Json& params) {
  absl::StatusOr<std::string> path = WorkspacePath(params, "path");
  if (!path.ok()) return ErrorOf(path.status());
  v1::StatFileRequest request;
  request.set_session_id(options_.session_id);
  request.set_path(*path);
  v1::FileInfo info;
  absl::Status st = deps_.api->StatFile(caller_, request, &info);
  if (!st.ok()) return ErrorOf(st);
  // sandgate's FileInfo has no times: 0 for both.
  return Result({{"isDirectory", info.type() == v1::FileInfo::TYPE_DIRECTORY},
                 {"isFile", info.type() == v1::FileInfo::TYPE_REGULAR},
                 {"isSymlink", info.type() == v1::FileInfo::TYPE_SYMLINK},
                 {"size", info.size_bytes()},
                 {"createdAtMs", 0},
                 {"modifiedAtMs", 0}});
}

CodexExecServer::Answer CodexExecServer::FsReadDirectory(const Json& params) {
  absl::StatusOr<std::string> path = WorkspacePath(params, "path");
  if (!path.ok()) return ErrorOf(path.status());
  v1::ListFilesRequest request;
  request.set_session_id(options_.session_id);
  request.set_dir(*path);
  v1::ListFilesResponse listing;
  absl::Status st = deps_.api->ListFiles(caller_, request, &listing);
  if (!st.ok()) return ErrorOf(st);
  // The listing goes down the tree; the directory's own entries are those one level below.
  const std::string prefix = path->empty() ? "" : *path + "/";
  Json entries = Json::array();
  for (const v1::FileInfo& f : listing.files()) {
    if (f.path_escaped() || !absl::StartsWith(f.path(), prefix)) continue;
    const std::string name = f.path().substr(prefix.size());
    if (name.empty() || absl::StrContains(name, '/')) continue;
    entries.push_back({{"fileName", name},
                       {"isDirectory", f.type() == v1::FileInfo::TYPE_DIRECTORY},
                       {"isFile", f.type() == v1::FileInfo::TYPE_REGULAR}});
  }
  return Result({{"entries", std::move(entries)}});
}

CodexExecServer::Answer CodexExecServer::FsRemove(const Json& params) {
  absl::StatusOr<std::string> path = WorkspacePath(params, "path");
  if (!path.ok()) return ErrorOf(path.status());
  if (path->empty()) return Error(kInvalidRequest, "the workspace itself is not removed");
  v1::DeleteFileRequest request;
  request.set_session_id(options_.session_id);
  request.set_path(*path);
  request.set_recursive(BoolField(params, "recursive", true));
  v1::DeleteFileResponse deleted;
  absl::Status st = deps_.api->DeleteFile(caller_, request, &deleted);
  if (st.code() == absl::StatusCode::kNotFound && BoolField(params, "force", true)) {
    st = absl::OkStatus();
  }
  if (!st.ok()) return ErrorOf(st);
  return Result(Json::object());
}

CodexExecServer::Answer CodexExecServer::FsCopy(const Json& params) {
  absl::StatusOr<std::string> from = WorkspacePath(params, "sourcePath");
  if (!from.ok()) return ErrorOf(from.status());
  absl::StatusOr<std::string> to = WorkspacePath(params, "destinationPath");
  if (!to.ok()) return ErrorOf(to.status());
  // sandgate has no copy call: `cp` in the sandbox, on the paths checked above (argv, no
  // shell), run to its end.
  v1::StartProcessRequest start;
  start.set_session_id(options_.session_id);
  start.add_argv("cp");
  if (BoolField(params, "recursive", false)) start.add_argv("-R");
  start.add_argv("--");
  start.add_argv(from->empty() ? "." : *from);
  start.add_argv(to->empty() ? "." : *to);
  start.set_command_timeout(true);
  v1::Process p;
  absl::Status st = deps_.api->StartProcess(caller_, start, &p);
  if (!st.ok()) return ErrorOf(st);
  std::string output;
  uint64_t offset = 0;
  for (;;) {
    v1::ReadProcessOutputRequest read;
    read.set_session_id(options_.session_id);
    read.set_process_id(p.id());
    read.set_offset(offset);
    read.set_until_exit(true);
    *read.mutable_wait() = core::ToProto(absl::Seconds(30));
    v1::ProcessOutput out;
    st = deps_.api->ReadProcessOutput(caller_, read, &out);
    if (!st.ok()) return ErrorOf(st);
    for (const auto& c : out.chunks()) output += c.data();
    offset = out.next_offset();
    if (out.process().state() == v1::Process::STATE_RUNNING || out.chunks_size() > 0) continue;
    if (out.process().state() == v1::Process::STATE_EXITED &&
        out.process().finished().exit_code() == 0) {
      return Result(Json::object());
    }
    const std::string why = output.empty() ? out.process().error() : output;
    if (absl::StrContains(why, "No such file")) return Error(kNotFound, EscapeInvalidUtf8(why));
    return Error(kInvalidRequest, absl::StrCat("cp: ", EscapeInvalidUtf8(why)));
  }
}

}  // namespace sandgate::server
