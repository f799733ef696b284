// bench_sandbox: what the local provider costs over its bare mechanisms.
//
// Usage (as root): bench_sandbox [runs=50]
//
// Each figure is a median over `runs`, next to a baseline measured in the same run:
//   1. session create until a first command (`true`) is done, against a bare
//      `bwrap <same flags> true` (same binds, seccomp filter and data fds, no cgroups, no
//      init) forked from a spawner thread, exec'd as a pool uid and reaped; target <= 1.3x.
//   2. one more `true` in a live session, against fork+exec+wait of /bin/true from this
//      process; target <= 2 ms more.
// Session Close is timed too (not part of a target).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sandbox/local/bwrap_command.h"
#include "sandbox/local/bwrap_provider.h"
#include "sandbox/local/cgroups.h"
#include "sandbox/local/init_protocol.h"
#include "sandbox/local/seccomp_filter.h"
#include "sandbox/local/spawner.h"
#include "tests/fakes/fake_journal.h"

namespace sandgate::sandbox {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

[[noreturn]] void Die(const absl::Status& s, const char* what) {
  fprintf(stderr, "bench_sandbox: %s: %s\n", what, s.ToString().c_str());
  exit(1);
}

// bwrap with the provider's flags running /usr/bin/true on the session file systems a
// session gets (mounted and unmounted within the time), forked from a spawner thread as a
// pool uid, exec'd, and reaped.
double BareBwrapTrue(local::Spawner& spawner, const local::BwrapConfig& config,
                     const std::string& mount_dir, uid_t uid) {
  const absl::Time start = absl::Now();
  const local::SessionMounts mounts = local::SessionMounts::Plan(mount_dir, uid);
  local::SessionMountSizes sizes;
  sizes.root_bytes = local::kRootTmpfsBytes;
  sizes.root_inodes = local::kRootTmpfsInodes;
  sizes.workspace_bytes = 256ull << 20;
  sizes.workspace_inodes = 16384;
  sizes.shm_bytes = local::DevShmBytes(sizes.workspace_bytes);
  sizes.shm_inodes = local::kDevShmInodes;
  if (absl::Status s = mounts.Mount(sizes); !s.ok()) Die(s, "mount session file systems");
  auto inv = local::PrepareBwrap(config, mounts, {"/usr/bin/true"});
  if (!inv.ok()) Die(inv.status(), "prepare bwrap");
  local::SpawnPlan plan;
  plan.path = config.bwrap_path;
  plan.argv = inv->argv;
  plan.keep_fds = inv->keep_fds();
  plan.uid = uid;
  plan.gid = uid;
  auto pid = spawner.Spawn(plan);
  if (!pid.ok()) Die(pid.status(), "spawn bwrap");
  inv->child_fds.clear();
  int status = 0;
  waitpid(*pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench_sandbox: bare bwrap failed (status %d)\n", status);
    exit(1);
  }
  if (absl::Status s = mounts.Unmount(); !s.ok()) Die(s, "unmount session file systems");
  return Ms(absl::Now() - start);
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
  return Ms(absl::Now() - start);
}

int Main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, atoi(argv[1])) : 50;
  testing::FakeJournal journal;
  BwrapOptions opts;
  opts.init_path = SANDGATE_BENCH_INIT_PATH;
  opts.uid_base = 180000;
  opts.uid_pool_size = 8;
  opts.cgroup_parent = "sandgate-bench";
  auto provider = BwrapProvider::Create(opts, &journal);
  if (!provider.ok()) Die(provider.status(), "create provider");

  local::BwrapConfig bare;
  bare.bwrap_path = opts.bwrap_path;
  bare.init_path = opts.init_path;  // copied in as in a session; the command is still `true`
  bare.hostname = opts.hostname;
  bare.device_dir = opts.mount_dir + "/dev";  // prepared by the provider
  bare.host_binds = local::HostBinds();
  auto bpf = local::BuildSeccompFilter();
  if (!bpf.ok()) Die(bpf.status(), "seccomp");
  bare.seccomp_bpf = *bpf;
  local::Spawner spawner;

  ExecRequest true_req;
  true_req.argv = {"true"};
  std::vector<double> create_first, bare_bwrap, exec_one, fork_exec, close_ms;
  for (int i = 0; i < runs; ++i) {
    bare_bwrap.push_back(
        BareBwrapTrue(spawner, bare, opts.mount_dir, opts.uid_base + opts.uid_pool_size - 1));

    SessionSpec spec;
    spec.id = absl::StrCat("bench-", i);
    absl::Time start = absl::Now();
    auto session = (*provider)->Create(spec, nullptr);
    if (!session.ok()) Die(session.status(), "create session");
    auto r = (*session)->Exec(true_req, nullptr, nullptr);
    if (!r.ok() || !r->ok()) Die(r.status(), "first command");
    create_first.push_back(Ms(absl::Now() - start));

    for (int j = 0; j < 3; ++j) {
      fork_exec.push_back(ForkExecTrue());
      start = absl::Now();
      r = (*session)->Exec(true_req, nullptr, nullptr);
      if (!r.ok() || !r->ok()) Die(r.status(), "command");
      exec_one.push_back(Ms(absl::Now() - start));
    }
    start = absl::Now();
    absl::Status closed = (*session)->Close();
    if (!closed.ok()) Die(closed, "close");
    close_ms.push_back(Ms(absl::Now() - start));
  }

  provider->reset();
  if (absl::StatusOr<local::CgroupHost> host = local::DetectCgroups(opts.cgroup_parent);
      host.ok()) {
    for (const std::string* dir :
         {&host->memory_v1, &host->pids_v1, &host->freezer_v1, &host->cpu_v1, &host->unified}) {
      if (!dir->empty()) rmdir(dir->c_str());
    }
  }

  const double c = Median(create_first), cb = Median(bare_bwrap);
  const double e = Median(exec_one), eb = Median(fork_exec);
  printf("bench_sandbox: %d runs, medians in ms\n\n", runs);
  printf("| measure                          | sandgate | baseline | result   | target   |\n");
  printf("|----------------------------------|---------:|---------:|----------|----------|\n");
  printf("| create + first `true`            | %8.2f | %8.2f | %5.2fx   | <= 1.30x |\n", c, cb,
         c / cb);
  printf("| one more `true` in a live session| %8.2f | %8.2f | %+6.2f ms | <= +2 ms |\n", e, eb,
         e - eb);
  printf("| session Close                    | %8.2f |        - | -        | -        |\n",
         Median(close_ms));
  printf(
      "\nbaselines: bare `bwrap <same flags> true` from a spawner thread as a pool uid;\n"
      "fork+execve+waitpid of /bin/true from this process.\n");
  const bool ok = c <= 1.3 * cb && e - eb <= 2.0;
  printf("targets %s\n", ok ? "met" : "NOT met");
  return ok ? 0 : 2;
}

}  // namespace
}  // namespace sandgate::sandbox

int main(int argc, char** argv) { return sandgate::sandbox::Main(argc, argv); }
