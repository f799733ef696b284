#include "tests/fakes/host_sandbox.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "sandbox/local/workspace_files.h"

namespace sandgate::testing {
namespace {

class HostSession : public sandbox::Session {
 public:
  HostSession(HostProvider* provider, std::string id, std::string dir,
              std::map<std::string, std::string> env)
      : provider_(provider), id_(std::move(id)), dir_(std::move(dir)), env_(std::move(env)) {}
  ~HostSession() override { (void)Close(); }

  const std::string& id() const override { return id_; }
  std::string workdir() const override { return dir_; }

  absl::StatusOr<sandbox::ExecResult> Exec(const sandbox::ExecRequest& req,
                                           const sandbox::OutputCallback& on_output,
                                           const CancelToken* cancel) override {
    auto detach = absl::MakeCleanup([&req] {
      if (req.channel != nullptr) req.channel->Detach();
    });
    if (req.pty) return absl::UnimplementedError("pty: the host fake has no terminals");
    int out[2], err[2], in[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
        (req.channel != nullptr && pipe2(in, O_CLOEXEC) != 0)) {
      return errors::FromErrno(errno, "pipe");
    }
    std::vector<std::string> envs;
    std::map<std::string, std::string> merged = env_;
    for (const auto& [k, v] : req.env) merged[k] = v;
    merged.emplace("PATH", "/usr/local/bin:/usr/bin:/bin");
    for (const auto& [k, v] : merged) envs.push_back(k + "=" + v);
    absl::Time start = absl::Now();
    const int injected = provider_->TakeForkFailure();
    pid_t pid = injected != 0 ? -1 : fork();
    if (pid < 0) {
      // No child: below, kill(-pid) would signal init and waitpid(pid) would wait for any
      // child at all (the fake OpenAI server: forever).
      const int fork_errno = injected != 0 ? injected : errno;
      for (int fd : {out[0], out[1], err[0], err[1], in[0], in[1]}) {
        if (fd >= 0) close(fd);
      }
      return errors::FromErrno(fork_errno, "fork");
    }
    if (pid == 0) {
      setpgid(0, 0);
      if (in[0] >= 0) {
        dup2(in[0], 0);
      } else {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
      }
      dup2(out[1], 1);
      dup2(err[1], 2);
      std::string cwd = req.cwd.empty() ? dir_ : dir_ + "/" + req.cwd;
      if (chdir(cwd.c_str()) != 0) _exit(126);
      std::vector<char*> argv, envp;
      for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      for (const auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
      envp.push_back(nullptr);
      execvpe(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    // Both sides set the group, so a kill(-pid) right after fork cannot miss the child.
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    if (req.channel != nullptr) {
      close(in[0]);
      // The group outlives the wait below only as a zombie leader, so its id is not reused
      // while the channel may still signal it (Detach comes first).
      req.channel->Attach(UniqueFd(in[1]), false, [pid](int signal) {
        if (kill(-pid, signal) != 0) return errors::FromErrno(errno, "kill");
        return absl::OkStatus();
      });
    }
    sandbox::ExecResult result;
    uint64_t sent[2] = {0, 0};
    struct pollfd fds[3] = {
        {out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {cancel ? cancel->fd() : -1, POLLIN, 0}};
    int open_fds = 2;
    absl::Time deadline = start + req.timeout;
    while (open_fds > 0) {
      int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (ms <= 0 && !result.timed_out) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        continue;
      }
      poll(fds, 3, static_cast<int>(std::clamp<int64_t>(ms, 0, 100)));
      if (fds[2].revents & POLLIN) {
        result.cancelled = true;
        kill(-pid, SIGKILL);
        fds[2].fd = -1;
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
        char buf[65536];
        ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
          continue;
        }
        uint64_t room = req.output_cap_bytes - std::min(req.output_cap_bytes, sent[i]);
        uint64_t take = std::min<uint64_t>(room, n);
        if (take < static_cast<uint64_t>(n))
          (i == 0 ? result.stdout_truncated : result.stderr_truncated) = true;
        if (take > 0) {
          on_output(i == 0 ? sandbox::OutputStream::kStdout : sandbox::OutputStream::kStderr,
                    absl::string_view(buf, take));
        }
        sent[i] += take;
      }
    }
    int status = 0;
    if (req.channel != nullptr) req.channel->Detach();
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
      result.term_signal = WTERMSIG(status);
    } else {
      result.exit_code = WEXITSTATUS(status);
    }
    result.duration = absl::Now() - start;
    return result;
  }

  bool talks_to_commands() const override { return true; }

  // No sandbox, no network of its own: a port is the host's loopback port (tests listen there).
  bool reaches_ports() const override { return true; }
  absl::StatusOr<UniqueFd> ConnectPort(uint16_t port, absl::Duration) override {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd.get(), reinterpret_cast<struct sockaddr*>(&a), sizeof(a)) != 0) {
      return errors::FailedPrecondition(absl::StrCat("nothing listens on 127.0.0.1:", port));
    }
    fcntl(fd.get(), F_SETFL, O_NONBLOCK);
    return fd;
  }

  absl::Status WriteFile(absl::string_view path, absl::string_view data, int mode) override {
    if (absl::StartsWith(path, "/") || absl::StrContains(path, "..")) {
      return errors::InvalidArgument(absl::StrCat(path, ": must stay inside the workspace"));
    }
    std::string full = absl::StrCat(dir_, "/", path);
    std::string parent = full.substr(0, full.rfind('/'));
    std::system(("mkdir -p '" + parent + "'").c_str());
    std::ofstream(full, std::ios::binary) << data;
    chmod(full.c_str(), mode);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ReadFile(absl::string_view path, uint64_t max_bytes) override {
    std::string data;
    absl::Status st = ReadFileTo(path, max_bytes, [&data](absl::string_view piece) {
      data.append(piece.data(), piece.size());
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return data;
  }

  // Streams as the bwrap session does, so tests see what a caller holds at once.
  absl::Status ReadFileTo(absl::string_view path, uint64_t max_bytes,
                          const FileSink& sink) override {
    std::string full = absl::StrCat(dir_, "/", path);
    struct stat st;
    if (lstat(full.c_str(), &st) != 0) return errors::NotFound("file", path);
    if (!S_ISREG(st.st_mode))
      return errors::InvalidArgument(absl::StrCat(path, ": not a regular file"));
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
      return errors::ResourceExhausted(absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
    }
    std::ifstream in(full, std::ios::binary);
    char buf[65536];
    while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
      absl::Status taken = sink(absl::string_view(buf, static_cast<size_t>(in.gcount())));
      if (!taken.ok()) return taken;
    }
    return absl::OkStatus();
  }

  // The rest of the file calls as the bubblewrap session makes them (its WorkspaceFiles, on
  // this directory, with the test's own ids).
  absl::StatusOr<sandbox::FileListing> ListFiles(absl::string_view dir) override {
    SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
    return files->ListFiles(dir);
  }
  absl::StatusOr<sandbox::FileEntry> StatFile(absl::string_view path) override {
    SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
    return files->Stat(path);
  }
  absl::Status RemoveFile(absl::string_view path, bool recursive) override {
    SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
    return files->Remove(path, recursive);
  }
  absl::Status RenameFile(absl::string_view from, absl::string_view to, bool overwrite) override {
    SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
    return files->Rename(from, to, overwrite);
  }
  absl::Status MakeDirectory(absl::string_view path, bool parents) override {
    SANDGATE_ASSIGN_OR_RETURN(auto files, Files());
    return files->MakeDirectory(path, parents);
  }
  std::vector<std::string> Warnings() const override { return {"host session: no isolation"}; }
  absl::StatusOr<sandbox::ResourceUsage> Usage() const override { return provider_->usage(); }
  sandbox::SessionHealth Health() const override {
    absl::MutexLock lock(&mu_);
    sandbox::SessionHealth h;
    h.expired = !death_.empty();
    h.reason = death_;
    return h;
  }
  void OnEnded(std::function<void()> ended) override {
    bool dead;
    {
      absl::MutexLock lock(&mu_);
      on_ended_ = ended;
      dead = !death_.empty();
    }
    if (dead && ended) ended();
  }
  void Die(const std::string& reason) {
    std::function<void()> ended;
    {
      absl::MutexLock lock(&mu_);
      death_ = reason;
      ended = on_ended_;
    }
    if (ended) ended();
  }

  absl::Status Close() override {
    if (closed_.exchange(true)) return absl::OkStatus();
    provider_->Forget(id_);
    std::system(("rm -rf '" + dir_ + "'").c_str());
    provider_->live()--;
    absl::Status failure = provider_->TakeCloseFailure();
    if (!failure.ok()) return failure;
    if (provider_->journal()) return provider_->journal()->Erase("host:" + id_);
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<std::shared_ptr<const sandbox::local::WorkspaceFiles>> Files() {
    absl::MutexLock lock(&mu_);
    if (files_ == nullptr) {
      SANDGATE_ASSIGN_OR_RETURN(UniqueFd root, sandbox::local::WorkspaceFiles::OpenRoot(dir_));
      files_ = std::make_shared<const sandbox::local::WorkspaceFiles>(std::move(root), getuid(),
                                                                      getgid());
    }
    return files_;
  }

  HostProvider* const provider_;
  const std::string id_, dir_;
  const std::map<std::string, std::string> env_;
  std::atomic<bool> closed_{false};
  mutable absl::Mutex mu_;
  std::string death_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_ended_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const sandbox::local::WorkspaceFiles> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<sandbox::Session>> HostProvider::Create(
    const sandbox::SessionSpec& spec, const CancelToken* cancel) {
  {
    absl::MutexLock lock(&mu_);
    if (!fail_next_.ok()) return std::exchange(fail_next_, absl::OkStatus());
  }
  if (journal_) {
    absl::Status st = journal_->Record({"host:" + spec.id, "local", "session", {{"id", spec.id}}});
    if (!st.ok()) return st;
  }
  char tmpl[] = "/tmp/sg-host-XXXXXX";
  if (!mkdtemp(tmpl)) return errors::FromErrno(errno, "mkdtemp");
  {
    absl::MutexLock lock(&mu_);
    if (spec.on_network_decision) decisions_[spec.id] = spec.on_network_decision;
    root_dirs_[spec.id] = spec.root_dir;
    open_.insert(spec.id);
  }
  ++live_;
  ++created_;
  auto session = std::make_unique<HostSession>(this, spec.id, tmpl, spec.env);
  OnDie(spec.id, [s = session.get()](const std::string& reason) { s->Die(reason); });
  return std::unique_ptr<sandbox::Session>(std::move(session));
}

bool HostProvider::Die(const std::string& session_id, const std::string& reason) {
  // Under the lock: a Close (Forget) waits, so the session outlives the call.
  absl::MutexLock lock(&mu_);
  auto it = deaths_.find(session_id);
  if (it == deaths_.end()) return false;
  it->second(reason);
  return true;
}

bool HostProvider::Decide(const std::string& session_id, const sandbox::NetworkDecision& decision) {
  std::function<void(const sandbox::NetworkDecision&)> cb;
  {
    absl::MutexLock lock(&mu_);
    auto it = decisions_.find(session_id);
    if (it == decisions_.end()) return false;
    cb = it->second;
  }
  cb(decision);
  return true;
}

absl::Status HostProvider::Sweep(const JournalEntry& entry) {
  if (journal_) return journal_->Erase(entry.id);
  return absl::OkStatus();
}

}  // namespace sandgate::testing
