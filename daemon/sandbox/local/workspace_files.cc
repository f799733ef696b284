#include "sandbox/local/workspace_files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::sandbox::local {
namespace {

constexpr uint64_t kResolve =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

// openat2 below `dirfd`. Retries EAGAIN (the kernel's answer to a concurrent rename) and EINTR.
// Returns the fd or -errno.
int OpenBeneath(int dirfd, const std::string& path, uint64_t flags, mode_t mode = 0) {
  struct open_how how;
  memset(&how, 0, sizeof(how));
  how.flags = flags | O_NOFOLLOW | O_CLOEXEC;
  // O_PATH accepts no other flags in openat2.
  if ((flags & O_PATH) == 0) how.flags |= O_NONBLOCK | O_NOCTTY;
  how.mode = mode;
  how.resolve = kResolve;
  for (int attempt = 0; attempt < 8; ++attempt) {
    long fd = syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EAGAIN && errno != EINTR) break;
  }
  return -errno;
}

// The message for a failed resolution, naming the path as the caller gave it.
absl::Status OpenError(int err, absl::string_view path) {
  switch (err) {
    case ELOOP:
      return errors::InvalidArgument(absl::StrCat(path, ": refusing a symbolic link"));
    case EXDEV:
      return errors::InvalidArgument(absl::StrCat(path, ": leads out of the workspace"));
    case ENOENT:
      return errors::NotFound("file", path);
    case ENOTDIR:
      return errors::InvalidArgument(absl::StrCat(path, ": a parent is not a directory"));
    default:
      return errors::FromErrno(err, path);
  }
}

std::string RandomSuffix() {
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != sizeof(r))
    r ^= static_cast<uint64_t>(absl::GetCurrentTimeNanos());
  return absl::StrFormat("%016x", r);
}

// Makes this thread create files as the session's uid/gid for its lifetime. Needed, not just
// tidy: the workspace tmpfs belongs to the sandbox's user namespace, where the daemon's uid 0
// is unmapped, so the kernel refuses inodes created as root (EOVERFLOW). Credentials are per
// thread in Linux and setfsuid is not broadcast by glibc, so other threads are unaffected.
class ScopedFsIds {
 public:
  ScopedFsIds(uid_t uid, gid_t gid) {
    old_gid_ = static_cast<gid_t>(setfsgid(gid));
    old_uid_ = static_cast<uid_t>(setfsuid(uid));
    ok_ = static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))) == uid &&
          static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1))) == gid;
  }
  ~ScopedFsIds() {
    setfsuid(old_uid_);
    setfsgid(old_gid_);
  }
  ScopedFsIds(const ScopedFsIds&) = delete;
  ScopedFsIds& operator=(const ScopedFsIds&) = delete;
  bool ok() const { return ok_; }

 private:
  uid_t old_uid_;
  gid_t old_gid_;
  bool ok_ = false;
};

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Lists below one directory, depth first. Whatever the sandbox planted there (names that
// are not UTF-8, trees deeper than the limit, more entries than the cap, directories that
// cannot be opened) marks the listing instead of failing it: the caller always gets what
// could be listed.
struct Walker {
  const ListLimits& limits;
  FileListing* out;

  // `dir_index` is the entry of the directory being walked in out->entries (-1 for the
  // listed directory itself, whose failures are the caller's).
  absl::Status Walk(int dirfd, const std::string& prefix, int depth, long dir_index) {
    alignas(LinuxDirent64) char buf[16384];
    for (;;) {
      long n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf));
      if (n < 0) {
        if (dir_index < 0) return errors::FromErrno(errno, prefix.empty() ? "." : prefix);
        out->entries[static_cast<size_t>(dir_index)].not_listed =
            absl::StrCat("cannot be read: ", strerror(errno));
        return absl::OkStatus();
      }
      if (n == 0) return absl::OkStatus();
      for (long off = 0; off < n;) {
        auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
        off += d->d_reclen;
        const std::string name = d->d_name;
        if (name == "." || name == "..") continue;
        if (out->entries.size() >= limits.max_entries) {
          out->truncated = true;
          return absl::OkStatus();
        }
        struct stat st;
        if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // raced away
        FileEntry e;
        e.path = prefix + name;
        if (S_ISREG(st.st_mode)) {
          e.type = FileType::kRegular;
          e.size = static_cast<uint64_t>(st.st_size);
        } else if (S_ISDIR(st.st_mode)) {
          e.type = FileType::kDirectory;
        } else if (S_ISLNK(st.st_mode)) {
          e.type = FileType::kSymlink;
        }
        const bool descend = e.type == FileType::kDirectory;
        if (descend && depth + 1 > limits.max_depth) {
          e.not_listed = absl::StrCat("deeper than ", limits.max_depth, " levels");
        }
        const std::string path = e.path;
        const bool too_deep = !e.not_listed.empty();
        out->entries.push_back(std::move(e));
        if (!descend || too_deep) continue;
        const long index = static_cast<long>(out->entries.size()) - 1;
        int sub = OpenBeneath(dirfd, name, O_RDONLY | O_DIRECTORY);
        if (sub == -ENOENT || sub == -ELOOP || sub == -ENOTDIR) continue;  // swapped meanwhile
        if (sub < 0) {
          out->entries[static_cast<size_t>(index)].not_listed =
              absl::StrCat("cannot be opened: ", strerror(-sub));
          continue;
        }
        UniqueFd subfd(sub);
        SANDGATE_RETURN_IF_ERROR(Walk(subfd.get(), path + "/", depth + 1, index));
        if (out->truncated) return absl::OkStatus();
      }
    }
  }
};

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitWorkspacePath(absl::string_view path,
                                                            bool allow_empty) {
  if (path.find('\0') != absl::string_view::npos) {
    return errors::InvalidArgument("path contains a NUL byte");
  }
  if (!path.empty() && path.front() == '/') {
    return errors::InvalidArgument(absl::StrCat(path, ": must be relative to the workspace"));
  }
  if (path.size() > 4096) return errors::InvalidArgument("path longer than 4096 bytes");
  std::vector<std::string> parts;
  for (absl::string_view p : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (p == ".") continue;
    if (p == "..") return errors::InvalidArgument(absl::StrCat(path, ": \"..\" is not allowed"));
    parts.emplace_back(p);
  }
  if (parts.empty() && !allow_empty) {
    return errors::InvalidArgument(absl::StrCat("\"", path, "\": names no file"));
  }
  return parts;
}

absl::StatusOr<UniqueFd> WorkspaceFiles::OpenRoot(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return errors::FromErrno(errno, path);
  return fd;
}

absl::StatusOr<std::string> WorkspaceFiles::ReadFile(absl::string_view path,
                                                     uint64_t max_bytes) const {
  std::string data;
  SANDGATE_RETURN_IF_ERROR(ReadFileTo(path, max_bytes, [&data](absl::string_view piece) {
    data.append(piece.data(), piece.size());
    return absl::OkStatus();
  }));
  return data;
}

absl::Status WorkspaceFiles::ReadFileTo(absl::string_view path, uint64_t max_bytes,
                                        const Session::FileSink& sink) const {
  absl::StatusOr<std::vector<std::string>> parts = SplitWorkspacePath(path, false);
  if (!parts.ok()) return parts.status();
  int raw = OpenBeneath(root_.get(), absl::StrJoin(*parts, "/"), O_RDONLY);
  if (raw < 0) return OpenError(-raw, path);
  UniqueFd fd(raw);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return errors::FromErrno(errno, path);
  if (!S_ISREG(st.st_mode))
    return errors::InvalidArgument(absl::StrCat(path, ": not a regular file"));
  if (st.st_nlink != 1) {
    return errors::InvalidArgument(absl::StrCat(path, ": refusing a file with several hard links"));
  }
  // The size is whatever read() delivers, not st_size: the file may grow while we read.
  uint64_t total = 0;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return errors::FromErrno(errno, path);
    if (n == 0) return absl::OkStatus();
    if (total + static_cast<uint64_t>(n) > max_bytes) {
      return errors::ResourceExhausted(
          absl::StrCat(path, ": larger than the limit of ", max_bytes, " bytes"));
    }
    total += static_cast<uint64_t>(n);
    SANDGATE_RETURN_IF_ERROR(sink(absl::string_view(buf, static_cast<size_t>(n))));
  }
}

absl::Status WorkspaceFiles::WriteFile(absl::string_view path, absl::string_view data,
                                       int mode) const {
  absl::StatusOr<std::vector<std::string>> parts = SplitWorkspacePath(path, false);
  if (!parts.ok()) return parts.status();
  const std::string name = parts->back();
  parts->pop_back();
  ScopedFsIds ids(uid_, gid_);
  if (!ids.ok()) return errors::Internal("cannot switch to the session's file system ids");

  UniqueFd dir;
  int cur = root_.get();
  std::string walked;
  for (const std::string& comp : *parts) {
    absl::StrAppend(&walked, walked.empty() ? "" : "/", comp);
    int fd = OpenBeneath(cur, comp, O_PATH | O_DIRECTORY);
    if (fd == -ENOENT) {
      if (mkdirat(cur, comp.c_str(), 0755) != 0 && errno != EEXIST) {
        return errors::FromErrno(errno, walked);
      }
      fd = OpenBeneath(cur, comp, O_PATH | O_DIRECTORY);
    }
    if (fd < 0) return OpenError(-fd, walked);
    dir.reset(fd);
    cur = dir.get();
  }

  const std::string tmp = absl::StrCat(".sandgate-upload-", RandomSuffix());
  int raw = OpenBeneath(cur, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (raw < 0) return OpenError(-raw, path);
  UniqueFd fd(raw);
  bool renamed = false;
  absl::Cleanup remove_tmp = [&] {
    if (!renamed) unlinkat(cur, tmp.c_str(), 0);
  };
  for (size_t off = 0; off < data.size();) {
    ssize_t n = write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return errors::FromErrno(errno, path);
    off += static_cast<size_t>(n);
  }
  if (fchmod(fd.get(), static_cast<mode_t>(mode) & 0777) != 0)
    return errors::FromErrno(errno, path);
  if (renameat2(cur, tmp.c_str(), cur, name.c_str(), 0) != 0) return errors::FromErrno(errno, path);
  renamed = true;
  return absl::OkStatus();
}

absl::StatusOr<FileListing> WorkspaceFiles::ListFiles(absl::string_view dir,
                                                      const ListLimits& limits) const {
  absl::StatusOr<std::vector<std::string>> parts = SplitWorkspacePath(dir, true);
  if (!parts.ok()) return parts.status();
  const std::string rel = parts->empty() ? "." : absl::StrJoin(*parts, "/");
  int raw = OpenBeneath(root_.get(), rel, O_RDONLY | O_DIRECTORY);
  if (raw < 0) return OpenError(-raw, dir.empty() ? "." : dir);
  UniqueFd fd(raw);
  FileListing out;
  Walker walker{limits, &out};
  SANDGATE_RETURN_IF_ERROR(walker.Walk(fd.get(), parts->empty() ? "" : rel + "/", 0, -1));
  std::sort(out.entries.begin(), out.entries.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  return out;
}

namespace {

FileType TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kRegular;
  if (S_ISDIR(mode)) return FileType::kDirectory;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  return FileType::kOther;
}

// Empties the directory `dirfd` (opened beneath the workspace), depth first; links are
// removed, never followed.
absl::Status RemoveTree(int dirfd, const std::string& where, int depth) {
  if (depth > WorkspaceFiles::kMaxRemoveDepth) {
    return errors::FailedPrecondition(absl::StrCat(
        where, ": deeper than ", WorkspaceFiles::kMaxRemoveDepth, " levels; remove it in parts"));
  }
  alignas(LinuxDirent64) char buf[16384];
  for (;;) {
    // Entries are removed as they are read: read from the start each round.
    if (lseek(dirfd, 0, SEEK_SET) < 0) return errors::FromErrno(errno, where);
    long n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf));
    if (n < 0) return errors::FromErrno(errno, where);
    bool removed = false;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      off += d->d_reclen;
      const std::string name = d->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = absl::StrCat(where, "/", name);
      struct stat st;
      if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // raced away
      if (S_ISDIR(st.st_mode)) {
        int sub = OpenBeneath(dirfd, name, O_RDONLY | O_DIRECTORY);
        if (sub < 0) return OpenError(-sub, path);
        UniqueFd subfd(sub);
        SANDGATE_RETURN_IF_ERROR(RemoveTree(subfd.get(), path, depth + 1));
      }
      if (unlinkat(dirfd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0 &&
          errno != ENOENT) {
        return errors::FromErrno(errno, path);
      }
      removed = true;
    }
    if (!removed) return absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<int> WorkspaceFiles::OpenDir(const std::vector<std::string>& parts, bool create,
                                            UniqueFd* holder) const {
  int cur = root_.get();
  std::string walked;
  for (const std::string& comp : parts) {
    absl::StrAppend(&walked, walked.empty() ? "" : "/", comp);
    int fd = OpenBeneath(cur, comp, O_PATH | O_DIRECTORY);
    if (fd == -ENOENT && create) {
      if (mkdirat(cur, comp.c_str(), 0755) != 0 && errno != EEXIST) {
        return errors::FromErrno(errno, walked);
      }
      fd = OpenBeneath(cur, comp, O_PATH | O_DIRECTORY);
    }
    struct stat st;
    if (fd == -ENOTDIR && fstatat(cur, comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
      fd = -ELOOP;  // a link where a directory was asked: say so, not "not a directory"
    }
    if (fd < 0) return OpenError(-fd, walked);
    holder->reset(fd);
    cur = holder->get();
  }
  return cur;
}

absl::StatusOr<int> WorkspaceFiles::OpenParent(absl::string_view path, bool create,
                                               UniqueFd* holder, std::string* name) const {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitWorkspacePath(path, false));
  *name = parts.back();
  parts.pop_back();
  return OpenDir(parts, create, holder);
}

absl::StatusOr<FileEntry> WorkspaceFiles::Stat(absl::string_view path) const {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitWorkspacePath(path, true));
  FileEntry e;
  e.path = absl::StrJoin(parts, "/");
  struct stat st;
  if (parts.empty()) {
    if (fstat(root_.get(), &st) != 0) return errors::FromErrno(errno, ".");
  } else {
    const std::string name = parts.back();
    parts.pop_back();
    UniqueFd holder;
    SANDGATE_ASSIGN_OR_RETURN(int dir, OpenDir(parts, false, &holder));
    if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return OpenError(errno, path);
  }
  e.type = TypeOf(st.st_mode);
  if (e.type == FileType::kRegular) e.size = static_cast<uint64_t>(st.st_size);
  return e;
}

absl::Status WorkspaceFiles::Remove(absl::string_view path, bool recursive) const {
  ScopedFsIds ids(uid_, gid_);
  if (!ids.ok()) return errors::Internal("cannot switch to the session's file system ids");
  UniqueFd holder;
  std::string name;
  SANDGATE_ASSIGN_OR_RETURN(int dir, OpenParent(path, false, &holder, &name));
  struct stat st;
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return OpenError(errno, path);
  if (S_ISDIR(st.st_mode) && recursive) {
    int sub = OpenBeneath(dir, name, O_RDONLY | O_DIRECTORY);
    if (sub < 0) return OpenError(-sub, path);
    UniqueFd subfd(sub);
    SANDGATE_RETURN_IF_ERROR(RemoveTree(subfd.get(), std::string(path), 1));
  }
  if (unlinkat(dir, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0) {
    if (errno == ENOTEMPTY || errno == EEXIST) {
      return errors::FailedPrecondition(
          absl::StrCat(path, ": the directory is not empty (remove it recursively)"));
    }
    return OpenError(errno, path);
  }
  return absl::OkStatus();
}

absl::Status WorkspaceFiles::Rename(absl::string_view from, absl::string_view to,
                                    bool overwrite) const {
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> from_parts, SplitWorkspacePath(from, false));
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> to_parts, SplitWorkspacePath(to, false));
  const std::string from_name = from_parts.back(), to_name = to_parts.back();
  from_parts.pop_back();
  to_parts.pop_back();
  ScopedFsIds ids(uid_, gid_);
  if (!ids.ok()) return errors::Internal("cannot switch to the session's file system ids");
  UniqueFd from_holder, to_holder;
  SANDGATE_ASSIGN_OR_RETURN(int from_dir, OpenDir(from_parts, false, &from_holder));
  SANDGATE_ASSIGN_OR_RETURN(int to_dir, OpenDir(to_parts, true, &to_holder));
  if (renameat2(from_dir, from_name.c_str(), to_dir, to_name.c_str(),
                overwrite ? 0 : RENAME_NOREPLACE) != 0) {
    switch (errno) {
      case EEXIST:
        return absl::AlreadyExistsError(
            absl::StrCat(to, ": already exists (rename with overwrite to replace it)"));
      case ENOENT:
        return errors::NotFound("file", from);
      case EINVAL:
        return errors::InvalidArgument(
            absl::StrCat(from, ": cannot be moved into itself (", to, ")"));
      case ENOTEMPTY:
      case EISDIR:
      case ENOTDIR:
        return errors::FailedPrecondition(
            absl::StrCat(to, ": ", strerror(errno), " (cannot replace it with ", from, ")"));
      default:
        return errors::FromErrno(errno, from);
    }
  }
  return absl::OkStatus();
}

absl::Status WorkspaceFiles::MakeDirectory(absl::string_view path, bool parents) const {
  ScopedFsIds ids(uid_, gid_);
  if (!ids.ok()) return errors::Internal("cannot switch to the session's file system ids");
  UniqueFd holder;
  std::string name;
  SANDGATE_ASSIGN_OR_RETURN(int dir, OpenParent(path, parents, &holder, &name));
  if (mkdirat(dir, name.c_str(), 0755) == 0) return absl::OkStatus();
  if (errno != EEXIST) return OpenError(errno, path);
  struct stat st;
  if (parents && fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
    return absl::OkStatus();
  }
  return absl::AlreadyExistsError(absl::StrCat(path, ": already exists"));
}

}  // namespace sandgate::sandbox::local
