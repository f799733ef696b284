#include "tests/bench/baselines.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/time/clock.h"
#include "sandbox/local/seccomp_filter.h"
#include "sandbox/local/tmpfs_limits.h"

namespace sandgate::bench {
namespace local = sandbox::local;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void Die(const absl::Status& s, const char* what) {
  std::fprintf(stderr, "bench: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

BareBwrap::BareBwrap(std::string mount_dir, uid_t uid, const std::string& init_path)
    : mount_dir_(std::move(mount_dir)), uid_(uid) {
  if (absl::Status s = local::PrepareDeviceNodes(mount_dir_); !s.ok()) Die(s, "prepare /dev");
  config_.bwrap_path = "/usr/bin/bwrap";
  config_.init_path = init_path;  // copied in as in a session; the command is still `true`
  config_.hostname = "sandgate";
  config_.device_dir = mount_dir_ + "/dev";
  config_.host_binds = local::HostBinds();
  absl::StatusOr<std::string> bpf = local::BuildSeccompFilter();
  if (!bpf.ok()) Die(bpf.status(), "seccomp");
  config_.seccomp_bpf = *bpf;
}

double BareBwrap::Run() {
  const absl::Time start = absl::Now();
  const local::SessionMounts mounts = local::SessionMounts::Plan(mount_dir_, uid_);
  local::SessionMountSizes sizes;
  sizes.root_bytes = local::kRootTmpfsBytes;
  sizes.root_inodes = local::kRootTmpfsInodes;
  sizes.workspace_bytes = 256ull << 20;
  sizes.workspace_inodes = 16384;
  sizes.shm_bytes = local::DevShmBytes(sizes.workspace_bytes);
  sizes.shm_inodes = local::kDevShmInodes;
  if (absl::Status s = mounts.Mount(sizes); !s.ok()) Die(s, "mount session file systems");
  absl::StatusOr<local::BwrapInvocation> inv =
      local::PrepareBwrap(config_, mounts, {"/usr/bin/true"});
  if (!inv.ok()) Die(inv.status(), "prepare bwrap");
  local::SpawnPlan plan;
  plan.path = config_.bwrap_path;
  plan.argv = inv->argv;
  plan.keep_fds = inv->keep_fds();
  plan.uid = uid_;
  plan.gid = uid_;
  absl::StatusOr<pid_t> pid = spawner_.Spawn(plan);
  if (!pid.ok()) Die(pid.status(), "spawn bwrap");
  inv->child_fds.clear();
  int status = 0;
  waitpid(*pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench: bare bwrap failed (status %d)\n", status);
    std::exit(1);
  }
  if (absl::Status s = mounts.Unmount(); !s.ok()) Die(s, "unmount session file systems");
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

double ForkExecTrue() {
  const absl::Time start = absl::Now();
  pid_t pid = fork();
  if (pid == 0) {
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    char* const envp[] = {nullptr};
    execve("/bin/true", argv, envp);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

}  // namespace sandgate::bench
