// The runsc (gVisor) invocation of one gVisor sandbox: its OCI bundle and argv, and the
// removal of what a lost one left on the host.
//
// Each session has its own directory <gvisor_dir>/sandgate-<id>/ (0700, root):
//   config.json   the OCI spec (process: the bridge as root inside gVisor with only
//                 CAP_SETUID/SETGID/KILL/SETPCAP, commands dropped to the session's uid; root: the
//                 session's root tmpfs, read-only; the host's /usr, /bin… and curated /etc
//                 files bound read-only; /work and /tmp bound from the session's own
//                 size-capped tmpfs mounts, which the daemon reads and writes directly)
//   state/        runsc --root: the container's state files
//   sock/         bound read-only at /.sandgate/sock, 0700 root: the control socket
//                 (accepted once, then removed) and the proxy socket (restricted/enabled
//                 networks); only the bridge (root in gVisor) can reach them
// runsc runs with --network=none (gVisor's own loopback only) and --host-uds=open (the
// sandbox may connect to host sockets bound into it: only those in sock/), and
// --ignore-cgroups: the daemon starts runsc inside the session's cgroups, so the Sentry, the
// gofer and runsc itself are limited and killed like a namespaces sandbox's processes.
//
// Thread safe (no shared state).
#ifndef SANDGATE_SANDBOX_LOCAL_RUNSC_COMMAND_H_
#define SANDGATE_SANDBOX_LOCAL_RUNSC_COMMAND_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sandbox/local/tmpfs_limits.h"

namespace sandgate::sandbox::local {

struct RunscConfig {
  std::string runsc_path = "/usr/bin/runsc";
  std::string platform = "ptrace";  // "ptrace" or "kvm"
  // Parent of the per-session directories (0700, root).
  std::string gvisor_dir;
  // Host paths, bound read-only into every sandbox.
  std::string init_path;
  std::string bridge_path;
  std::string hostname;
  // HostBinds() or RootBinds(image) (bwrap_command.h): "--ro-bind"/"--ro-bind-try"/
  // "--symlink" triples, /usr first.
  std::vector<std::string> host_binds;
};

// The platform runsc is given for `wanted`: "kvm" only where `kvm_device` opens for reading
// and writing (a host with KVM), else "ptrace", which works everywhere with the same
// isolation, slower; any other value is returned as is, for the caller to refuse.
std::string GvisorPlatform(const std::string& wanted, const std::string& kvm_device);

// The session's names and paths.
struct RunscSandbox {
  static RunscSandbox Plan(const RunscConfig& config, const std::string& session_id);
  std::string container_id;  // "sandgate-<session id>"
  std::string dir;           // <gvisor_dir>/<container_id>
  std::string state_dir() const { return dir + "/state"; }
  std::string socket_dir() const { return dir + "/sock"; }
  std::string socket(const char* name) const { return socket_dir() + "/" + name; }
};

struct RunscBundleOptions {
  uid_t uid = 0;            // the session's host uid: the commands run as it
  uint16_t proxy_port = 0;  // 0 = no proxy relay (disabled network)
  uint64_t max_open_files = 1024;
  // RLIMIT_NPROC of the commands' uid, counted by gVisor's kernel: the session's process
  // limit. The host's pids cgroup cannot count them (about 135 host threads serve an idle
  // sandbox, and a few more each process), so it only backstops (GvisorHostTasks).
  uint64_t max_processes = 256;
};

// pids.max of a gVisor session's host cgroup: room for runsc, the gofer and the Sentry's
// threads around `max_processes` sandbox processes, so that a runaway Sentry still stops.
// On ptrace, every sandbox thread has host threads of its own (a stub, and a Sentry thread
// that traces it): a fork bomb at RLIMIT_NPROC 64 needed more than 768.
inline uint64_t GvisorHostTasks(uint64_t max_processes) { return 512 + 32 * max_processes; }

// Creates the session's directory and config.json, and fills the session's root tmpfs
// (mounts.path("root")) with the mount points and the generated /etc files.
absl::Status WriteRunscBundle(const RunscConfig& config, const RunscSandbox& sandbox,
                              const SessionMounts& mounts, const RunscBundleOptions& options);

// argv of `runsc … run` for the sandbox (argv[0] = runsc_path).
std::vector<std::string> RunscRunArgv(const RunscConfig& config, const RunscSandbox& sandbox);
// argv of `runsc … delete -force` for the sandbox.
std::vector<std::string> RunscDeleteArgv(const RunscConfig& config, const RunscSandbox& sandbox);

// Removes the session's directory (state files, sockets, bundle); OK if absent. Call once
// every process of the sandbox is gone.
absl::Status RemoveRunscDir(const RunscSandbox& sandbox);

// The container ids of the per-session directories under gvisor_dir ("sandgate-…").
std::vector<std::string> ListRunscDirs(const RunscConfig& config);

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_RUNSC_COMMAND_H_
