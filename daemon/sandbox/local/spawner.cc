#include "sandbox/local/spawner.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/unique_fd.h"

namespace sandgate::sandbox::local {
namespace {

// What failed in the child, sent back over the error pipe. `stage` points to a string
// literal, valid in the parent too: the child runs in its memory.
struct ChildError {
  const char* stage;
  int err;
};

[[noreturn]] void Fail(int pipe_fd, const char* stage) {
  ChildError e{stage, errno};
  (void)!write(pipe_fd, &e, sizeof(e));
  _exit(127);
}

// Runs between clone and exec of a multithreaded process, in the daemon's own memory while
// the spawner thread waits (see CloneVfork): async-signal-safe calls only, no allocation, no
// write to memory the parent reads but the error, raw syscalls for credentials (glibc's
// wrappers would try to sync threads). Signals arrive blocked; the dispositions are reset
// before they are unblocked, so no daemon handler ever runs in the child.
[[noreturn]] void Child(const char* path, char* const* argv, const int* stdio,
                        const std::vector<int>& keep, const std::vector<const char*>& join,
                        uint64_t max_open_files, uid_t uid, gid_t gid, pid_t parent, int err_fd) {
  if (setpgid(0, 0) != 0) Fail(err_fd, "setpgid");
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // EINVAL for some: fine
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
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
  if (max_open_files != 0) {
    const struct rlimit nofile = {max_open_files, max_open_files};
    if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &nofile, nullptr) != 0)
      Fail(err_fd, "setrlimit(RLIMIT_NOFILE)");
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

// What the child runs: Child() with the arguments the spawner thread prepared.
struct ChildArgs {
  const char* path;
  char* const* argv;
  const int* stdio;
  const std::vector<int>* keep;
  const std::vector<const char*>* join;
  uint64_t max_open_files;
  uid_t uid;
  gid_t gid;
  pid_t parent;
  int err_fd;
};

void RunChild(void* p) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(p);
  Child(a.path, a.argv, a.stdio, *a.keep, *a.join, a.max_open_files, a.uid, a.gid, a.parent,
        a.err_fd);
}

// The child's own stack while it shares the daemon's memory: Child() needs a few KiB.
constexpr size_t kChildStackBytes = 256 * 1024;

#if defined(__x86_64__)
// clone3(CLONE_VM | CLONE_VFORK), created straight in the v2 cgroup `cgroup_fd` when it is
// >= 0, running fn(arg) on `stack` until it execs or exits; the calling thread is suspended
// until then (what posix_spawn does, which cannot place a child in a cgroup). The child
// shares the daemon's memory instead of a copy of it: fork() had to copy the page tables of
// every mapping of the daemon (gRPC, SQLite, every thread's stack) and execve then had to
// tear that copy down, about 2 ms each per sandbox here, which a small process (and the bare
// bwrap baseline) does not pay. Raw assembly because the child must start on its own stack:
// it cannot return through the frames of the suspended parent, and glibc's clone() knows no
// CLONE_INTO_CGROUP.
pid_t CloneVfork(int cgroup_fd, void* stack, size_t stack_size, void (*fn)(void*), void* arg) {
  struct clone_args args;
  memset(&args, 0, sizeof(args));
  args.flags = CLONE_VM | CLONE_VFORK | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<uint64_t>(stack);
  args.stack_size = stack_size;  // the kernel starts the child at stack + stack_size
  if (cgroup_fd >= 0) args.cgroup = static_cast<uint64_t>(cgroup_fd);
  long ret;
  register void (*r12)(void*) asm("r12") = fn;
  register void* r13 asm("r13") = arg;
  asm volatile(
      "syscall\n\t"
      "test %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      // The child: a fresh 16-byte aligned stack and no frame to return to.
      "xor %%ebp, %%ebp\n\t"
      "mov %%r13, %%rdi\n\t"
      "call *%%r12\n\t"
      "mov $60, %%eax\n\t"  // SYS_exit, if fn ever returned
      "mov $127, %%edi\n\t"
      "syscall\n\t"
      "1:\n\t"
      : "=a"(ret)
      : "a"(static_cast<long>(SYS_clone3)), "D"(&args), "S"(sizeof(args)), "r"(r12), "r"(r13)
      : "rcx", "r11", "memory");
  if (ret < 0) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return static_cast<pid_t>(ret);
}
#else
// Elsewhere: a plain fork (the child gets a copy of the daemon's memory) and no cgroup
// placement by clone; the child joins its v2 cgroup by writing cgroup.procs (slow).
pid_t CloneVfork(int cgroup_fd, void*, size_t, void (*fn)(void*), void* arg) {
  if (cgroup_fd >= 0) {
    errno = ENOSYS;
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) fn(arg);
  return pid;
}
#endif

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
  // The children's stack, one at a time (each spawn waits until its child has exec'ed), with
  // a guard page below it. Without it every spawn fails.
  const size_t guard = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapped = mmap(nullptr, guard + kChildStackBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  const int map_errno = errno;
  if (mapped != MAP_FAILED) mprotect(mapped, guard, PROT_NONE);
  absl::Cleanup unmap = [&] {
    if (mapped != MAP_FAILED) munmap(mapped, guard + kChildStackBytes);
  };
  void* const stack = mapped == MAP_FAILED ? nullptr : static_cast<char*>(mapped) + guard;
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
    if (stack == nullptr) {
      result = errors::FromErrno(map_errno, "spawner: mmap of the child stack");
    } else if (!devnull.valid() || pipe2(pipefd, O_CLOEXEC) != 0) {
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
      ChildArgs args{p.path.c_str(),   argv.data(), stdio, &p.keep_fds, &join,
                     p.max_open_files, p.uid,       p.gid, getpid(),    err_w.get()};
      // Blocked in this thread while the child shares its memory (Child unblocks them).
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);
      if (v2.valid()) pid = CloneVfork(v2.get(), stack, kChildStackBytes, RunChild, &args);
      if (pid < 0) {
        if (!p.join_v2.empty()) {
          join_files.push_back(p.join_v2 + "/cgroup.procs");
          join.clear();
          for (const std::string& f : join_files) join.push_back(f.c_str());
        }
        pid = CloneVfork(-1, stack, kChildStackBytes, RunChild, &args);
      }
      const int clone_errno = errno;
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      errno = clone_errno;
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
