// The bubblewrap command line of a local sandbox, and the pipes that feed it its data
// (generated /etc files and the seccomp filter).
//
// Flags (isolation.md §1.3 and §7): every namespace unshared (network = an empty netns with
// only lo), nested user namespaces disabled, --die-with-parent, --new-session, no
// capabilities, seccomp, uid/gid 1000 inside, ro /usr with the usual top-level symlinks, a
// curated /etc, fresh /proc, a read-only /dev with a size-capped tmpfs /dev/shm and a devpts
// of its own, size-capped tmpfs /tmp and /work (every tmpfs and the devpts the daemon's own
// mounts, tmpfs_limits.h), and the init copied in from a descriptor the daemon opened (no
// host path of the clone or the state directory is ever bound, so the sandbox uid needs no
// access to any of them) and run as PID 1.
//
//   BwrapConfig config = ...;  // once per provider
//   SANDGATE_ASSIGN_OR_RETURN(BwrapInvocation inv,
//                             PrepareBwrap(config, mounts, {"/.sandgate/init", "3"}));
//   plan.argv = inv.argv;
//   plan.keep_fds = inv.keep_fds();
//
// Thread safe: pure functions over immutable inputs.
#ifndef SANDGATE_SANDBOX_LOCAL_BWRAP_COMMAND_H_
#define SANDGATE_SANDBOX_LOCAL_BWRAP_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "sandbox/local/tmpfs_limits.h"

namespace sandgate::sandbox::local {

// The part of the command line that is the same for every session of a provider.
struct BwrapConfig {
  std::string bwrap_path;
  // Host path; opened by the daemon for each sandbox and copied to
  // initproto::kInitPathInSandbox (mode 0555, read-only root) if not empty.
  std::string init_path;
  std::string hostname;
  // The shared /dev that PrepareDeviceNodes made (<mount_dir>/dev).
  std::string device_dir;
  std::string seccomp_bpf;  // empty = no filter (benchmarks only)
  // "--ro-bind"/"--ro-bind-try"/"--symlink" argument triples for /usr, /bin, /lib…, and the
  // curated /etc (HostBinds, or RootBinds of a session's image).
  std::vector<std::string> host_binds;
};

// Caps of every sandbox's /dev/shm, a tmpfs of its own (bwrap's --dev leaves it unsized and
// writable): POSIX semaphores and small shared segments fit; bulk data belongs in /work.
// Smaller workspaces get their own caps here too.
constexpr uint64_t kDevShmBytes = 64 << 20;
constexpr uint64_t kDevShmInodes = 1024;
// The bytes /dev/shm gets for a workspace cap (the smaller of the two).
uint64_t DevShmBytes(uint64_t workspace_bytes);
// Caps of the read-only root tmpfs (the init's copy, the generated /etc files, mount
// points), so that it does not show the tmpfs default of half the host's RAM to statfs.
constexpr uint64_t kRootTmpfsBytes = 16 << 20;
constexpr uint64_t kRootTmpfsInodes = 1024;

// Computes BwrapConfig::host_binds from this host's filesystem (lstat of a few paths): /usr,
// the top-level links or directories (/bin, /lib…) and the curated /etc files.
std::vector<std::string> HostBinds();
// The same triples for the root file system at `root` (an image, core/images.h): its /usr,
// its top-level links and directories, its curated /etc files, each bound read-only at the
// same place in the sandbox. RootBinds("") is HostBinds(). An entry that is a link is never
// bound (bwrap and gVisor's gofer would resolve it against the host's root: an image's
// absolute or "../.." link could name any host file): the sandbox gets the same link, which
// resolves inside it. An /etc that is a link gives no /etc entries at all. bwrap resolves
// every source path as the session's uid, so `root` must be where that uid may pass: a
// session's image is bound at SessionMounts::path("image") for this (tmpfs_limits.h).
std::vector<std::string> RootBinds(const std::string& root);

// One bwrap run: its argv, the data pipes it must inherit, and the read end of --info-fd.
struct BwrapInvocation {
  std::vector<std::string> argv;
  std::vector<UniqueFd> child_fds;  // inherited by bwrap; close in the parent after spawning
  UniqueFd info;                    // daemon's end of --info-fd
  std::vector<int> keep_fds() const;
};

// Builds the invocation running `command` inside the sandbox, on the session's file systems
// `mounts` (mounted already; they carry the caps of /, /work, /tmp and /dev/shm).
absl::StatusOr<BwrapInvocation> PrepareBwrap(const BwrapConfig& config, const SessionMounts& mounts,
                                             const std::vector<std::string>& command);

// Reads bwrap's --info-fd JSON and returns "child-pid": the host pid of the sandbox's PID 1.
// bwrap writes it right after cloning that child; waits at most 5 s, and fails at EOF.
absl::StatusOr<pid_t> ReadChildPid(int fd);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_BWRAP_COMMAND_H_
