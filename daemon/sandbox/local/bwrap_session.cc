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

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
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
  // lstat: an image's /usr that is a link would be looked up on the host (bwrap_command.h).
  if (root_dir[0] != '/' || lstat((root_dir + "/usr").c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return errors::FailedPrecondition(absl::StrCat("the image's root file system ", root_dir,
                                                   " has no /usr (was the image deleted?)"));
  }
  return absl::OkStatus();
}

namespace {

using initproto::MessageHeader;

bool ValidSessionId(absl::string_view id) {
  if (id.empty() || id.size() > 40) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
  });
}

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
