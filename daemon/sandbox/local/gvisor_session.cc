// The gVisor runtime of a local session: how its process tree starts and stops
// (bwrap_session.h says what is shared).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "sandbox/local/bridge_protocol.h"
#include "sandbox/local/bwrap_session.h"
#include "sandbox/local/init_protocol.h"
#include "sandbox/local/pidfd.h"

namespace sandgate::sandbox::local {
namespace {

// A listening Unix socket at `path` (non-blocking, close-on-exec, 0600 root): inside the
// sandbox only the bridge (root there) may connect; the commands' uid may not.
absl::StatusOr<UniqueFd> ListenUnix(const std::string& path) {
  struct sockaddr_un a = {};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) {
    return errors::InvalidArgument(absl::StrCat("socket path too long: ", path));
  }
  memcpy(a.sun_path, path.data(), path.size());
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errors::FromErrno(errno, "socket");
  if (bind(fd.get(), reinterpret_cast<struct sockaddr*>(&a), sizeof(a)) != 0) {
    return errors::FromErrno(errno, absl::StrCat("bind ", path));
  }
  if (chmod(path.c_str(), 0600) != 0 || listen(fd.get(), 128) != 0) {
    return errors::FromErrno(errno, absl::StrCat("listen ", path));
  }
  return fd;
}

}  // namespace

absl::Status GvisorAvailable(const BwrapProvider::Core& core) {
  if (core.gvisor_status.ok()) return absl::OkStatus();
  return errors::FailedPrecondition(absl::StrCat("isolation gvisor is not available on this host: ",
                                                 core.gvisor_status.message()));
}

absl::Status BwrapSession::LaunchGvisor(const CancelToken* cancel) {
  RunscConfig config = core_->runsc;
  if (!spec_.root_dir.empty()) config.host_binds = RootBinds(mounts_.path("image"));
  runsc_ = RunscSandbox::Plan(config, spec_.id);
  // Left by a daemon that was not swept: never adopt it.
  if (access(runsc_.dir.c_str(), F_OK) == 0) {
    const std::string dir = runsc_.dir;
    runsc_ = RunscSandbox();  // Close must not remove what is not ours
    return errors::AlreadyExists("gVisor sandbox directory", dir);
  }
  RunscBundleOptions bundle;
  bundle.uid = uid_;
  bundle.max_open_files = core_->options.max_open_files;
  bundle.max_processes = spec_.max_processes;
  if (spec_.network.mode != NetworkMode::kDisabled) bundle.proxy_port = core_->options.proxy_port;
  SANDGATE_RETURN_IF_ERROR(WriteRunscBundle(config, runsc_, mounts_, bundle));
  // Both sockets exist before any code runs in the sandbox. The control socket takes exactly
  // one connection, the bridge's, and is removed then: nothing else can ever reach it.
  SANDGATE_ASSIGN_OR_RETURN(UniqueFd control_listener,
                            ListenUnix(runsc_.socket(bridgeproto::kControlSocket)));
  UniqueFd proxy_listener;
  if (bundle.proxy_port != 0) {
    SANDGATE_ASSIGN_OR_RETURN(proxy_listener, ListenUnix(runsc_.socket(bridgeproto::kProxySocket)));
  }
  // Exposed ports' connections, relayed by the bridge from gVisor's loopback (the tunnel
  // accepts them); only the bridge, root in the sandbox, may connect.
  SANDGATE_ASSIGN_OR_RETURN(UniqueFd ports_listener,
                            ListenUnix(runsc_.socket(bridgeproto::kPortsSocket)));
  int ep[2];
  if (pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) return errors::FromErrno(errno, "pipe");
  bwrap_stderr_.reset(ep[0]);
  UniqueFd stderr_w(ep[1]);

  SpawnPlan plan;
  plan.path = config.runsc_path;
  plan.argv = RunscRunArgv(config, runsc_);
  plan.stderr_fd = stderr_w.get();
  // runsc, its gofer and its Sentry are born in the session's cgroups: the memory, process
  // and CPU limits hold for the whole sandbox, and cgroup.kill ends it.
  plan.join_v1 = cgroups_.v1_dirs();
  plan.join_v2 = cgroups_.v2_dir();
  SANDGATE_ASSIGN_OR_RETURN(bwrap_pid_, core_->spawner.Spawn(plan));
  stderr_w.reset();
  bwrap_pidfd_.reset(PidfdOpen(bwrap_pid_));
  if (!bwrap_pidfd_.valid()) return errors::FromErrno(errno, "pidfd_open(runsc)");
  // runsc ends when the sandbox's PID 1 does: it stands for the init.
  init_pid_ = bwrap_pid_;
  init_pidfd_.reset(PidfdOpen(init_pid_));
  if (!init_pidfd_.valid()) return errors::FromErrno(errno, "pidfd_open(runsc)");
  auto start_failed = [&](absl::string_view what) -> absl::Status {
    WaitExit(bwrap_pidfd_, absl::Milliseconds(500));  // let runsc finish its message
    return errors::Unavailable(absl::StrCat("gVisor sandbox failed to start (", what,
                                            "): ", DrainText(bwrap_stderr_.get())));
  };

  const absl::Time deadline = absl::Now() + core_->options.start_timeout;
  UniqueFd bridge;
  while (!bridge.valid()) {
    struct pollfd p[3] = {{control_listener.get(), POLLIN, 0},
                          {bwrap_pidfd_.get(), POLLIN, 0},
                          {cancel != nullptr ? cancel->fd() : -1, POLLIN, 0}};
    absl::Duration left = deadline - absl::Now();
    int r = poll(p, 3, static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(left))));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errors::FromErrno(errno, "poll");
    if (r == 0) return errors::DeadlineExceeded("gVisor sandbox did not start in time");
    if (p[2].revents != 0) return errors::Cancelled("sandbox creation cancelled");
    if (p[0].revents != 0) {
      bridge.reset(accept4(control_listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!bridge.valid() && errno != EAGAIN && errno != EINTR) {
        return errors::FromErrno(errno, "accept the bridge");
      }
    } else if (p[1].revents != 0) {
      return start_failed("runsc exited");
    }
  }
  control_listener.reset();
  if (unlink(runsc_.socket(bridgeproto::kControlSocket).c_str()) != 0) {
    return errors::FromErrno(errno, "remove the control socket");
  }
  SANDGATE_ASSIGN_OR_RETURN(tunnel_,
                            GvisorTunnel::Start(std::move(bridge), std::move(ports_listener)));
  control_ = tunnel_->TakeSessionEnd();
  int sndbuf = 2 * static_cast<int>(initproto::kMaxExecMessage);
  if (setsockopt(control_.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) != 0) {
    setsockopt(control_.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  }
  SANDGATE_RETURN_IF_ERROR(WaitReady(bwrap_pidfd_.get(), cancel, start_failed));
  // The gofer serves /work from the session's host tmpfs, so the daemon reaches the files
  // there, below the same dirfd rules as a namespaces sandbox's /proc/<init>/root/work.
  SANDGATE_ASSIGN_OR_RETURN(UniqueFd root, WorkspaceFiles::OpenRoot(mounts_.path("work")));
  {
    absl::MutexLock l(&mu_);
    files_ = std::make_shared<const WorkspaceFiles>(std::move(root), uid_, uid_);
  }
  if (proxy_listener.valid()) {
    SANDGATE_RETURN_IF_ERROR(core_->proxy->AddSession(spec_.id, std::move(proxy_listener),
                                                      proxy_policy_, spec_.on_network_decision));
    proxied_ = true;
  }
  exit_watch_ = core_->exit_watcher->Watch(init_pidfd_.get(), [this] { OnExit(); });
  return absl::OkStatus();
}

std::string BwrapSession::host_workspace_path() const {
  return gvisor() ? mounts_.path("work") : absl::StrCat("/proc/", init_pid_, "/root/work");
}

void BwrapSession::StopGvisor() {
  if (!gvisor()) return;
  // Joining the tunnel closes the bridge's connection: the bridge kills everything in the
  // sandbox and exits, and runsc with it.
  tunnel_.reset();
  if (init_pidfd_.valid() && !WaitExit(init_pidfd_, absl::Seconds(1))) {
    log::Warning("sandbox.gvisor_stop_slow", {{"session", spec_.id}});
  }
}

}  // namespace sandgate::sandbox::local
