// Spawner: one long-lived thread that starts every sandbox process.
//
// The kernel ties PR_SET_PDEATHSIG to the *thread* that forked, not the process: a sandbox
// forked from a short-lived worker thread would be killed when that thread exits. So every
// start goes through this thread, which lives as long as the Spawner (isolation.md §5).
// The child is not a fork: it shares the daemon's memory until it execs (clone3 with
// CLONE_VM | CLONE_VFORK, on a stack of its own), since copying the page tables of a large
// daemon cost about 2 ms per sandbox and exec dropped the copy again.
//
// The child, before exec: own process group; default signal mask and dispositions; stdio
// dup2'ed; every other fd close-on-exec except `keep_fds`; placed in the given cgroups; its
// open-file limit set (max_open_files); supplementary groups dropped, then gid and uid set;
// PR_SET_PDEATHSIG(SIGKILL) (after the uid change, which would clear it) and a check that the
// daemon did not die meanwhile; chdir("/"); execve with an empty environment. Any failure before
// exec is reported back as an error from Spawn().
//
// Thread safe: Spawn may be called from any thread; calls are serialised on the spawner
// thread. Destroying the Spawner stops the thread, which SIGKILLs every live child that has
// PDEATHSIG set, so it must outlive the sandboxes it started.
#ifndef SANDGATE_SANDBOX_LOCAL_SPAWNER_H_
#define SANDGATE_SANDBOX_LOCAL_SPAWNER_H_

#include <sys/types.h>

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace sandgate::sandbox::local {

struct SpawnPlan {
  std::string path;               // absolute path of the binary
  std::vector<std::string> argv;  // argv[0] included
  int stdin_fd = -1;              // dup2'ed to 0, 1, 2; -1 = /dev/null
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::vector<int> keep_fds;  // inherited at the same numbers
  // Cgroup placement, done before exec so that everything the child starts is born inside.
  // Both ways avoid the kernel's global cgroup_threadgroup_rwsem, whose write side waits for
  // an RCU grace period (5-20 ms here) when a whole process is migrated:
  // v1 directories: the child writes "0" to their `tasks` file (moving only itself, a single
  // thread). v2 directory: the child is cloned straight into it (clone3 CLONE_INTO_CGROUP);
  // where clone3 cannot do that, the child writes "0" to its cgroup.procs instead (slow).
  std::vector<std::string> join_v1;
  std::string join_v2;
  uid_t uid = 0;  // 0 = keep the daemon's ids
  gid_t gid = 0;
  // RLIMIT_NOFILE, soft and hard, for the child and all it starts; 0 = the daemon's. A
  // process without CAP_SYS_RESOURCE in the host's user namespace can never raise it again.
  uint64_t max_open_files = 0;
};

class Spawner {
 public:
  // Starts the thread.
  Spawner();
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Starts and execs `plan` from the spawner thread; returns the child's pid once the exec
  // succeeded. The caller owns the child and must reap it.
  absl::StatusOr<pid_t> Spawn(const SpawnPlan& plan);

 private:
  struct Job {
    const SpawnPlan* plan;
    absl::StatusOr<pid_t> result = absl::UnknownError("not run");
    bool done = false;
  };
  void Loop();

  absl::Mutex mu_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_SPAWNER_H_
