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
#include "tests/bench/baselines.h"
#include "tests/fakes/fake_journal.h"

namespace sandgate::sandbox {
namespace {

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

using bench::Die;
using bench::ForkExecTrue;
using bench::Median;

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

  bench::BareBwrap bare(opts.mount_dir, opts.uid_base + opts.uid_pool_size - 1, opts.init_path);

  ExecRequest true_req;
  true_req.argv = {"true"};
  std::vector<double> create_first, bare_bwrap, exec_one, fork_exec, close_ms;
  for (int i = 0; i < runs; ++i) {
    bare_bwrap.push_back(bare.Run());

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
