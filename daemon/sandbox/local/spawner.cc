#include "sandbox/local/spawner.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/unique_fd.h"

namespace sandgate::sandbox::local {
namespace {

// What failed in the child, sent back over the error pipe. `stage` points to a string
// literal, valid in the parent too: the child is a fork of it.
struct ChildError {
  const char* stage;
  int err;
};

[[noreturn]] void Fail(int pipe_fd, const char* stage) {
  ChildError e{stage, errno};
  (void)!write(pipe_fd, &e, sizeof(e));
  _exit(127);
}

// Runs between fork and exec of a multithreaded process: async-signal-safe calls only, no
// allocation, raw syscalls for credentials (glibc's wrappers would try to sync threads).
[[noreturn]] void Child(const char* path, char* const* argv, const int* stdio,
                        const std::vector<int>& keep, const std::vector<const char*>& join,
                        uid_t uid, gid_t gid, pid_t parent, int err_fd) {
  if (setpgid(0, 0) != 0) Fail(err_fd, "setpgid");
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // EINVAL for some: fine
  for (int i = 0; i < 3; ++i) {
    if (dup2(stdio[i], i) < 0) Fail(err_fd, "dup2 stdio");
  }
  if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) Fail(err_fd, "close_range");
  for (int fd : keep) {
    if (fcntl(fd, F_SETFD, 0) != 0) Fail(err_fd, "keep fd");
  }
  for (const char* file : join) {
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) Fail(err_fd, "join cgroup");
    close(fd);
  }
  if (uid != 0) {
    if (syscall(SYS_setgroups, 0, nullptr) != 0) Fail(err_fd, "setgroups");
    if (syscall(SYS_setresgid, gid, gid, gid) != 0) Fail(err_fd, "setresgid");
    if (syscall(SYS_setresuid, uid, uid, uid) != 0) Fail(err_fd, "setresuid");
  }
  // After the uid change: changing credentials clears the parent-death signal.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) Fail(err_fd, "pdeathsig");
  if (getppid() != parent) {
    errno = ESRCH;
    Fail(err_fd, "parent check (daemon exited)");
  }
  if (chdir("/") != 0) Fail(err_fd, "chdir");
  char* const empty_env[] = {nullptr};
  execve(path, argv, empty_env);
  Fail(err_fd, "execve");
}

// fork(), but with the child created directly in the v2 cgroup `cgroup_fd`. Raw clone3 is
// fine here: the child only makes syscalls and execs.
pid_t ForkIntoCgroup(int cgroup_fd) {
  struct clone_args args;
  memset(&args, 0, sizeof(args));
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cgroup_fd);
  return static_cast<pid_t>(syscall(SYS_clone3, &args, sizeof(args)));
}

}  // namespace

Spawner::Spawner() : thread_([this] { Loop(); }) {}

Spawner::~Spawner() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

absl::StatusOr<pid_t> Spawner::Spawn(const SpawnPlan& plan) {
  Job job{&plan};
  absl::MutexLock l(&mu_);
  if (stopping_) return errors::Unavailable("spawner is stopping");
  queue_.push_back(&job);
  mu_.Await(absl::Condition(&job.done));
  return job.result;
}

void Spawner::Loop() {
  for (;;) {
    Job* job;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]()
                       ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping
      job = queue_.front();
      queue_.pop_front();
    }
    const SpawnPlan& p = *job->plan;
    absl::StatusOr<pid_t> result;
    // Everything the child touches is prepared here, before fork.
    std::vector<char*> argv;
    for (const std::string& a : p.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
    int pipefd[2];
    if (!devnull.valid() || pipe2(pipefd, O_CLOEXEC) != 0) {
      result = errors::FromErrno(errno, "spawner: pipe");
    } else {
      UniqueFd err_r(pipefd[0]), err_w(pipefd[1]);
      const int stdio[3] = {p.stdin_fd >= 0 ? p.stdin_fd : devnull.get(),
                            p.stdout_fd >= 0 ? p.stdout_fd : devnull.get(),
                            p.stderr_fd >= 0 ? p.stderr_fd : devnull.get()};
      std::vector<std::string> join_files;
      for (const std::string& dir : p.join_v1) join_files.push_back(dir + "/tasks");
      pid_t pid = -1;
      UniqueFd v2;
      if (!p.join_v2.empty()) v2.reset(open(p.join_v2.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      std::vector<const char*> join;
      for (const std::string& f : join_files) join.push_back(f.c_str());
      const pid_t parent = getpid();
      if (v2.valid()) pid = ForkIntoCgroup(v2.get());
      if (pid < 0) {
        if (!p.join_v2.empty()) {
          join_files.push_back(p.join_v2 + "/cgroup.procs");
          join.clear();
          for (const std::string& f : join_files) join.push_back(f.c_str());
        }
        pid = fork();
      }
      if (pid == 0) {
        Child(p.path.c_str(), argv.data(), stdio, p.keep_fds, join, p.uid, p.gid, parent,
              err_w.get());
      }
      if (pid < 0) {
        result = errors::FromErrno(errno, "spawner: fork");
      } else {
        err_w.reset();
        ChildError e{};
        ssize_t n;
        do {
          n = read(err_r.get(), &e, sizeof(e));
        } while (n < 0 && errno == EINTR);
        if (n == static_cast<ssize_t>(sizeof(e))) {
          waitpid(pid, nullptr, 0);
          result = errors::FromErrno(e.err, absl::StrCat("spawn ", p.path, ": ", e.stage));
        } else {
          result = pid;
        }
      }
    }
    absl::MutexLock l(&mu_);
    job->result = std::move(result);
    job->done = true;
  }
}

}  // namespace sandgate::sandbox::local
