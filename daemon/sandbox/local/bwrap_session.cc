#include "sandbox/local/bwrap_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "sandbox/local/fd_passing.h"
#include "sandbox/local/init_protocol.h"
#include "sandbox/local/pidfd.h"
#include "sandbox/local/tmpfs_limits.h"

namespace sandgate::sandbox {

absl::StatusOr<uid_t> BwrapProvider::Core::Reserve(const std::string& session_id) {
  absl::MutexLock l(&mu);
  if (live_ids.count(session_id) > 0) return errors::AlreadyExists("session", session_id);
  for (size_t i = 0; i < uid_used.size(); ++i) {
    if (uid_used[i]) continue;
    uid_used[i] = true;
    live_ids.insert(session_id);
    return options.uid_base + static_cast<uid_t>(i);
  }
  return errors::ResourceExhausted(
      absl::StrCat("all ", uid_used.size(), " sandbox uids are in use"));
}

void BwrapProvider::Core::Release(const std::string& session_id, uid_t uid) {
  absl::MutexLock l(&mu);
  live_ids.erase(session_id);
  live_roots.erase(session_id);
  size_t slot = uid - options.uid_base;
  if (uid >= options.uid_base && slot < uid_used.size()) uid_used[slot] = false;
}

namespace local {

absl::Status CheckRootDir(const std::string& root_dir) {
  if (root_dir.empty()) return absl::OkStatus();
  struct stat st;
  if (root_dir[0] != '/' || stat((root_dir + "/usr").c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return errors::FailedPrecondition(absl::StrCat("the image's root file system ", root_dir,
                                                   " has no /usr (was the image deleted?)"));
  }
  return absl::OkStatus();
}

namespace {

using initproto::MessageHeader;

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

bool ValidSessionId(absl::string_view id) {
  if (id.empty() || id.size() > 40) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
  });
}

absl::Status CheckNoNul(absl::string_view s, absl::string_view what) {
  if (s.find('\0') != absl::string_view::npos) {
    return errors::InvalidArgument(absl::StrCat(what, ": contains a NUL byte"));
  }
  return absl::OkStatus();
}

// The bridge's tunnel (bridge_protocol.h) carries bytes, not the terminal's descriptor.
absl::Status GvisorHasNoTerminals() {
  return errors::FailedPrecondition(
      "pty: a terminal is not available under isolation gvisor (its tunnel cannot carry the "
      "terminal); run the process without a terminal (stdin still works), or use a session "
      "with isolation namespaces");
}

// The kExec message: header, cwd, argv, env (see init_protocol.h).
absl::StatusOr<std::string> EncodeExec(const ExecRequest& req, const SessionSpec& spec,
                                       uint16_t proxy_port) {
  const std::map<std::string, std::string>& session_env = spec.env;
  if (req.argv.empty()) return errors::InvalidArgument("argv: must not be empty");
  if (req.pty && req.channel == nullptr) {
    return errors::InvalidArgument("pty: a terminal needs a channel to talk to it");
  }
  if (req.pty && (req.pty->rows == 0 || req.pty->cols == 0)) {
    return errors::InvalidArgument("pty: rows and cols must be at least 1");
  }
  if (req.pty && spec.isolation == Isolation::kGvisor) return GvisorHasNoTerminals();
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                            {"HOME", "/work"},
                                            {"LANG", "C.UTF-8"},
                                            {"PYTHONUNBUFFERED", "1"}};
  for (const auto& [k, v] : session_env) env[k] = v;
  for (const auto& [k, v] : req.env) env[k] = v;
  if (spec.network.mode != NetworkMode::kDisabled) {
    // Over both: the proxy is the only way out, so a command must always be told of it.
    const std::string proxy = absl::StrCat("http://127.0.0.1:", proxy_port);
    for (const char* name :
         {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}) {
      env[name] = proxy;
    }
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1";
  }
  SANDGATE_ASSIGN_OR_RETURN(std::vector<std::string> cwd, SplitWorkspacePath(req.cwd, true));
  MessageHeader h;
  h.type = initproto::kExec;
  h.argc = static_cast<uint32_t>(req.argv.size());
  h.envc = static_cast<uint32_t>(env.size());
  h.cpu_seconds = spec.cpu_seconds_per_process;
  if (req.pty) {
    h.flags = initproto::kExecPty;
    h.rows = req.pty->rows;
    h.cols = req.pty->cols;
  } else if (req.channel != nullptr) {
    h.flags = initproto::kExecStdinPipe;
  }
  std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
  absl::StrAppend(&msg, "/work", cwd.empty() ? "" : "/", absl::StrJoin(cwd, "/"),
                  absl::string_view("\0", 1));
  for (const std::string& a : req.argv) {
    SANDGATE_RETURN_IF_ERROR(CheckNoNul(a, "argv"));
    absl::StrAppend(&msg, a, absl::string_view("\0", 1));
  }
  for (const auto& [k, v] : env) {
    if (k.empty() || k.find('=') != std::string::npos) {
      return errors::InvalidArgument(absl::StrCat("env: invalid variable name \"", k, "\""));
    }
    SANDGATE_RETURN_IF_ERROR(CheckNoNul(k, "env"));
    SANDGATE_RETURN_IF_ERROR(CheckNoNul(v, absl::StrCat("env ", k)));
    absl::StrAppend(&msg, k, "=", v, absl::string_view("\0", 1));
  }
  if (msg.size() > initproto::kMaxExecMessage) {
    return errors::InvalidArgument(
        absl::StrCat("argv and env together exceed ", initproto::kMaxExecMessage, " bytes"));
  }
  return msg;
}

// Receives one message of a command socket, and the fd it carries, if any (kStarted of a
// command on a terminal). As recv.
ssize_t ReceiveWithFd(int sock, MessageHeader* h, UniqueFd* fd) {
  int fds[fdpass::kMaxFds];
  size_t count = 0;
  ssize_t n = fdpass::Receive(sock, h, sizeof(*h), fds, &count, MSG_DONTWAIT);
  for (size_t i = 0; i < count; ++i) {
    if (i == 0) {
      fd->reset(fds[i]);
    } else {
      close(fds[i]);  // more than the one expected: not kept
    }
  }
  return n;
}

// A connect to an exposed port that failed: nothing listens there (the usual case), or why.
absl::Status PortRefused(const std::string& where, int err) {
  if (err == ECONNREFUSED) {
    return errors::FailedPrecondition(absl::StrCat("nothing listens on ", where));
  }
  return errors::Unavailable(absl::StrCat("cannot connect to ", where, ": ", strerror(err)));
}

// One output pipe of a running command, with its byte cap.
struct OutputPipe {
  UniqueFd fd;
  OutputStream stream;
  uint64_t delivered = 0;
  bool truncated = false;

  // Reads what is there; returns false at EOF (for a terminal's master: EIO, once every
  // holder of its slave is gone).
  bool Read(uint64_t cap, const OutputCallback& on_output) {
    char buf[65536];
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;
    uint64_t keep = std::min<uint64_t>(static_cast<uint64_t>(n), cap - delivered);
    if (keep < static_cast<uint64_t>(n)) truncated = true;
    if (keep > 0 && on_output) on_output(stream, absl::string_view(buf, keep));
    delivered += keep;
    return true;
  }
};

}  // namespace

std::string BwrapSession::JournalId(absl::string_view session_id) {
  return absl::StrCat("local-session:", session_id);
}

BwrapSession::BwrapSession(std::shared_ptr<BwrapProvider::Core> core, const SessionSpec& spec,
                           uid_t uid)
    : core_(std::move(core)), spec_(spec), uid_(uid) {}

BwrapSession::~BwrapSession() {
  absl::Status s = Close();
  if (!s.ok())
    log::Warning("sandbox.close_failed", {{"session", spec_.id}, {"error", s.ToString()}});
}

absl::StatusOr<std::unique_ptr<BwrapSession>> BwrapSession::Start(
    std::shared_ptr<BwrapProvider::Core> core, const SessionSpec& spec, const CancelToken* cancel) {
  if (!ValidSessionId(spec.id)) {
    return errors::InvalidArgument("id: must be 1-40 characters of [a-z0-9-]");
  }
  ProxyPolicy proxy_policy;
  if (spec.network.mode != NetworkMode::kDisabled) {
    proxy_policy.mode = spec.network.mode;
    SANDGATE_ASSIGN_OR_RETURN(proxy_policy.allowed_domains,
                              NormaliseAllowlist(spec.network.allowed_domains));
    if (spec.network.allowed_ports.empty() || spec.network.max_connections == 0) {
      return errors::InvalidArgument(
          "network: allowed_ports must not be empty and max_connections must be > 0");
    }
    proxy_policy.allowed_ports = spec.network.allowed_ports;
    proxy_policy.max_connections = spec.network.max_connections;
    proxy_policy.max_bytes = spec.network.max_bytes;
    proxy_policy.ssrf_exempt = core->ssrf_exempt;
  }
  if (spec.workspace_bytes == 0) return errors::InvalidArgument("workspace_bytes: must be > 0");
  if (spec.isolation == Isolation::kGvisor) SANDGATE_RETURN_IF_ERROR(GvisorAvailable(*core));
  for (const auto& [k, v] : spec.env) {
    if (k.empty() || k.find('=') != std::string::npos) {
      return errors::InvalidArgument(absl::StrCat("env: invalid variable name \"", k, "\""));
    }
  }
  SessionCgroups cgroups = SessionCgroups::Plan(core->cgroups, spec.id, spec.cpu_millicores > 0);
  // Left by a daemon that was not swept, or by another process using the same parent: never
  // adopt it (Close would kill what runs there).
  for (const std::string& dir : cgroups.paths()) {
    if (access(dir.c_str(), F_OK) == 0) return errors::AlreadyExists("session cgroup", dir);
  }
  SANDGATE_RETURN_IF_ERROR(CheckRootDir(spec.root_dir));
  SANDGATE_ASSIGN_OR_RETURN(uid_t uid, core->Reserve(spec.id));
  if (!spec.root_dir.empty()) {
    absl::MutexLock l(&core->mu);
    core->live_roots[spec.id] = spec.root_dir;
  }
  std::unique_ptr<BwrapSession> s(new BwrapSession(std::move(core), spec, uid));
  s->cgroups_ = std::move(cgroups);
  s->proxy_policy_ = std::move(proxy_policy);

  JournalEntry entry;
  entry.id = JournalId(spec.id);
  entry.provider = "local";
  entry.kind = "session";
  entry.details = {{"session", spec.id},
                   {"uid", uid},
                   {"cgroups", s->cgroups_.paths()},
                   {"isolation", IsolationName(spec.isolation)}};
  entry.durable = false;  // nothing of a local sandbox outlives the host's memory
  absl::Status status = s->core_->journal->Record(entry);
  if (status.ok()) status = s->Launch(cancel);
  if (!status.ok()) {
    absl::Status cleanup = s->Close();
    if (!cleanup.ok()) {
      log::Error("sandbox.start_cleanup_failed",
                 {{"session", spec.id}, {"error", cleanup.ToString()}});
    }
    return status;
  }
  log::Info("sandbox.started", {{"session", spec.id},
                                {"uid", uid},
                                {"isolation", IsolationName(spec.isolation)},
                                {"runtime_pid", s->bwrap_pid_}});
  return s;
}

absl::Status BwrapSession::Launch(const CancelToken* cancel) {
  warnings_ = cgroups_.Create(
      spec_.memory_bytes,
      gvisor() ? static_cast<uint32_t>(GvisorHostTasks(spec_.max_processes)) : spec_.max_processes,
      spec_.cpu_millicores);
  const CgroupHost& host = core_->cgroups;
  if (host.memory_v1.empty() && !host.unified_memory) {
    warnings_.push_back(absl::StrCat("memory limit not enforced: ", host.memory_note));
  }
  if (host.pids_v1.empty() && !host.unified_pids) {
    warnings_.push_back(absl::StrCat("process limit not enforced: ", host.pids_note));
  }
  if (host.unified.empty() && host.freezer_v1.empty()) {
    warnings_.push_back(absl::StrCat(
        "session processes are not tracked by a cgroup (killed through the sandbox's PID "
        "namespace only): ",
        host.kill_note));
  }
  // tmpfs pages are charged to the writer's memory cgroup (isolation.md §2).
  if (2 * spec_.workspace_bytes + DevShmBytes(spec_.workspace_bytes) >= spec_.memory_bytes) {
    warnings_.push_back(absl::StrCat(
        "/work and /tmp (", spec_.workspace_bytes, " bytes each) and /dev/shm (",
        DevShmBytes(spec_.workspace_bytes), " bytes) can fill the memory limit (",
        spec_.memory_bytes, " bytes): a full workspace may end in an OOM kill, not ENOSPC"));
  }
  // Every tmpfs of the sandbox, with its caps, before the runtime (which binds them) starts.
  mounts_ = SessionMounts::Plan(core_->options.mount_dir, uid_);
  SessionMountSizes sizes;
  sizes.root_bytes = kRootTmpfsBytes;
  sizes.root_inodes = kRootTmpfsInodes;
  sizes.workspace_bytes = spec_.workspace_bytes;
  sizes.workspace_inodes = spec_.workspace_inodes;
  sizes.shm_bytes = DevShmBytes(spec_.workspace_bytes);
  sizes.shm_inodes = std::min<uint64_t>(kDevShmInodes, spec_.workspace_inodes);
  SANDGATE_RETURN_IF_ERROR(mounts_.Mount(sizes));
  if (!spec_.root_dir.empty()) {
    // The image's root, opened now and bound where the session's uid may pass (the images
    // live under the daemon's 0700 state directory): both runtimes bind it from there, and
    // the bind is of the directory checked now even if the image is deleted meanwhile.
    UniqueFd root(open(spec_.root_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root.valid()) {
      return errors::FromErrno(errno, absl::StrCat("open the image root ", spec_.root_dir));
    }
    SANDGATE_RETURN_IF_ERROR(mounts_.BindImage(root.get()));
  }
  return gvisor() ? LaunchGvisor(cancel) : LaunchBwrap(cancel);
}

absl::Status BwrapSession::WaitReady(int runtime_pidfd, const CancelToken* cancel,
                                     const std::function<absl::Status(absl::string_view)>& failed) {
  const absl::Time deadline = absl::Now() + core_->options.start_timeout;
  for (;;) {
    struct pollfd p[3] = {{control_.get(), POLLIN, 0},
                          {runtime_pidfd, POLLIN, 0},
                          {cancel != nullptr ? cancel->fd() : -1, POLLIN, 0}};
    int r = poll(p, 3, PollTimeoutMs(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errors::FromErrno(errno, "poll");
    if (r == 0) return errors::DeadlineExceeded("sandbox did not start in time");
    if (p[2].revents != 0) return errors::Cancelled("sandbox creation cancelled");
    if (p[0].revents & POLLIN) {
      MessageHeader h;
      if (recv(control_.get(), &h, sizeof(h), 0) == sizeof(h) && h.type == initproto::kReady) {
        return absl::OkStatus();
      }
    }
    if (p[0].revents != 0 || p[1].revents != 0) return failed("no ready message");
  }
}

absl::Status BwrapSession::LaunchBwrap(const CancelToken* cancel) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return errors::FromErrno(errno, "socketpair");
  }
  control_.reset(sv[0]);
  UniqueFd init_end(sv[1]);
  int sndbuf = 2 * static_cast<int>(initproto::kMaxExecMessage);
  if (setsockopt(control_.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) != 0) {
    setsockopt(control_.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  }
  // bwrap's stderr: read on failure to start. Non-blocking on both ends so a chatty writer
  // can never block the sandbox or the daemon.
  int ep[2];
  if (pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0) return errors::FromErrno(errno, "pipe");
  bwrap_stderr_.reset(ep[0]);
  UniqueFd stderr_w(ep[1]);

  BwrapConfig bwrap = core_->bwrap;
  if (!spec_.root_dir.empty()) bwrap.host_binds = RootBinds(mounts_.path("image"));
  SANDGATE_ASSIGN_OR_RETURN(
      BwrapInvocation inv,
      PrepareBwrap(bwrap, mounts_, {initproto::kInitPathInSandbox, absl::StrCat(init_end.get())}));
  SpawnPlan plan;
  plan.path = core_->options.bwrap_path;
  plan.argv = inv.argv;
  plan.keep_fds = inv.keep_fds();
  plan.keep_fds.push_back(init_end.get());
  plan.stderr_fd = stderr_w.get();
  plan.join_v1 = cgroups_.v1_dirs();
  plan.join_v2 = cgroups_.v2_dir();
  plan.uid = uid_;
  plan.gid = uid_;
  plan.max_open_files = core_->options.max_open_files;
  SANDGATE_ASSIGN_OR_RETURN(bwrap_pid_, core_->spawner.Spawn(plan));
  inv.child_fds.clear();
  init_end.reset();
  stderr_w.reset();
  bwrap_pidfd_.reset(PidfdOpen(bwrap_pid_));
  if (!bwrap_pidfd_.valid()) return errors::FromErrno(errno, "pidfd_open(bwrap)");
  auto start_failed = [&](absl::string_view what) -> absl::Status {
    WaitExit(bwrap_pidfd_, absl::Milliseconds(500));  // let bwrap finish its message
    return errors::Unavailable(
        absl::StrCat("sandbox failed to start (", what, "): ", DrainText(bwrap_stderr_.get())));
  };

  // bwrap reports the sandbox's PID 1 right after cloning it.
  absl::StatusOr<pid_t> child = ReadChildPid(inv.info.get());
  if (!child.ok()) return start_failed(child.status().message());
  init_pid_ = *child;
  init_pidfd_.reset(PidfdOpen(init_pid_));
  if (!init_pidfd_.valid()) return start_failed("pidfd_open(init)");

  // Ready means bwrap finished the mount setup and the init runs: /proc/<init>/root is the
  // sandbox root, and no untrusted code has run yet.
  SANDGATE_RETURN_IF_ERROR(WaitReady(bwrap_pidfd_.get(), cancel, start_failed));
  // bwrap has bound the file systems into the sandbox: off the host with them, so that they
  // live exactly as long as the sandbox (tmpfs_limits.h).
  SANDGATE_RETURN_IF_ERROR(mounts_.Unmount());
  const pid_t init_pid = init_pid_;
  SANDGATE_ASSIGN_OR_RETURN(
      UniqueFd root, WorkspaceFiles::OpenRoot(absl::StrCat("/proc/", init_pid, "/root/work")));
  // The path went through the init's pid; it was the init's only if the init is alive now.
  struct pollfd alive = {init_pidfd_.get(), POLLIN, 0};
  if (poll(&alive, 1, 0) != 0) return errors::Unavailable("sandbox init exited during start");
  {
    absl::MutexLock l(&mu_);
    files_ = std::make_shared<const WorkspaceFiles>(std::move(root), uid_, uid_);
  }
  // Protects the init from the OOM killer; needs CAP_SYS_RESOURCE, which the daemon may lack.
  // Commands reset their own score to 0, and a memory cgroup kills its largest task anyway.
  UniqueFd adj(
      open(absl::StrCat("/proc/", init_pid, "/oom_score_adj").c_str(), O_WRONLY | O_CLOEXEC));
  if (!adj.valid() || write(adj.get(), "-1000", 5) != 5) {
    log::Debug("sandbox.init_oom_adj_failed", {{"session", spec_.id}, {"errno", errno}});
  }
  if (spec_.network.mode != NetworkMode::kDisabled) {
    // The listener is bound before any command runs, so nothing inside can take the port.
    UniqueFd netns(open(absl::StrCat("/proc/", init_pid, "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns.valid()) return errors::FromErrno(errno, "open sandbox netns");
    if (poll(&alive, 1, 0) != 0) return errors::Unavailable("sandbox init exited during start");
    SANDGATE_ASSIGN_OR_RETURN(UniqueFd listener,
                              ListenInNetns(netns.get(), core_->options.proxy_port));
    SANDGATE_RETURN_IF_ERROR(core_->proxy->AddSession(spec_.id, std::move(listener), proxy_policy_,
                                                      spec_.on_network_decision));
    proxied_ = true;
  }
  // Last: once watched, an exit of the init is a death, told to OnEnded's callback.
  exit_watch_ = core_->exit_watcher->Watch(init_pidfd_.get(), [this] { OnExit(); });
  return absl::OkStatus();
}

bool BwrapSession::Exited() const {
  struct pollfd p[2] = {{init_pidfd_.get(), POLLIN, 0}, {bwrap_pidfd_.get(), POLLIN, 0}};
  return poll(p, 2, 0) > 0;
}

std::string BwrapSession::Death() const {
  {
    absl::MutexLock l(&mu_);
    if (!death_.empty()) return death_;
  }
  // bwrap follows its init at once, and says how the init ended: its exit status, or 128 + the
  // signal that killed it. bwrap itself killed takes the init with it (--die-with-parent).
  std::string how = "its init (PID 1) exited";
  siginfo_t info = {};
  if (bwrap_pidfd_.valid() && WaitExit(bwrap_pidfd_, absl::Seconds(1)) &&
      waitid(P_PIDFD, static_cast<id_t>(bwrap_pidfd_.get()), &info, WEXITED | WNOHANG | WNOWAIT) ==
          0 &&
      info.si_pid != 0) {
    auto signal = [](int sig) {
      const char* abbrev = sigabbrev_np(sig);
      return abbrev != nullptr ? absl::StrCat("signal ", sig, " (SIG", abbrev, ")")
                               : absl::StrCat("signal ", sig);
    };
    if (info.si_code != CLD_EXITED) {
      how = absl::StrCat(runtime_name(), " (the sandbox's parent process) was killed by ",
                         signal(info.si_status));
    } else if (info.si_status > 128) {
      how = absl::StrCat("its init (PID 1) was killed by ", signal(info.si_status - 128));
    } else {
      how = absl::StrCat("its init (PID 1) exited with status ", info.si_status);
    }
  }
  std::string death = absl::StrCat("its sandbox died: ", how);
  if (const uint64_t ooms = cgroups_.OomKillCount(); ooms > 0) {
    absl::StrAppend(&death, "; the session's memory limit (", spec_.memory_bytes,
                    " bytes) was reached: the OOM killer has killed ", ooms,
                    ooms == 1 ? " process" : " processes", " in it");
  }
  absl::MutexLock l(&mu_);
  if (death_.empty()) death_ = std::move(death);
  return death_;
}

absl::Status BwrapSession::DeadError() const {
  return errors::FailedPrecondition(absl::StrCat("session ", spec_.id, ": ", Death()));
}

SessionHealth BwrapSession::Health() const {
  SessionHealth h;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return h;
  }
  if (!Exited()) return h;
  h.expired = true;
  h.reason = Death();
  return h;
}

void BwrapSession::OnEnded(std::function<void()> ended) {
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    on_ended_ = ended;
  }
  if (ended && Exited()) ended();
}

void BwrapSession::OnExit() {
  std::function<void()> ended;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    ended = on_ended_;
  }
  log::Warning("sandbox.died", {{"session", spec_.id}, {"init_pid", init_pid_}});
  if (ended) ended();
}

absl::Status BwrapSession::TerminalsAvailable() const {
  return gvisor() ? GvisorHasNoTerminals() : absl::OkStatus();
}

absl::Status BwrapSession::SendExec(const std::string& message, int cmd_fd, int out_fd, int err_fd,
                                    int in_fd) {
  std::vector<int> fds = {cmd_fd, out_fd, err_fd};
  if (in_fd >= 0) fds.push_back(in_fd);
  return SendControl(message, fds);
}

absl::Status BwrapSession::SendControl(const std::string& message, const std::vector<int>& fds) {
  absl::MutexLock l(&send_mu_);
  const ssize_t n =
      fdpass::Send(control_.get(), message.data(), message.size(), fds.data(), fds.size());
  if (n < 0)
    return errors::Unavailable(absl::StrCat("sandbox ", spec_.id, " is gone: ", strerror(errno)));
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> BwrapSession::ConnectPort(uint16_t port, absl::Duration timeout) {
  {
    absl::MutexLock l(&mu_);
    if (closed_)
      return errors::FailedPrecondition(absl::StrCat("session ", spec_.id, " is closed"));
  }
  if (Exited()) return DeadError();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return errors::FromErrno(errno, "socketpair");
  }
  UniqueFd reply(sv[0]), reply_remote(sv[1]);
  MessageHeader m;
  m.type = initproto::kConnect;
  m.value = port;
  SANDGATE_RETURN_IF_ERROR(
      SendControl(std::string(reinterpret_cast<const char*>(&m), sizeof(m)), {reply_remote.get()}));
  reply_remote.reset();
  const absl::Time deadline = absl::Now() + timeout;
  const std::string where = absl::StrCat("127.0.0.1:", port, " in session ", spec_.id);
  UniqueFd conn;
  for (;;) {
    struct pollfd p = {reply.get(), POLLIN, 0};
    int r = poll(&p, 1, PollTimeoutMs(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errors::FromErrno(errno, "poll");
    if (r == 0)
      return errors::DeadlineExceeded(absl::StrCat("no connection to ", where, " in time"));
    MessageHeader h;
    ssize_t n = ReceiveWithFd(reply.get(), &h, &conn);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kConnected && conn.valid()) {
      break;
    }
    if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kFailed) {
      return PortRefused(where, h.value);
    }
    return errors::Unavailable(absl::StrCat("sandbox ", spec_.id, " did not answer the connect"));
  }
  // A namespaces sandbox hands over the TCP socket itself, its connect perhaps under way;
  // a gVisor one, the bridge's relay of a connection already made.
  int domain = 0;
  socklen_t len = sizeof(domain);
  if (getsockopt(conn.get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_INET) {
    struct pollfd p = {conn.get(), POLLOUT, 0};
    int r;
    do {
      r = poll(&p, 1, PollTimeoutMs(deadline));
    } while (r < 0 && errno == EINTR);
    if (r == 0)
      return errors::DeadlineExceeded(absl::StrCat("no connection to ", where, " in time"));
    int err = 0;
    len = sizeof(err);
    if (getsockopt(conn.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return PortRefused(where, err);
  }
  fcntl(conn.get(), F_SETFL, O_NONBLOCK);
  return conn;
}

absl::StatusOr<ExecResult> BwrapSession::Exec(const ExecRequest& request,
                                              const OutputCallback& on_output,
                                              const CancelToken* cancel) {
  // Whatever happens below, the caller's channel learns the command is over.
  auto detach = absl::MakeCleanup([&request] {
    if (request.channel != nullptr) request.channel->Detach();
  });
  SANDGATE_ASSIGN_OR_RETURN(std::string message,
                            EncodeExec(request, spec_, core_->options.proxy_port));
  {
    absl::MutexLock l(&mu_);
    if (closed_)
      return errors::FailedPrecondition(absl::StrCat("session ", spec_.id, " is closed"));
  }
  if (Exited()) return DeadError();
  int sv[2], po[2], pe[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return errors::FromErrno(errno, "socketpair");
  }
  UniqueFd cmd(sv[0]), cmd_remote(sv[1]);
  if (pipe2(po, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
  OutputPipe out{UniqueFd(po[0]), OutputStream::kStdout};
  UniqueFd out_w(po[1]);
  if (pipe2(pe, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
  OutputPipe err{UniqueFd(pe[0]), OutputStream::kStderr};
  UniqueFd err_w(pe[1]);
  fcntl(out.fd.get(), F_SETFL, O_NONBLOCK);
  fcntl(err.fd.get(), F_SETFL, O_NONBLOCK);
  UniqueFd in_r, in_w;
  if (request.channel != nullptr && !request.pty) {
    int pi[2];
    if (pipe2(pi, O_CLOEXEC) != 0) return errors::FromErrno(errno, "pipe");
    in_r.reset(pi[0]);
    in_w.reset(pi[1]);
  }
  // The channel signals through its own copy of the command socket, so that it never
  // writes to a number this function closed and something else reused.
  std::function<absl::Status(int)> signal_command;
  if (request.channel != nullptr) {
    auto sock = std::make_shared<UniqueFd>(fcntl(cmd.get(), F_DUPFD_CLOEXEC, 0));
    if (!sock->valid()) return errors::FromErrno(errno, "dup");
    signal_command = [sock](int signal) {
      MessageHeader m;
      m.type = initproto::kSignal;
      m.value = signal;
      if (send(sock->get(), &m, sizeof(m), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(m))) {
        return errors::FailedPrecondition("the process has ended");
      }
      return absl::OkStatus();
    };
  }
  std::optional<OutputPipe> tty;  // the terminal's master, once started (pty)

  const uint64_t oom_before = cgroups_.OomKillCount();
  const absl::Time start = absl::Now();
  absl::Status sent = SendExec(message, cmd_remote.get(), out_w.get(), err_w.get(), in_r.get());
  if (!sent.ok()) {
    {
      absl::MutexLock l(&mu_);
      if (closed_)
        return errors::FailedPrecondition(absl::StrCat("session ", spec_.id, " is closed"));
    }
    // The init hung up: it is exiting (its pidfd is readable right after).
    if (WaitExit(init_pidfd_, absl::Seconds(1))) return DeadError();
    return sent;
  }
  // Only the command may hold the write ends now, so EOF means it (and its heirs) are done.
  cmd_remote.reset();
  out_w.reset();
  err_w.reset();
  in_r.reset();
  if (in_w.valid()) request.channel->Attach(std::move(in_w), false, signal_command);

  ExecResult result;
  const absl::Time deadline = start + request.timeout;
  absl::Time drain_deadline = absl::InfiniteFuture();
  absl::Time kill_deadline = absl::InfiniteFuture();
  bool out_open = true, err_open = true, have_status = false, kill_sent = false;
  int status = 0;
  auto send_kill = [&](bool all) {
    MessageHeader k;
    k.type = all ? initproto::kKillAll : initproto::kKill;
    send(cmd.get(), &k, sizeof(k), MSG_NOSIGNAL);
    kill_sent = true;
    kill_deadline = absl::Now() + absl::Seconds(5);
  };
  for (;;) {
    if (have_status && !out_open && !err_open && !tty) break;
    const absl::Time now = absl::Now();
    if (have_status && now >= drain_deadline) break;
    if (!have_status && !kill_sent) {
      if (now >= deadline) {
        result.timed_out = true;
        send_kill(true);
      } else if (cancel != nullptr && cancel->cancelled()) {
        result.cancelled = true;
        send_kill(false);
      }
    }
    if (!have_status && now >= kill_deadline) {
      return errors::Internal(
          absl::StrCat("command in session ", spec_.id, " did not end after SIGKILL"));
    }
    struct pollfd p[5] = {{out_open ? out.fd.get() : -1, POLLIN, 0},
                          {err_open ? err.fd.get() : -1, POLLIN, 0},
                          {have_status ? -1 : cmd.get(), POLLIN, 0},
                          {cancel != nullptr && !kill_sent ? cancel->fd() : -1, POLLIN, 0},
                          {tty ? tty->fd.get() : -1, POLLIN, 0}};
    absl::Time wake = std::min({kill_sent ? kill_deadline : deadline, drain_deadline});
    int r = poll(p, 5, PollTimeoutMs(wake));
    if (r < 0 && errno != EINTR) return errors::FromErrno(errno, "poll");
    if (r <= 0) continue;
    if (p[0].revents != 0) out_open = out.Read(request.output_cap_bytes, on_output);
    if (p[1].revents != 0) err_open = err.Read(request.output_cap_bytes, on_output);
    if (p[4].revents != 0 && !tty->Read(request.output_cap_bytes, on_output)) {
      result.stdout_truncated = tty->truncated;
      tty.reset();
    }
    if (p[2].revents != 0) {
      MessageHeader h;
      UniqueFd master;
      ssize_t n = ReceiveWithFd(cmd.get(), &h, &master);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kStarted) {
        if (request.pty && master.valid()) {
          fcntl(master.get(), F_SETFL, O_NONBLOCK);
          UniqueFd input(fcntl(master.get(), F_DUPFD_CLOEXEC, 0));
          tty.emplace(OutputPipe{std::move(master), OutputStream::kStdout});
          request.channel->Attach(std::move(input), true, signal_command);
        }
        continue;
      }
      if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kExited) {
        have_status = true;
        status = h.value;
        // Background processes may keep the pipes open; do not wait for them for long.
        drain_deadline = absl::Now() + absl::Milliseconds(250);
        continue;
      }
      if (n == static_cast<ssize_t>(sizeof(h)) && h.type == initproto::kFailed) {
        return errors::FromErrno(h.value,
                                 absl::StrCat("sandbox init could not start ", request.argv[0]));
      }
      // EOF: the init is gone, so is the command.
      bool closed;
      {
        absl::MutexLock l(&mu_);
        closed = closed_;
      }
      if (!closed) {
        if (WaitExit(init_pidfd_, absl::Seconds(1))) return DeadError();
        return errors::Unavailable(absl::StrCat("sandbox ", spec_.id, " exited"));
      }
      result.cancelled = true;
      result.term_signal = SIGKILL;
      break;
    }
  }
  result.duration = absl::Now() - start;
  result.stdout_truncated = result.stdout_truncated || out.truncated || (tty && tty->truncated);
  result.stderr_truncated = err.truncated;
  if (have_status) {
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  }
  // Concurrent commands share the memory cgroup; an OOM kill is attributed to whichever
  // command died of SIGKILL meanwhile.
  result.cpu_time_exceeded = result.term_signal == SIGXCPU;
  if (result.term_signal == SIGSYS && !gvisor()) {
    // The filter kills only for a foreign architecture's call (seccomp_filter.h); the exec
    // result's description says so to the caller.
    log::Warning("sandbox.seccomp_kill", {{"session", spec_.id}, {"command", request.argv[0]}});
  }
  result.oom_killed = result.term_signal == SIGKILL && !result.timed_out && !result.cancelled &&
                      cgroups_.OomKillCount() > oom_before;
  return result;
}

absl::StatusOr<std::shared_ptr<const WorkspaceFiles>> BwrapSession::Files() const {
  absl::MutexLock l(&mu_);
  if (closed_ || files_ == nullptr) {
    return errors::FailedPrecondition(absl::StrCat("session ", spec_.id, " is closed"));
  }
  return files_;
}

absl::Status BwrapSession::WriteFile(absl::string_view path, absl::string_view data, int mode) {
  SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
  return files->WriteFile(path, data, mode);
}

absl::StatusOr<std::string> BwrapSession::ReadFile(absl::string_view path, uint64_t max_bytes) {
  SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
  return files->ReadFile(path, max_bytes);
}

absl::Status BwrapSession::ReadFileTo(absl::string_view path, uint64_t max_bytes,
                                      const FileSink& sink) {
  SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
  return files->ReadFileTo(path, max_bytes, sink);
}

absl::StatusOr<FileListing> BwrapSession::ListFiles(absl::string_view dir) {
  SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
  return files->ListFiles(dir);
}

absl::StatusOr<FileEntry> BwrapSession::StatFile(absl::string_view path) {
  SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
  return files->Stat(path);
}

absl::Status BwrapSession::RemoveFile(absl::string_view path, bool recursive) {
  SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
  return files->Remove(path, recursive);
}

absl::Status BwrapSession::RenameFile(absl::string_view from, absl::string_view to,
                                      bool overwrite) {
  SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
  return files->Rename(from, to, overwrite);
}

absl::Status BwrapSession::MakeDirectory(absl::string_view path, bool parents) {
  SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
  return files->MakeDirectory(path, parents);
}

absl::StatusOr<ResourceUsage> BwrapSession::Usage() const {
  {
    absl::MutexLock l(&mu_);
    if (closed_) return errors::FailedPrecondition(absl::StrCat("session ", id(), " is closed"));
  }
  return cgroups_.Usage();
}

std::vector<std::string> BwrapSession::Warnings() const { return warnings_; }

absl::Status BwrapSession::Close() {
  absl::MutexLock close_lock(&close_mu_);
  {
    absl::MutexLock l(&mu_);
    if (closed_) return close_status_;
    closed_ = true;
    files_.reset();  // the last file call in flight releases the workspace
    on_ended_ = nullptr;
  }
  // Before the kill below: that exit is no death. Waits for an OnExit in flight.
  core_->exit_watcher->Unwatch(exit_watch_);
  // Killing the init tears down the PID namespace: once the init has exited, every process
  // in it is gone. bwrap (the init's parent) then reaps it and exits by itself; killing bwrap
  // first would orphan the init's zombie to a reaper that may be slow.
  if (proxied_) core_->proxy->RemoveSession(spec_.id);
  if (control_.valid()) shutdown(control_.get(), SHUT_RDWR);
  StopGvisor();
  absl::Status status;
  if (init_pidfd_.valid()) {
    PidfdKill(init_pidfd_);
    if (!WaitExit(init_pidfd_, absl::Seconds(5))) {
      status.Update(errors::Internal(absl::StrCat("sandbox init ", init_pid_, " did not exit")));
    }
  }
  if (bwrap_pid_ > 0 && !bwrap_pidfd_.valid()) {
    kill(bwrap_pid_, SIGKILL);  // still our unreaped child, so the pid cannot be reused
    waitpid(bwrap_pid_, nullptr, 0);
  } else if (bwrap_pid_ > 0) {
    if (!init_pidfd_.valid() || !WaitExit(bwrap_pidfd_, absl::Seconds(1))) {
      PidfdKill(bwrap_pidfd_);
      WaitExit(bwrap_pidfd_, absl::Seconds(5));
    }
    // Reaped at once: a zombie would keep its pids charged to the session's cgroup.
    if (waitpid(bwrap_pid_, nullptr, WNOHANG) == 0) {
      status.Update(
          errors::Internal(absl::StrCat(runtime_name(), " ", bwrap_pid_, " did not exit")));
    }
  }
  status.Update(cgroups_.KillAndRemove(absl::Seconds(5), *core_->options.clock));
  // Left on the host only by a start that failed before the sandbox was ready.
  status.Update(mounts_.Unmount());
  if (status.ok()) status.Update(RemoveRunscDir(runsc_));
  if (status.ok()) {
    // With something left behind, the uid stays taken and the record stays for Sweep.
    core_->Release(spec_.id, uid_);
    status.Update(core_->journal->Erase(JournalId(spec_.id)));
  }
  log::Info("sandbox.closed", {{"session", spec_.id}, {"ok", status.ok()}});
  absl::MutexLock l(&mu_);
  close_status_ = status;
  return status;
}

}  // namespace local
}  // namespace sandgate::sandbox
