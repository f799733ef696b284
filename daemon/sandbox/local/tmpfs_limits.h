// The file systems of a local sandbox that are not host binds, made by the daemon.
//
// bwrap (0.8.0) can make tmpfs mounts itself, but every one of them then names the host uid
// of the session in its mount options (uid=, from the mounting bwrap's fsuid, in every
// sandbox's /proc/self/mountinfo), its root and /dev take no size (an unsized tmpfs reports
// half the host's RAM to statfs), and --size has no inode counterpart; its --dev binds the
// host's devtmpfs nodes, whose options carry a size derived from the host's RAM. So the
// daemon, as root, mounts each of them under `mount_dir` with its caps (options then show
// only size=, nr_inodes= and mode=), and bwrap binds them. Descriptors do not help: bwrap
// 0.8.0 resolves --bind-fd's /proc/self/fd/N by path as the session's uid, so the mount
// points live where that uid may pass, and nowhere else:
//
//   <mount_dir>/               0711 root, a private mount (others may pass, not list;
//                              nothing propagates to other mount namespaces)
//   <mount_dir>/dev/           a 4 KiB tmpfs shared by every sandbox, bound read-only as
//                              /dev: copies of the host's null, zero, full, random,
//                              urandom and tty nodes, the fd/stdin/stdout/stderr links,
//                              ptmx -> pts/ptmx, and the mount points shm/ and pts/
//   <mount_dir>/<uid>/         0700, owned by the session uid (no other uid passes)
//     root/ work/ tmp/ shm/    tmpfs, root dirs owned by the session uid
//     pts/                     a devpts instance of the session's own (its ptys only)
//     image/                   a session from an image (BindImage): a read-only bind of
//                              the image's root, made from a descriptor the daemon opened.
//                              The images live under the daemon's 0700 state directory,
//                              which the session's uid cannot pass; bwrap reaches the image
//                              here instead (and gVisor's gofer, for one code path)
//
//   SANDGATE_RETURN_IF_ERROR(PrepareDeviceNodes("/run/sandgate-sandboxes"));
//   SessionMounts m = SessionMounts::Plan("/run/sandgate-sandboxes", uid);
//   SANDGATE_RETURN_IF_ERROR(m.Mount(sizes));   // before bwrap starts
//   ... bwrap --bind m.path("root") / ... ; wait for the sandbox to be ready
//   SANDGATE_RETURN_IF_ERROR(m.Unmount());      // the sandbox's binds keep them alive
//
// Once unmounted on the host, the file systems live exactly as long as the sandbox's mount
// namespace: nothing of a session stays on the host, also when the daemon is SIGKILLed.
//
// Thread safe (syscalls only); a SessionMounts is thread compatible. PrepareDeviceNodes is
// also safe against other processes preparing the same directory at the same time.
#ifndef SANDGATE_SANDBOX_LOCAL_TMPFS_LIMITS_H_
#define SANDGATE_SANDBOX_LOCAL_TMPFS_LIMITS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace sandgate::sandbox::local {

// The device nodes every sandbox's /dev holds, by name.
inline constexpr const char* kDeviceNodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

// Makes `<mount_dir>/dev` (mount_dir absolute; created with its parents if missing) the shared
// /dev described above, or completes one that already is (another daemon, a previous run).
// FAILED_PRECONDITION names the directory if a sandbox uid could not reach it (each ancestor
// must be searchable by others), since bwrap binds as the session's uid.
absl::Status PrepareDeviceNodes(const std::string& mount_dir);

// The caps of one session's file systems.
struct SessionMountSizes {
  uint64_t root_bytes = 0;  // the root: init copy, generated /etc files, mount points
  uint64_t root_inodes = 0;
  uint64_t workspace_bytes = 0;  // /work and /tmp, each
  uint64_t workspace_inodes = 0;
  uint64_t shm_bytes = 0;  // /dev/shm
  uint64_t shm_inodes = 0;
};

class SessionMounts {
 public:
  SessionMounts() = default;
  static SessionMounts Plan(const std::string& mount_dir, uid_t uid);

  // Mounts root, work, tmp, shm and pts under dir(), after unmounting whatever a lost
  // daemon left there (the uid is this session's now). On failure, what was mounted is
  // unmounted again.
  absl::Status Mount(const SessionMountSizes& sizes) const;
  // After Mount: binds the directory `root_fd` names (an image's root, opened by the caller
  // so that the bind is of the directory it checked) read-only, nosuid and nodev at
  // path("image"), a private mount. Unmount removes it with the rest.
  absl::Status BindImage(int root_fd) const;
  // Detaches every mount under dir() (never following a link) and removes the directories;
  // OK if there is nothing. Call once bwrap has bound them into the sandbox, and again when
  // it is gone (nothing to do then, unless the start failed before).
  absl::Status Unmount() const;

  const std::string& dir() const { return dir_; }
  // dir()/name: the bind source of one of the session's file systems.
  std::string path(const char* name) const;

 private:
  std::string dir_;
  uid_t uid_ = 0;
};

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_TMPFS_LIMITS_H_
