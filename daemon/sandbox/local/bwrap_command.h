// The bubblewrap command line of a local sandbox, and the pipes that feed it its data
// (generated /etc files and the seccomp filter).
//
// Flags (isolation.md §1.3 and §7): every namespace unshared (network = an empty netns with
// only lo), nested user namespaces disabled, --die-with-parent, --new-session, no
// capabilities, seccomp, uid/gid 1000 inside, ro /usr with the usual top-level symlinks, a
// curated /etc, fresh /proc and /dev, size-capped tmpfs /tmp and /work, and the init
// bind-mounted read-only and run as PID 1.
//
//   BwrapConfig config = ...;  // once per provider
//   SANDGATE_ASSIGN_OR_RETURN(BwrapInvocation inv,
//                             PrepareBwrap(config, 256 << 20, {"/.sandgate/init", "3"}));
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

namespace sandgate::sandbox::local {

// The part of the command line that is the same for every session of a provider.
struct BwrapConfig {
  std::string bwrap_path;
  std::string init_path;  // host path; bound at initproto::kInitPathInSandbox if not empty
  std::string hostname;
  std::string seccomp_bpf;  // empty = no filter (benchmarks only)
  // "--ro-bind-try"/"--symlink" argument triples for /bin, /lib…, and the curated /etc.
  std::vector<std::string> host_binds;
};

// Computes BwrapConfig::host_binds from this host's filesystem (lstat of a few paths).
std::vector<std::string> HostBinds();

// One bwrap run: its argv, the data pipes it must inherit, and the read end of --info-fd.
struct BwrapInvocation {
  std::vector<std::string> argv;
  std::vector<UniqueFd> child_fds;  // inherited by bwrap; close in the parent after spawning
  UniqueFd info;                    // daemon's end of --info-fd
  std::vector<int> keep_fds() const;
};

// Builds the invocation running `command` inside the sandbox. `workspace_bytes` caps /work
// and /tmp.
absl::StatusOr<BwrapInvocation> PrepareBwrap(const BwrapConfig& config, uint64_t workspace_bytes,
                                             const std::vector<std::string>& command);

// Reads bwrap's --info-fd JSON and returns "child-pid": the host pid of the sandbox's PID 1.
// bwrap writes it right after cloning that child; waits at most 5 s, and fails at EOF.
absl::StatusOr<pid_t> ReadChildPid(int fd);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_BWRAP_COMMAND_H_
