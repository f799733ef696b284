// Inode limits on a sandbox's tmpfs mounts, set by the daemon from outside the sandbox.
//
// bwrap's --size has no nr_inodes counterpart, so the daemon reconfigures the superblock
// itself with the new mount API: fspick() on the mount root (reached through the init's
// /proc/<pid>/root; no need to enter the sandbox's mount namespace), then fsconfig()
// "nr_inodes" and FSCONFIG_CMD_RECONFIGURE. Needs CAP_SYS_ADMIN over the sandbox's user
// namespace, which root in the initial namespace has.
//
// Thread safe (syscalls only).
#ifndef SANDGATE_SANDBOX_LOCAL_TMPFS_LIMITS_H_
#define SANDGATE_SANDBOX_LOCAL_TMPFS_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace sandgate::sandbox::local {

// Sets nr_inodes of the tmpfs whose root is `dirfd` (any fd of the mount root, O_PATH is
// fine). Fails if it is not a mount root or more inodes are already in use.
absl::Status SetTmpfsInodeLimit(int dirfd, uint64_t inodes);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_TMPFS_LIMITS_H_
