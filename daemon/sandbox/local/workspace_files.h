// File transfer between the daemon and a sandbox workspace, through openat2.
//
// The daemon (root) holds one O_PATH directory fd of the workspace, opened through
// /proc/<init>/root/work before any untrusted code ran. Every access resolves below it with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV, so
// nothing the sandbox plants (symlinks, "..", mount points, fifos, hard links to host files)
// can make the daemon read or write outside the workspace or block (isolation.md §4).
//
//   SANDGATE_ASSIGN_OR_RETURN(WorkspaceFiles ws, WorkspaceFiles::Open(dir_fd, uid, gid));
//   SANDGATE_RETURN_IF_ERROR(ws.WriteFile("in/data.csv", csv, 0644));
//   SANDGATE_ASSIGN_OR_RETURN(std::string memo, ws.ReadFile("memo.md", 1 << 20));
//
// Thread safe: the object only reads its fd; calls may run concurrently.
#ifndef SANDGATE_SANDBOX_LOCAL_WORKSPACE_FILES_H_
#define SANDGATE_SANDBOX_LOCAL_WORKSPACE_FILES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"
#include "sandbox/sandbox.h"

namespace sandgate::sandbox::local {

struct ListLimits {
  size_t max_entries = 100000;
  int max_depth = 64;
};

class WorkspaceFiles {
 public:
  // Takes an O_PATH | O_DIRECTORY fd of the workspace root. New files and directories are
  // owned by `uid`:`gid` (the session's host ids).
  WorkspaceFiles(UniqueFd root, uid_t uid, gid_t gid)
      : root_(std::move(root)), uid_(uid), gid_(gid) {}

  // Opens `path` (absolute host path, trusted) as the workspace root.
  static absl::StatusOr<UniqueFd> OpenRoot(const std::string& path);

  // Regular files with one link only. RESOURCE_EXHAUSTED when more than max_bytes are read.
  absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max_bytes) const;
  // The same file checks; the data goes to `sink` 64 KiB at a time (Session::ReadFileTo).
  absl::Status ReadFileTo(absl::string_view path, uint64_t max_bytes,
                          const Session::FileSink& sink) const;
  // Creates missing parent directories, writes a temporary file and renames it into place;
  // an existing file is replaced, never truncated in place. Runs with the calling thread's
  // fsuid/fsgid switched to the session's ids, so the sandbox's own permissions apply and
  // what is created belongs to the session.
  absl::Status WriteFile(absl::string_view path, absl::string_view data, int mode) const;
  // Every entry below `dir`, sorted by path; symlinks are listed, never followed. Fails only
  // when `dir` itself cannot be listed: a directory deeper than max_depth or one that
  // cannot be opened is listed with FileEntry::not_listed set, and reaching max_entries
  // ends the listing with truncated set.
  absl::StatusOr<FileListing> ListFiles(absl::string_view dir, const ListLimits& limits = {}) const;
  // What `path` is, not following a link ("" = the workspace itself).
  absl::StatusOr<FileEntry> Stat(absl::string_view path) const;
  // Removes a file, a link (never what it points to) or an empty directory; with
  // `recursive`, a directory with everything in it (up to kMaxRemoveDepth levels).
  // FAILED_PRECONDITION for a directory that is not empty without `recursive`.
  absl::Status Remove(absl::string_view path, bool recursive) const;
  // Renames within the workspace; missing parents of `to` are made. An existing `to` is
  // ALREADY_EXISTS unless `overwrite` (then it is replaced as rename(2) does).
  absl::Status Rename(absl::string_view from, absl::string_view to, bool overwrite) const;
  // Makes a directory; with `parents`, also its missing parents, and an existing directory is
  // fine. ALREADY_EXISTS otherwise.
  absl::Status MakeDirectory(absl::string_view path, bool parents) const;

  static constexpr int kMaxRemoveDepth = 256;

 private:
  // The O_PATH directory fd of `parts` below the root (the root itself: `holder` stays empty
  // and the root's fd is returned); with `create`, missing directories are made. Call with
  // the session's fs ids when creating.
  absl::StatusOr<int> OpenDir(const std::vector<std::string>& parts, bool create,
                              UniqueFd* holder) const;
  // The directory fd of the parent of `path` (a non-empty workspace path) as OpenDir gives
  // it, and the last component in *name.
  absl::StatusOr<int> OpenParent(absl::string_view path, bool create, UniqueFd* holder,
                                 std::string* name) const;

  UniqueFd root_;
  uid_t uid_;
  gid_t gid_;
};

// Checks a workspace-relative path: not empty (unless allow_empty), not absolute, no "..",
// no NUL. Returns its components ("." and empty ones dropped).
absl::StatusOr<std::vector<std::string>> SplitWorkspacePath(absl::string_view path,
                                                            bool allow_empty);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_WORKSPACE_FILES_H_
