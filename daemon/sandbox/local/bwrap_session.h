// BwrapSession: one live local sandbox (see bwrap_provider.h), and the provider internals
// the sessions share.
//
// Two runtimes, one session: everything a caller sees (Exec, files, network proxy, limits,
// journal, death) is the same code; only how the sandbox's process tree starts and stops
// differs. `namespaces` starts bwrap with sandgate-init as PID 1 (Launch). `gvisor` starts
// `runsc run` with sandgate-gvisor-bridge as PID 1, which starts sandgate-init and tunnels
// its protocol over one host socket (LaunchGvisor, gvisor_session.cc; GvisorTunnel): the
// rest of the session talks to the tunnel exactly as to a namespaces sandbox's init (Exec and
// ConnectPort, session_commands.cc). Under gVisor the workspace is the session's host tmpfs
// bound in by the gofer, and "the init's pid" is runsc's (its exit is the sandbox's end).
//
// Thread safe, as Session requires: Exec runs concurrently with Exec, file calls and Close;
// Close is idempotent and makes running Execs end cancelled.
//
// A sandbox that dies on its own (its init or bwrap killed: by the OOM killer, by a signal
// from the host) is a dead session, not a broken pipe: the provider's exit watcher tells
// OnEnded's callback at once, Health() says expired and why (how bwrap ended, and the OOM
// kills of the session's memory cgroup), and Exec answers FAILED_PRECONDITION saying so.
#ifndef SANDGATE_SANDBOX_LOCAL_BWRAP_SESSION_H_
#define SANDGATE_SANDBOX_LOCAL_BWRAP_SESSION_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/journal.h"
#include "common/unique_fd.h"
#include "sandbox/local/bwrap_command.h"
#include "sandbox/local/bwrap_provider.h"
#include "sandbox/local/cgroups.h"
#include "sandbox/local/exit_watcher.h"
#include "sandbox/local/gvisor_tunnel.h"
#include "sandbox/local/net_proxy.h"
#include "sandbox/local/runsc_command.h"
#include "sandbox/local/spawner.h"
#include "sandbox/local/tmpfs_limits.h"
#include "sandbox/local/workspace_files.h"
#include "sandbox/sandbox.h"

namespace sandgate::sandbox {

// Constant after construction except the uid pool.
struct BwrapProvider::Core {
  BwrapOptions options;
  ResourceJournal* journal = nullptr;  // not owned
  local::CgroupHost cgroups;
  local::BwrapConfig bwrap;
  local::RunscConfig runsc;
  // Why gVisor sessions cannot start here (runsc or the bridge missing); OK when they can.
  absl::Status gvisor_status;
  local::Spawner spawner;
  std::unique_ptr<local::NetProxy> proxy;
  // Tells each session the moment its init or bwrap exits (BwrapSession::OnEnded).
  std::unique_ptr<local::ExitWatcher> exit_watcher;
  std::vector<local::Cidr> ssrf_exempt;

  // Claims `session_id` and a free uid from the pool: ALREADY_EXISTS when a live session has
  // the id, RESOURCE_EXHAUSTED when all uids are in use.
  absl::StatusOr<uid_t> Reserve(const std::string& session_id);
  void Release(const std::string& session_id, uid_t uid);

  absl::Mutex mu;
  std::vector<bool> uid_used ABSL_GUARDED_BY(mu);
  std::set<std::string> live_ids ABSL_GUARDED_BY(mu);
  // Live sessions on an image (SessionSpec::root_dir): id -> root_dir.
  std::map<std::string, std::string> live_roots ABSL_GUARDED_BY(mu);
};

namespace local {

// OK for "" (the host's root) and an image root with a /usr directory; else
// FAILED_PRECONDITION saying so.
absl::Status CheckRootDir(const std::string& root_dir);

// OK when gVisor sessions can start here; else FAILED_PRECONDITION saying why.
absl::Status GvisorAvailable(const BwrapProvider::Core& core);

class BwrapSession : public Session {
 public:
  // Journals, creates the cgroups, starts the sandbox and waits for its init. On failure
  // everything created so far is removed again.
  static absl::StatusOr<std::unique_ptr<BwrapSession>> Start(
      std::shared_ptr<BwrapProvider::Core> core, const SessionSpec& spec,
      const CancelToken* cancel);
  ~BwrapSession() override;

  const std::string& id() const override { return spec_.id; }
  std::string workdir() const override { return "/work"; }
  absl::StatusOr<ExecResult> Exec(const ExecRequest& request, const OutputCallback& on_output,
                                  const CancelToken* cancel) override;
  bool talks_to_commands() const override { return true; }
  bool reaches_ports() const override { return true; }
  absl::StatusOr<UniqueFd> ConnectPort(uint16_t port, absl::Duration timeout) override;
  // Not under gVisor: the bridge's tunnel carries bytes, not the terminal's descriptor.
  absl::Status TerminalsAvailable() const override;
  absl::Status WriteFile(absl::string_view path, absl::string_view data, int mode) override;
  absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max_bytes) override;
  absl::Status ReadFileTo(absl::string_view path, uint64_t max_bytes,
                          const FileSink& sink) override;
  absl::StatusOr<FileListing> ListFiles(absl::string_view dir) override;
  absl::StatusOr<FileEntry> StatFile(absl::string_view path) override;
  absl::Status RemoveFile(absl::string_view path, bool recursive) override;
  absl::Status RenameFile(absl::string_view from, absl::string_view to, bool overwrite) override;
  absl::Status MakeDirectory(absl::string_view path, bool parents) override;
  absl::StatusOr<ResourceUsage> Usage() const override;
  std::vector<std::string> Warnings() const override;
  // Expired once the init or bwrap has exited without Close, with the reason (Death()); the
  // first answer after a death may wait up to a second for bwrap to say how its init ended.
  SessionHealth Health() const override;
  void OnEnded(std::function<void()> ended) override;
  absl::Status Close() override;

  // The session's host uid (also its gid).
  uid_t host_uid() const { return uid_; }
  // Host pid of the sandbox's PID 1 (sandgate-init; under gVisor, `runsc run`); -1 before it
  // started.
  pid_t init_pid() const { return init_pid_; }
  // Where the host sees the workspace: /proc/<init>/root/work, or under gVisor the session's
  // tmpfs that the gofer serves.
  std::string host_workspace_path() const;
  // The journal id of a session: "local-session:<id>".
  static std::string JournalId(absl::string_view session_id);

 private:
  BwrapSession(std::shared_ptr<BwrapProvider::Core> core, const SessionSpec& spec, uid_t uid);
  absl::Status Launch(const CancelToken* cancel);
  // The runtime-specific halves of Launch (the cgroups and mounts exist already).
  absl::Status LaunchBwrap(const CancelToken* cancel);
  absl::Status LaunchGvisor(const CancelToken* cancel);  // gvisor_session.cc
  // Waits for the init's kReady on control_, or the runtime's exit (`runtime_pidfd`), the
  // cancel token or start_timeout; `failed` words the error from what went wrong.
  absl::Status WaitReady(int runtime_pidfd, const CancelToken* cancel,
                         const std::function<absl::Status(absl::string_view)>& failed);
  // gVisor: lets the sandbox end by itself (the tunnel closes the bridge's connection), for
  // up to a second, before Close kills what is left. No-op for namespaces.
  void StopGvisor();
  bool gvisor() const { return spec_.isolation == Isolation::kGvisor; }
  // "bwrap" or "runsc": the sandbox's parent process on the host.
  const char* runtime_name() const { return gvisor() ? "runsc" : "bwrap"; }
  absl::StatusOr<std::shared_ptr<const WorkspaceFiles>> Files() const;
  // `in_fd`: the command's stdin, or -1 (/dev/null).
  absl::Status SendExec(const std::string& message, int cmd_fd, int out_fd, int err_fd, int in_fd);
  // One message on the control socket with `fds` attached (SCM_RIGHTS).
  absl::Status SendControl(const std::string& message, const std::vector<int>& fds);
  // Whether the init or bwrap has exited (a poll of their pidfds, no wait).
  bool Exited() const;
  // Why the sandbox died, worked out once (it waits up to a second for bwrap to follow its
  // init): "its sandbox died: …". Call only once Exited().
  std::string Death() const;
  // FAILED_PRECONDITION naming the death, for a call the dead sandbox cannot serve.
  absl::Status DeadError() const;
  // From the exit watcher's thread.
  void OnExit();

  // Constant after Start.
  const std::shared_ptr<BwrapProvider::Core> core_;
  const SessionSpec spec_;
  const uid_t uid_;
  SessionCgroups cgroups_;
  SessionMounts mounts_;  // planned in Launch; unmounted by Close
  pid_t bwrap_pid_ = -1;
  pid_t init_pid_ = -1;
  UniqueFd bwrap_pidfd_;
  UniqueFd init_pidfd_;
  UniqueFd control_;  // SOCK_SEQPACKET to the init; shut down (not closed) by Close
  UniqueFd bwrap_stderr_;
  local::RunscSandbox runsc_;                    // gVisor only
  std::unique_ptr<local::GvisorTunnel> tunnel_;  // gVisor only
  std::vector<std::string> warnings_;
  local::ProxyPolicy proxy_policy_;  // normalised; used when the network is not disabled
  bool proxied_ = false;             // the proxy serves this session (RemoveSession on Close)
  uint64_t exit_watch_ = 0;          // the init's pidfd in the exit watcher (0: not watched)

  absl::Mutex send_mu_;   // one sendmsg on control_ at a time
  absl::Mutex close_mu_;  // held for the whole of Close, so a second Close waits for the first
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status close_status_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const WorkspaceFiles> files_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_ended_ ABSL_GUARDED_BY(mu_);
  mutable std::string death_ ABSL_GUARDED_BY(mu_);  // Death(), once known
};

}  // namespace local
}  // namespace sandgate::sandbox

#endif  // SANDGATE_SANDBOX_LOCAL_BWRAP_SESSION_H_
