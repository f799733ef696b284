// BwrapProvider: the "local" sandbox provider, one bubblewrap sandbox per session.
//
// Each session is a bwrap process started from the provider's spawner thread as its own
// unprivileged host uid (uid_base + slot; uid 1000 inside), with an empty environment, in
// its own cgroups, running sandgate-init as PID 1. Commands are spawned by that init over a
// socket (init_protocol.h); files move through openat2 below a dirfd of the workspace
// (workspace_files.h). Design: docs/isolation.md (decision note, §1.3–§5, §7).
//
//   BwrapOptions opts;
//   opts.init_path = "/usr/libexec/sandgate/sandgate-init";
//   SANDGATE_ASSIGN_OR_RETURN(auto provider, BwrapProvider::Create(opts, journal));
//   for (const JournalEntry& e : *journal->List()) if (e.provider == "local") provider->Sweep(e);
//   SANDGATE_ASSIGN_OR_RETURN(auto session, provider->Create(spec, &cancel));
//
// Networking: disabled sessions have an empty network namespace (only lo). Restricted and
// enabled sessions get, in that same empty namespace, a listener at 127.0.0.1:proxy_port served
// by the provider's NetProxy (net_proxy.h; one epoll thread for all sessions), and every
// command gets the proxy variables; each decision goes to SessionSpec::on_network_decision.
// Nothing is created on the host for it (no veth, no iptables), so nothing to sweep.
//
// Requirements: the daemon runs as root (it creates cgroups, switches to the pool uids and
// reads /proc/<pid>/root); bwrap must be able to create user namespaces as those uids;
// SIGCHLD must not be ignored (sessions waitpid their bwrap). Recommended: the daemon is a
// child subreaper (PR_SET_CHILD_SUBREAPER) that reaps unknown children, so processes a Sweep
// kills are reaped at once; Close itself never leaves an orphan.
//
// Thread safe. Sessions share the provider's internals (spawner thread, uid pool), so a
// session may outlive the BwrapProvider object; the spawner thread, and with it every
// sandbox's parent-death signal, lives until the provider and all its sessions are gone.
#ifndef SANDGATE_SANDBOX_LOCAL_BWRAP_PROVIDER_H_
#define SANDGATE_SANDBOX_LOCAL_BWRAP_PROVIDER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/journal.h"
#include "sandbox/local/net_proxy.h"
#include "sandbox/sandbox.h"

#ifndef SANDGATE_DEFAULT_INIT_PATH
#define SANDGATE_DEFAULT_INIT_PATH "/usr/libexec/sandgate/sandgate-init"
#endif

namespace sandgate::sandbox {

struct BwrapOptions {
  std::string bwrap_path = "/usr/bin/bwrap";
  // sandgate-init on the host; must be readable and executable by the pool uids.
  std::string init_path = SANDGATE_DEFAULT_INIT_PATH;
  // Session i runs as host uid/gid uid_base + slot, slot < uid_pool_size; none may be used
  // by anything else on the host.
  uid_t uid_base = 100000;
  uint32_t uid_pool_size = 1000;
  // Session cgroups go to "<daemon's cgroup>/<cgroup_parent>/sandgate-<id>".
  std::string cgroup_parent = "sandgate";
  std::string hostname = "sandgate";
  // Where the provider mounts the sandboxes' own file systems: the shared /dev, and per
  // session its root, /work, /tmp, /dev/shm and devpts (tmpfs_limits.h). Each directory
  // above it must be searchable by others (bwrap binds them as the session's uid): not under
  // the daemon's 0700 runtime or state directory. Providers may share it.
  std::string mount_dir = "/run/sandgate-sandboxes";
  // RLIMIT_NOFILE (soft and hard) of every process of a sandbox, bwrap and its init
  // included: the host's file table is shared, so one sandbox must not be able to hold more
  // than its share of it (uid_pool_size sessions × max_processes × this, at worst).
  uint64_t max_open_files = 1024;
  // Longest wait for a new sandbox to report ready.
  absl::Duration start_timeout = absl::Seconds(10);
  // Time of the kill-and-wait loops (Close and Sweep: processes gone, cgroups removed) and
  // their give-up deadlines. Not owned. The start and command waits poll pipes and pidfds, so
  // they run on the kernel's clock.
  Clock* clock = Clock::Real();

  // Network proxy of restricted/enabled sessions (net_proxy.h). null = getaddrinfo.
  std::shared_ptr<local::Resolver> resolver;
  // Port of the proxy inside each session's network namespace (127.0.0.1).
  uint16_t proxy_port = 3128;
  // CIDRs ("198.51.100.0/24") the proxy's SSRF guard lets through. TESTS ONLY: a test's own
  // upstream lives in a documentation range, which the guard otherwise refuses. Leave empty
  // in the daemon. The host's own addresses stay refused regardless.
  std::vector<std::string> proxy_ssrf_exempt_cidrs;
  local::NetProxyOptions proxy_options;

  // gVisor sessions (SessionSpec::isolation, runsc_command.h). Without runsc at runsc_path
  // the provider still starts, and refuses gVisor sessions saying why.
  std::string runsc_path = "/usr/bin/runsc";
  // "ptrace" (works everywhere) or "kvm" (faster; used only when /dev/kvm exists, else
  // ptrace with a warning at start).
  std::string gvisor_platform = "ptrace";
  // The KVM device whose presence lets "kvm" be used (tests point it at a fake).
  std::string kvm_device = "/dev/kvm";
  // With "kvm": how long the start-up probe sandbox may take (gvisor_probe.h) before gVisor
  // sessions are refused on this host, saying so. Timed on `clock`.
  absl::Duration gvisor_probe_timeout = absl::Seconds(10);
  // sandgate-gvisor-bridge on the host; empty = beside init_path.
  std::string bridge_path;

  // BENCHMARKS ONLY: run sandboxes without the seccomp filter, to measure what it costs.
  bool disable_seccomp_for_benchmarks = false;
  // BENCHMARKS ONLY: run sandboxes under this BPF program instead of the provider's filter
  // (the earlier denylist, for a before/after); empty = the provider's filter.
  std::string seccomp_bpf_for_benchmarks;
};

class BwrapProvider : public Provider {
 public:
  // Checks the options and the host (bwrap and init present, cgroup layout), builds the
  // seccomp filter and starts the spawner thread. `journal` is not owned and must outlive
  // the provider and all its sessions.
  static absl::StatusOr<std::unique_ptr<BwrapProvider>> Create(const BwrapOptions& options,
                                                               ResourceJournal* journal);
  ~BwrapProvider() override;

  std::string name() const override { return "local"; }
  // FAILED_PRECONDITION for isolation gvisor on a host without runsc (or the bridge).
  absl::Status CheckSpec(const SessionSpec& spec) const override;
  // Restricted and enabled networking are served by the provider's NetProxy (one thread for
  // all sessions); INVALID_ARGUMENT for a malformed allowlist.
  absl::StatusOr<std::unique_ptr<Session>> Create(const SessionSpec& spec,
                                                  const CancelToken* cancel) override;
  // Kills every process running as the entry's uid, kills and removes its cgroups, unmounts
  // its file systems, removes a gVisor sandbox's runsc state and directory, then erases the
  // entry. Call before creating sessions: a leftover process
  // would share the uid with a new session.
  absl::Status Sweep(const JournalEntry& entry) override;
  // The live sessions whose root is the image root `root_dir` (SessionSpec::root_dir),
  // warm ones included: an image they use is not removed (core/images.h).
  std::vector<std::string> SessionsOnRoot(const std::string& root_dir) const;

  struct Core;  // shared with the sessions; defined in bwrap_session.h

 private:
  explicit BwrapProvider(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_LOCAL_BWRAP_PROVIDER_H_
