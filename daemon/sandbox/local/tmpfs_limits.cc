#include "sandbox/local/tmpfs_limits.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::sandbox::local {
namespace {

// The session's file systems, in mount order (unmounted in reverse); the image's bind, last,
// only for a session from an image (BindImage).
constexpr const char* kSessionMounts[] = {"root", "work", "tmp", "shm", "pts", "image"};
constexpr size_t kTmpfsMounts = 4;  // root, work, tmp, shm; then pts, made by Mount too
constexpr size_t kMadeByMount = kTmpfsMounts + 1;

// Links of every /dev; ptmx opens the session's own devpts instance.
constexpr std::pair<const char*, const char*> kDeviceLinks[] = {
    {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
    {"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"},
};

// Whether `dir` is the root of a mount of its own (also a bind of a directory onto itself).
bool IsMountRoot(const std::string& dir) {
  struct statx st;
  return statx(AT_FDCWD, dir.c_str(), AT_SYMLINK_NOFOLLOW, 0, &st) == 0 &&
         (st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
         (st.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

bool IsTmpfsMountRoot(const std::string& dir) {
  struct statfs fs;
  return IsMountRoot(dir) && statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// mkdir, or an existing directory (never a link to one: chmod and chown follow no link here).
absl::Status MakeDir(const std::string& path, mode_t mode) {
  struct stat st;
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return errors::FromErrno(errno, absl::StrCat("mkdir ", path));
  }
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return errors::FailedPrecondition(absl::StrCat(path, " is not a directory"));
  }
  if (chmod(path.c_str(), mode) != 0) return errors::FromErrno(errno, absl::StrCat("chmod ", path));
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir, mode_t mode) {
  for (size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    const std::string parent = dir.substr(0, slash);
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      return errors::FromErrno(errno, absl::StrCat("mkdir ", parent));
    }
  }
  return MakeDir(dir, mode);
}

// Checks (fill = false) or completes (fill = true) the shared /dev; every step tolerates
// what another process already did.
absl::Status DeviceDir(const std::string& dev, bool fill) {
  for (const char* node : kDeviceNodes) {
    struct stat host, copy;
    const std::string path = absl::StrCat(dev, "/", node);
    if (stat(absl::StrCat("/dev/", node).c_str(), &host) != 0) {
      return errors::FromErrno(errno, absl::StrCat("stat /dev/", node));
    }
    if (fill && ((mknod(path.c_str(), S_IFCHR | 0666, host.st_rdev) != 0 && errno != EEXIST) ||
                 chmod(path.c_str(), 0666) != 0)) {
      return errors::FromErrno(errno, absl::StrCat("mknod ", path));
    }
    if (lstat(path.c_str(), &copy) != 0) return errors::FromErrno(errno, path);
    if (!S_ISCHR(copy.st_mode) || copy.st_rdev != host.st_rdev || (copy.st_mode & 0666) != 0666) {
      return errors::FailedPrecondition(absl::StrCat(path, " is not a copy of /dev/", node));
    }
  }
  for (const auto& [name, target] : kDeviceLinks) {
    const std::string path = absl::StrCat(dev, "/", name);
    if (fill && symlink(target, path.c_str()) != 0 && errno != EEXIST) {
      return errors::FromErrno(errno, absl::StrCat("symlink ", path));
    }
    char buf[64];
    ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
    if (n < 0) return errors::FromErrno(errno, path);
    if (absl::string_view(buf, static_cast<size_t>(n)) != target) {
      return errors::FailedPrecondition(absl::StrCat(path, " does not point to ", target));
    }
  }
  for (const char* mount_point : {"shm", "pts"}) {
    const std::string path = absl::StrCat(dev, "/", mount_point);
    struct stat st;
    if (fill) SANDGATE_RETURN_IF_ERROR(MakeDir(path, 0755));
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return errors::FailedPrecondition(absl::StrCat(path, " is not a directory"));
    }
  }
  return absl::OkStatus();
}

// The shared /dev's mount flags: read-only once filled. bwrap's --remount-ro would add nodev
// (no device could be opened), so the sandboxes' binds inherit read-only from here instead.
absl::Status RemountDeviceDir(const std::string& dev, bool read_only) {
  if (mount(nullptr, dev.c_str(), nullptr,
            MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC | (read_only ? MS_RDONLY : 0),
            nullptr) != 0) {
    return errors::FromErrno(errno, absl::StrCat("remount ", dev));
  }
  return absl::OkStatus();
}

bool ReadOnlyMount(const std::string& path) {
  struct statvfs st;
  return statvfs(path.c_str(), &st) == 0 && (st.f_flag & ST_RDONLY) != 0;
}

// Detaches every mount stacked on `path` (a race between two daemons can stack two).
absl::Status UnmountAll(const std::string& path) {
  while (umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
  }
  if (errno != EINVAL && errno != ENOENT) {
    return errors::FromErrno(errno, absl::StrCat("umount ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PrepareDeviceNodes(const std::string& mount_dir) {
  if (mount_dir.size() < 2 || mount_dir.front() != '/' || mount_dir.back() == '/') {
    return errors::InvalidArgument(absl::StrCat("mount_dir ", mount_dir, ": not an absolute path"));
  }
  SANDGATE_RETURN_IF_ERROR(MakeDirs(mount_dir, 0711));
  // A private mount of its own: under /run's shared propagation every session's mounts would
  // be copied into other mount namespaces (services with PrivateTmp=, say), out of reach.
  if (!IsMountRoot(mount_dir) &&
      mount(mount_dir.c_str(), mount_dir.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return errors::FromErrno(errno, absl::StrCat("bind ", mount_dir, " onto itself"));
  }
  if (mount(nullptr, mount_dir.c_str(), nullptr, MS_PRIVATE, nullptr) != 0) {
    return errors::FromErrno(errno, absl::StrCat("make ", mount_dir, " private"));
  }
  const std::string dev = absl::StrCat(mount_dir, "/dev");
  // Usually there already (other providers of this host, earlier runs): then only checked,
  // so providers starting at the same time do not remount it under each other.
  if (!IsTmpfsMountRoot(dev) || !ReadOnlyMount(dev) || !DeviceDir(dev, false).ok()) {
    if (!IsTmpfsMountRoot(dev)) {
      SANDGATE_RETURN_IF_ERROR(MakeDir(dev, 0755));
      // Room for the entries only; nothing else is ever written there.
      if (mount("sandgate-dev", dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC,
                "size=4k,nr_inodes=32,mode=0755") != 0) {
        return errors::FromErrno(errno, absl::StrCat("mount tmpfs on ", dev));
      }
    } else {
      SANDGATE_RETURN_IF_ERROR(RemountDeviceDir(dev, false));
    }
    absl::Status filled = DeviceDir(dev, true);
    SANDGATE_RETURN_IF_ERROR(RemountDeviceDir(dev, true));
    // EROFS: another provider finished and sealed it meanwhile; the check decides.
    if (!filled.ok()) SANDGATE_RETURN_IF_ERROR(DeviceDir(dev, false));
  }
  // bwrap binds as the session's uid: every directory above must let others pass.
  for (std::string path = mount_dir; !path.empty(); path = path.substr(0, path.rfind('/'))) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return errors::FromErrno(errno, absl::StrCat("stat ", path));
    if ((st.st_mode & S_IXOTH) == 0) {
      return errors::FailedPrecondition(
          absl::StrCat("mount_dir ", mount_dir, ": ", path,
                       " is not searchable by others (o+x); the sandbox uids must reach it"));
    }
  }
  return absl::OkStatus();
}

SessionMounts SessionMounts::Plan(const std::string& mount_dir, uid_t uid) {
  SessionMounts m;
  m.dir_ = absl::StrCat(mount_dir, "/", uid);
  m.uid_ = uid;
  return m;
}

std::string SessionMounts::path(const char* name) const { return absl::StrCat(dir_, "/", name); }

absl::Status SessionMounts::Mount(const SessionMountSizes& sizes) const {
  SANDGATE_RETURN_IF_ERROR(Unmount());
  absl::Status status = MakeDir(dir_, 0700);
  if (status.ok() && lchown(dir_.c_str(), uid_, uid_) != 0) {
    status = errors::FromErrno(errno, absl::StrCat("chown ", dir_));
  }
  const std::pair<uint64_t, uint64_t> caps[] = {{sizes.root_bytes, sizes.root_inodes},
                                                {sizes.workspace_bytes, sizes.workspace_inodes},
                                                {sizes.workspace_bytes, sizes.workspace_inodes},
                                                {sizes.shm_bytes, sizes.shm_inodes}};
  static_assert(std::size(caps) == kTmpfsMounts);
  for (size_t i = 0; status.ok() && i < kMadeByMount; ++i) {
    const std::string target = path(kSessionMounts[i]);
    status = MakeDir(target, 0755);
    if (!status.ok()) break;
    const bool pts = i == kTmpfsMounts;
    // mode= is the only option besides the caps the sandbox sees in its mountinfo.
    const std::string options =
        pts ? "newinstance,ptmxmode=0666,mode=0620"
            : absl::StrCat("size=", caps[i].first, ",nr_inodes=", caps[i].second,
                           kSessionMounts[i] == std::string("shm") ? ",mode=1777" : ",mode=0755");
    if (mount(pts ? "devpts" : "tmpfs", target.c_str(), pts ? "devpts" : "tmpfs",
              MS_NOSUID | (pts ? MS_NOEXEC : MS_NODEV), options.c_str()) != 0) {
      status = errors::FromErrno(errno, absl::StrCat("mount ", kSessionMounts[i], " on ", target));
    } else if (!pts && lchown(target.c_str(), uid_, uid_) != 0) {
      status = errors::FromErrno(errno, absl::StrCat("chown ", target));
    }
  }
  if (!status.ok()) {
    absl::Status undo = Unmount();
    if (!undo.ok())
      status = absl::Status(status.code(), absl::StrCat(status.message(), "; ", undo.message()));
  }
  return status;
}

absl::Status SessionMounts::BindImage(int root_fd) const {
  const std::string target = path("image");
  SANDGATE_RETURN_IF_ERROR(MakeDir(target, 0755));
  // The descriptor's magic link, resolved by the kernel as root: no path above the image is
  // walked again, and none of it needs to be searchable by anyone but the daemon.
  const std::string source = absl::StrCat("/proc/self/fd/", root_fd);
  if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return errors::FromErrno(errno, absl::StrCat("bind the image root on ", target));
  }
  if (mount(nullptr, target.c_str(), nullptr,
            MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0 ||
      mount(nullptr, target.c_str(), nullptr, MS_PRIVATE, nullptr) != 0) {
    const int error = errno;
    UnmountAll(target).IgnoreError();
    return errors::FromErrno(error, absl::StrCat("make ", target, " a read-only private mount"));
  }
  return absl::OkStatus();
}

absl::Status SessionMounts::Unmount() const {
  if (dir_.empty()) return absl::OkStatus();
  absl::Status status;
  for (size_t i = std::size(kSessionMounts); i-- > 0;) {
    const std::string target = path(kSessionMounts[i]);
    absl::Status s = UnmountAll(target);
    if (s.ok() && rmdir(target.c_str()) != 0 && errno != ENOENT) {
      s = errors::FromErrno(errno, absl::StrCat("rmdir ", target));
    }
    status.Update(s);
  }
  if (status.ok() && rmdir(dir_.c_str()) != 0 && errno != ENOENT) {
    status = errors::FromErrno(errno, absl::StrCat("rmdir ", dir_));
  }
  return status;
}

}  // namespace sandgate::sandbox::local
